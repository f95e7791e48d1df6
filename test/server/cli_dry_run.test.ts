/**
 * `weft generate --dry-run` as a user runs it (the real bin/weft.js in a child process):
 * the memory plan of a sharded bf16 checkpoint on this device, and a refusal with the
 * numbers (exit 1, code model_too_large) when WEFT_GPU_MEMORY is too small for it; the KV
 * dtype flag; `--help` and a mistyped flag answered with the usage, never a stack trace.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomLlamaTensors, smallLlamaConfig, writeShardedBf16 } from '../helpers/realsize_ckpt.ts';
import { TEST_BACKENDS } from '../helpers/gpu.ts';

const WEFT = fileURLToPath(new URL('../../bin/weft.js', import.meta.url));
let dir: string;

function run(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [WEFT, ...args], { env: { ...process.env, ...env }, timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'weft-dryrun-'));
  const raw = smallLlamaConfig(2);
  writeShardedBf16(dir, raw, randomLlamaTensors(raw), 2);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('weft generate --dry-run', () => {
  it('prints the plan: weights at f16 size, KV pool and tokens of context, without loading', async () => {
    const r = await run(['generate', '--dry-run', '--json', '--dtype', 'f16', '--model', dir, '--backend', TEST_BACKENDS[0]!], { WEFT_GPU_MEMORY: String(512 * 2 ** 20) });
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { plan: { budget: { bytes: number; source: string }; weightBytes: number; kvTokens: number; kvBytesPerToken: number; kvPoolBytes: number } ; dtype: string; max_context: number };
    expect(out.plan.budget).toEqual({ bytes: 512 * 2 ** 20, source: 'configured' });
    // 2 layers: 2 x (256x256 q + 2 x 128x256 k,v + 256x256 o + 3 x 512x256) + 2 x 512x256 embed/head halves, + f32 norms.
    const halves = 2 * (65536 + 65536 + 65536 + 393216) + 2 * 131072;
    expect(out.plan.weightBytes).toBe(halves * 2 + (2 * 2 + 1) * 256 * 4);
    // f32 KV: 2 layers x 2 kv heads x 64 x 4 B x (K, V).
    expect(out.plan.kvBytesPerToken).toBe(2048);
    expect(out.plan.kvTokens).toBe(out.max_context); // maxSeqs 1: one full context
  });

  it('refuses with the numbers when the budget is too small', async () => {
    const r = await run(['generate', '--dry-run', '--model', dir, '--backend', TEST_BACKENDS[0]!], { WEFT_GPU_MEMORY: String(2 ** 20) });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/weft: the model does not fit .*weights \d\.\d MiB .* > budget 1\.0 MiB \(configured\).*\[model_too_large\]/);
  });

  it('--kv-cache-dtype f16 halves the KV bytes per token; an unknown dtype is refused', async () => {
    const r = await run(['generate', '--dry-run', '--json', '--kv-cache-dtype', 'f16', '--model', dir, '--backend', TEST_BACKENDS[0]!], { WEFT_GPU_MEMORY: String(512 * 2 ** 20) });
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { kv_dtype: string; plan: { kvBytesPerToken: number } };
    expect(out).toMatchObject({ kv_dtype: 'f16', plan: { kvBytesPerToken: 1024 } });
    const bad = await run(['generate', '--dry-run', '--kv-cache-dtype', 'f8', '--model', dir]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/--kv-cache-dtype must be one of auto, f32, f16, q8, got "f8" \[invalid_argument\]/);
  });
});

describe('weft usage', () => {
  it('--help prints the usage (exit 0); a mistyped flag names itself and prints the usage (exit 2), no stack trace', async () => {
    const help = await run(['generate', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^usage:\n/);
    const bad = await run(['generate', '--max-tokens', '5', 'hi']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^weft generate: Unknown option '--max-tokens'\nusage:/);
    expect(bad.stderr).not.toMatch(/\n\s+at /);
  });
});

