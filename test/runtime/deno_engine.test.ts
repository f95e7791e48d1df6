/**
 * The engine library under Deno (test/runtime/deno/engine.ts, run as a child
 * process with the npm package `deno`): a URL model over loopback HTTP on the
 * main thread and a file-map model in a Deno Web Worker, both on Deno's
 * navigator.gpu, give the reference greedy continuation of stories260K; a
 * stream aborted by its signal across the worker boundary ends with `abort`.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { REFERENCE_TEXT } from '../models/stories260k.fixture.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DENO = resolve(ROOT, 'node_modules/.bin/deno');

interface EngineResult {
  ok: boolean;
  error?: string;
  local: string;
  remote: string;
  stages: string[];
  info: { type: string; backend: string };
  finish: string | null;
  tokens: number[];
}

function run(): Promise<{ result: EngineResult; log: string }> {
  if (!existsSync(DENO)) throw new Error(`deno not found at ${DENO}: run \`npm ci\` (the npm package "deno" provides it)`);
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' };
  delete env.WEFT_GPU_BACKEND;
  delete env.VK_ICD_FILENAMES;
  return new Promise((done, fail) => {
    execFile(DENO, ['run', '-A', 'test/runtime/deno/engine.ts'], { cwd: ROOT, env, timeout: 240_000 }, (err, stdout, stderr) => {
      const log = `${stdout}\n${stderr}`.trim();
      const line = stdout.split('\n').find((l) => l.startsWith('WEFT_RESULT '));
      if (!line) return fail(new Error(`deno engine run printed no result (${err?.message ?? 'exit 0'}):\n${log}`));
      done({ result: JSON.parse(line.slice('WEFT_RESULT '.length)) as EngineResult, log });
    });
  });
}

describe('engine library on Deno', () => {
  it('createEngine (URL) and createWorkerEngine (file map, Web Worker) give the reference greedy text', async () => {
    const { result, log } = await run();
    expect(result.ok, `${result.error ?? ''}\n${log}`).toBe(true);
    expect(result.info).toMatchObject({ type: 'generate', backend: 'navigator' });
    expect(result.local.length).toBeGreaterThan(10);
    expect(REFERENCE_TEXT.startsWith(result.local), result.local).toBe(true);
    expect(result.remote).toBe(result.local);
    expect(result.stages).toEqual(expect.arrayContaining(['fetch', 'weights', 'ready']));
    expect(result.finish).toBe('abort');
    expect(result.tokens).toEqual([1, 403, 407, 261, 378]);
  }, 300_000);
});
