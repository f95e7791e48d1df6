/**
 * The portable core in a real browser: bundles test/browser/entry_smoke.ts
 * with esbuild, serves it on http://127.0.0.1, opens it in headless Debian
 * chromium (WebGPU on SwiftShader) and checks that rms_norm on a random shape
 * matched the CPU reference in both kernel variants. Missing chromium fails
 * the test (it is never skipped). WEFT_TEST_SEED fixes the shape.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { randn, rng, TOL_F32 } from '../helpers/gpu.ts';
import type { SmokeInput, SmokeOutput } from './entry_smoke.ts';
import { BLANK_HTML, bundle, callExport, launch, serve, type Browser, type StaticServer } from './harness.ts';

const seed = Number(process.env.WEFT_TEST_SEED ?? Math.floor(Math.random() * 1e9));

describe('browser (headless chromium)', () => {
  // Set up once, but awaited inside each test so a setup failure (say, no
  // chromium) fails the tests themselves instead of leaving them skipped.
  let setup: Promise<{ server: StaticServer; browser: Browser }> | undefined;
  const ready = (): Promise<{ server: StaticServer; browser: Browser }> =>
    (setup ??= (async () => {
      const files = await bundle({ entry_smoke: 'test/browser/entry_smoke.ts' });
      const server = await serve({ files: { ...files, 'index.html': BLANK_HTML }, prefix: '/weft' });
      const browser = await launch().catch(async (e: unknown) => {
        await server.close();
        throw e;
      });
      await browser.page.goto(server.url);
      return { server, browser };
    })());

  afterAll(async () => {
    const s = await setup?.catch(() => undefined);
    await s?.browser.close();
    await s?.server.close();
  });

  it('serves the bundle and runs in a secure context with navigator.gpu', async () => {
    const { server, browser } = await ready();
    const res = await fetch(`${server.url}entry_smoke.js`);
    expect(res.headers.get('content-type')).toMatch(/javascript/);
    expect(await res.text()).toContain('rms_norm');
    expect((await fetch(`${server.origin}/entry_smoke.js`)).status).toBe(404); // only under the prefix
    const env = await browser.page.evaluate(() => ({ secure: globalThis.isSecureContext, gpu: 'gpu' in navigator }));
    expect(env).toEqual({ secure: true, gpu: true });
  });

  it('rms_norm on navigator.gpu matches the reference on a random shape', async () => {
    const { server, browser } = await ready();
    const r = rng(seed);
    const rows = 1 + Math.floor(r() * 24);
    const dim = 1 + Math.floor(r() * 700);
    const input: SmokeInput = {
      rows,
      dim,
      x: Array.from(randn(rows * dim, seed + 1)),
      w: Array.from(randn(dim, seed + 2)),
      eps: 1e-5,
      atol: TOL_F32.atol,
      rtol: TOL_F32.rtol,
    };
    const out = await callExport<SmokeOutput>(browser.page, `${server.url}entry_smoke.js`, 'run', input);
    const why = `seed ${seed} rows=${rows} dim=${dim}: ${JSON.stringify(out)}\n${browser.log.join('\n')}`;
    expect(out.error, why).toBeUndefined();
    expect(out.ok, why).toBe(true);
    expect(out.backend).toBe('navigator');
    expect(out.adapter.length).toBeGreaterThan(0);
    expect(out.variants.map((v) => v.variant)).toEqual(['cpu', 'gpu']);
    expect(out.maxErr).toBeLessThan(1e-3);
  });
});
