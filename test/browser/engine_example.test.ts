/**
 * The engine library in headless Debian chromium, the way an app uses it: the
 * example app (examples/web) is built with Vite into a temp dir, served on
 * loopback beside models/stories260K, and its page runs the model in a Web
 * Worker through createWorkerEngine and again on the page's thread through
 * createEngine (WebGPU on SwiftShader). Greedy text equals the reference
 * continuation in both; streaming, aborts across the worker boundary, typed
 * errors and unload are checked from the page's own results.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'vite';
import { afterAll, describe, expect, it } from 'vitest';
import { REFERENCE_TEXT } from '../models/stories260k.fixture.ts';
import { launch, serve, type Browser, type Files, type StaticServer } from './harness.ts';

interface RunResult {
  greedy: string;
  localGreedy: string;
  chunks: string[];
  finish: (string | null)[];
  plain: string;
  aborted: string | null;
  n: number;
  badCode: string | null;
  tokens: number[];
  info: { type: string; backend: string; model: string };
  afterUnload: string | null;
}

describe('engine library example app (headless chromium)', () => {
  let setup: Promise<{ server: StaticServer; browser: Browser; out: string }> | undefined;
  const ready = (): Promise<{ server: StaticServer; browser: Browser; out: string }> =>
    (setup ??= (async () => {
      const out = await mkdtemp(join(tmpdir(), 'weft-example-'));
      await build({ configFile: 'examples/web/vite.config.ts', logLevel: 'error', build: { outDir: out, emptyOutDir: true } });
      const files: Files = {};
      for (const f of await readdir('models/stories260K')) files[`models/stories260K/${f}`] = new Uint8Array(await readFile(join('models/stories260K', f)));
      const server = await serve({ files, root: out, prefix: '/app' });
      const browser = await launch().catch(async (e: unknown) => {
        await server.close();
        throw e;
      });
      await browser.page.goto(server.url);
      return { server, browser, out };
    })());

  afterAll(async () => {
    const s = await setup?.catch(() => undefined);
    await s?.browser.close();
    await s?.server.close();
    if (s) await rm(s.out, { recursive: true, force: true });
  });

  it('the built page runs the model in a worker and on the page, alike, with streams, aborts and errors', async () => {
    const { browser } = await ready();
    const r = (await browser.page.evaluate(`globalThis.weftExample.run('./models/stories260K/')`)) as RunResult;
    const why = browser.log.join('\n');
    expect(r.info, why).toMatchObject({ type: 'generate', backend: 'navigator', model: 'stories260K' });
    expect(r.greedy.length).toBeGreaterThan(10);
    expect(REFERENCE_TEXT.startsWith(r.greedy), `${JSON.stringify(r.greedy)} is not a prefix of the reference`).toBe(true);
    expect(r.localGreedy).toBe(r.greedy);
    expect(r.chunks.join('')).toBe(r.plain);
    expect(r.finish.at(-1)).toMatch(/^(stop|length)$/);
    expect(r.aborted).toBe('abort');
    expect(r.n).toBeLessThan(100);
    expect(r.badCode).toBe('unsupported_parameter');
    expect(r.tokens.slice(0, 5)).toEqual([1, 403, 407, 261, 378]);
    expect(r.afterUnload).toBe('engine_unloaded');
  });
});
