/**
 * Runs the core under Deno (test/runtime/deno/smoke.ts) as a child process,
 * once on Deno's own WebGPU (navigator.gpu: wgpu, here over Mesa lavapipe,
 * apt mesa-vulkan-drivers) and once on Dawn through npm:webgpu, and checks
 * that rms_norm matched its CPU reference on a random shape in both. Deno
 * comes from the npm package `deno` (node_modules/.bin/deno).
 * WEFT_TEST_SEED fixes the shape; a failure message names the seed.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DENO = resolve(ROOT, 'node_modules/.bin/deno');
const SCRIPT = 'test/runtime/deno/smoke.ts';

interface SmokeResult {
  ok: boolean;
  error?: string;
  via: 'navigator' | 'dawn';
  adapter: string;
  seed: number;
  rows: number;
  dim: number;
  variants: { variant: string; maxErr: number }[];
  ms: number;
}

function runSmoke(seed: number, extraEnv: Record<string, string>): Promise<{ result: SmokeResult; log: string }> {
  if (!existsSync(DENO)) throw new Error(`deno not found at ${DENO}: run \`npm ci\` (the npm package "deno" provides it)`);
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', ...extraEnv };
  // Node-side backend choices must not leak into Deno's own adapter search.
  delete env.WEFT_GPU_BACKEND;
  if (!extraEnv.VK_ICD_FILENAMES) delete env.VK_ICD_FILENAMES;
  return new Promise((done, fail) => {
    execFile(DENO, ['run', '-A', SCRIPT, String(seed)], { cwd: ROOT, env, timeout: 90_000 }, (err, stdout, stderr) => {
      const log = `${stdout}\n${stderr}`.trim();
      const line = stdout.split('\n').find((l) => l.startsWith('WEFT_RESULT '));
      if (!line) return fail(new Error(`deno smoke printed no result (${err?.message ?? 'exit 0'}):\n${log}`));
      done({ result: JSON.parse(line.slice('WEFT_RESULT '.length)) as SmokeResult, log });
    });
  });
}

const seed = Number(process.env.WEFT_TEST_SEED ?? Math.floor(Math.random() * 1e9));

describe('Deno runtime', () => {
  it.each([
    ['navigator', {}],
    ['dawn', { WEFT_DENO_GPU: 'dawn' }],
  ] as const)('rms_norm through core/gpu on Deno via %s matches the reference', async (via, extraEnv) => {
    const { result, log } = await runSmoke(seed, extraEnv);
    expect(result.ok, `seed ${seed}: ${result.error ?? ''}\n${log}`).toBe(true);
    expect(result.via, via === 'navigator' ? 'Deno found no navigator.gpu adapter (needs apt mesa-vulkan-drivers)' : '').toBe(via);
    expect(result.adapter).toMatch(via === 'dawn' ? /swiftshader/i : /./);
    expect(result.variants.map((v) => v.variant)).toEqual(['cpu', 'gpu']);
    for (const v of result.variants) expect(v.maxErr, `seed ${seed} ${v.variant}`).toBeLessThan(1e-3);
  });
});
