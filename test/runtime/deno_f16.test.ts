/**
 * The native-f16 kernel variants (split-K and tiled prefill attention over an f16 KV cache with KV = f16n,
 * matmul with WDT = f16n through the gemv / tile64 kernels) on Deno's own WebGPU, which has
 * `shader-f16` here (wgpu over Mesa lavapipe; Dawn's SwiftShader lacks it), via
 * test/runtime/deno/f16_kernels.ts in a child process.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DENO = resolve(ROOT, 'node_modules/.bin/deno');

describe('native f16 kernels on Deno (shader-f16)', () => {
  it('split-K attention and the gpu matmul kernels match their references', async () => {
    if (!existsSync(DENO)) throw new Error(`deno not found at ${DENO}: run \`npm ci\``);
    const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' };
    delete env.WEFT_GPU_BACKEND;
    delete env.VK_ICD_FILENAMES;
    const out = await new Promise<string>((done) => {
      execFile(DENO, ['run', '-A', 'test/runtime/deno/f16_kernels.ts'], { cwd: ROOT, env, timeout: 120_000 }, (_err, stdout, stderr) => done(`${stdout}\n${stderr}`));
    });
    const line = out.split('\n').find((l) => l.startsWith('WEFT_RESULT '));
    expect(line, out).toBeDefined();
    const r = JSON.parse(line!.slice('WEFT_RESULT '.length)) as { ok: boolean; error?: string; checks?: string[] };
    expect(r.ok, r.error).toBe(true);
    expect(r.checks!.filter((c) => c.startsWith('attention f16n')).length).toBe(3);
    expect(r.checks!.filter((c) => c.startsWith('prefill attention f16n')).length).toBe(3);
    expect(r.checks!.filter((c) => c.startsWith('matmul f16n')).length).toBeGreaterThanOrEqual(3);
  }, 150_000);
});
