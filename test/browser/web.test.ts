/**
 * The web app end to end in headless Debian chromium (WebGPU on
 * SwiftShader), against the real service on loopback: the app is built with
 * Vite into a temp dir and served under /ui/ by frontendRoutes on the
 * inference port, the management API on another port (cross-origin, via
 * same-host CORS). Covers streaming + server-side stop, the reader console,
 * the metrics charts, and browser mode (stories260K in a Web Worker on
 * navigator.gpu, greedy ids equal to the reference, IndexedDB cache on the
 * second load). Screenshots go to test-results/web-*.png.
 */
import { mkdir } from 'node:fs/promises';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFERENCE_IDS } from '../models/stories260k.fixture.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { launch, type Browser } from './harness.ts';
import { startWebService, type WebService } from './web_service.ts';

const SHOTS = 'test-results';
const BACKEND = process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles';

describe('web app (headless chromium, real server)', () => {
  let setup: Promise<{ web: WebService; browser: Browser }> | undefined;
  // Awaited inside each test so a setup failure fails the tests instead of skipping them.
  const ready = (): Promise<{ web: WebService; browser: Browser }> =>
    (setup ??= (async () => {
      await mkdir(SHOTS, { recursive: true });
      const web = await startWebService();
      const browser = await launch().catch(async (e: unknown) => {
        await web.close();
        throw e;
      });
      await browser.page.setViewportSize({ width: 1280, height: 900 });
      browser.page.on('dialog', (d) => void d.accept());
      return { web, browser };
    })());
  beforeAll(async () => void (await ready().catch(() => undefined)), 120_000);
  afterAll(async () => {
    const s = await setup?.catch(() => undefined);
    await s?.browser.close();
    await s?.web.close();
  });

  const shot = async (page: Page, name: string): Promise<void> => {
    // At the top, or the sticky header lands mid-page in a full-page shot (and let smooth scrolls settle).
    await page.waitForTimeout(400);
    await page.evaluate(() => scrollTo({ top: 0, behavior: 'instant' }));
    await page.screenshot({ path: `${SHOTS}/web-${name}.png`, fullPage: true });
  };
  const text = async (page: Page, sel: string): Promise<string> => (await page.textContent(sel)) ?? '';
  const errorsIn = (b: Browser): string[] => b.log.filter((l) => l.startsWith('[pageerror]') || /Content Security Policy|Refused to/.test(l));
  /** Waits for the playground's run to end; returns its finish reason (with the error shown, if any). */
  const finished = async (page: Page, timeout = 30_000): Promise<string> => {
    await page.waitForFunction(() => !['…', '—'].includes(document.querySelector('#pg-finish')?.textContent ?? ''), undefined, { timeout });
    const err = await text(page, '#pg-form-error');
    return `${await text(page, '#pg-finish')}${err ? ` (${err})` : ''}`;
  };
  const fill = async (page: Page, values: Record<string, string>): Promise<void> => {
    for (const [sel, v] of Object.entries(values)) await page.fill(sel, v);
  };

  it('serves the app under a sub-path with relative URLs, content types and caching', async () => {
    const { web } = await ready();
    const html = await fetch(web.page);
    expect(html.headers.get('content-type')).toMatch(/text\/html/);
    expect(html.headers.get('cache-control')).toBe('no-cache');
    const body = await html.text();
    expect(body).toContain('<meta name="weft-inference-base" content="../">');
    expect(body).not.toMatch(/(src|href)="\/(?!\/)/); // no absolute asset paths
    const js = /src="\.\/(assets\/index-[^"]+\.js)"/.exec(body)?.[1];
    expect(js).toBeDefined();
    const asset = await fetch(web.page + js!);
    expect(asset.headers.get('content-type')).toMatch(/javascript/);
    expect(asset.headers.get('cache-control')).toContain('immutable');
    // The worker bundles core/ but leaves the Node-only `webgpu` import unresolved.
    const workerName = /worker-[\w-]+\.js/.exec(await asset.text())?.[0];
    expect(workerName).toBeDefined();
    const worker = await (await fetch(`${web.page}assets/${workerName}`)).text();
    expect(worker).toMatch(/import\(\s*(\/\*[^*]*\*\/\s*)?[`'"]webgpu[`'"]\)/);
    expect(worker).not.toContain('dawn.node');
    expect((await fetch(web.page.slice(0, -1), { redirect: 'manual' })).headers.get('location')).toBe('ui/');
    // The bundled model folder is served read-only; escapes are refused.
    expect(((await (await fetch(`${web.page}models/`)).json()) as { models: { name: string }[] }).models.map((m) => m.name)).toContain('stories260K');
    for (const bad of ['models/..%2f..%2fpackage.json', 'models/stories260K/..%2f..%2fpackage.json', 'models/stories260K/README.md', 'models/%2e%2e/package.json']) {
      expect([400, 404], bad).toContain((await fetch(web.page + bad)).status);
    }
  });

  it('streams a generation, shows tokens/s, and Stop cancels it on the server', async () => {
    const { web, browser } = await ready();
    const { page } = browser;
    await page.goto(`${web.page}#/playground`);
    await page.waitForSelector('#pg-target option[value="primary"]:not([disabled])', { state: 'attached' });
    // A short greedy run first: the streamed ids are the reference continuation.
    await fill(page, { '#pg-prompt': 'Once upon a time', '#pg-max': '16', '#pg-temp': '0' });
    await page.click('#pg-generate');
    expect(await finished(page)).toBe('length');
    expect(JSON.parse(await text(page, '#pg-ids'))).toEqual(REFERENCE_IDS.slice(0, 16));
    expect(await text(page, '#pg-output')).toContain('Once upon a time, there was a little girl');

    // A long run, stopped as soon as tokens flow. At 550-1,600 tokens/s (llvmpipe) the 500 tokens
    // take 0.3-0.9 s, less than a waitForFunction poll plus a CDP click can be late by in a fast
    // phase (the run then finished as `length`), so the page clicks Stop itself, from a
    // MutationObserver, once the count has been reset by the new run and then reached 3.
    await fill(page, { '#pg-max': '500', '#pg-min': '500' });
    await page.evaluate(() => {
      let reset = false; // the first run's count (16) is still shown until Generate resets it
      const obs = new MutationObserver(() => {
        if (Number(document.querySelector('#pg-count')?.textContent) < 3) reset = true;
        if (!reset || Number(document.querySelector('#pg-count')?.textContent) < 3) return;
        obs.disconnect();
        document.querySelector<HTMLButtonElement>('#pg-stop-btn')!.click();
      });
      obs.observe(document.body, { childList: true, characterData: true, subtree: true });
    });
    await page.click('#pg-generate');
    expect(await finished(page, 10_000)).toBe('cancelled');
    expect(await text(page, '#pg-rid')).toMatch(/request [\w-]+/);
    expect(Number(await text(page, '#pg-count'))).toBeLessThan(500);
    expect(Number(await text(page, '#pg-tps'))).toBeGreaterThan(0);
    const inFlight = async (): Promise<number> => ((await (await fetch(`${web.inference}/status`)).json()) as { requests_in_flight: number }).requests_in_flight;
    await expect.poll(inFlight, { timeout: 5000 }).toBe(0);
    await shot(page, 'playground-stopped');

    // Chat mode streams /v1/chat/completions into the transcript.
    await page.selectOption('#pg-mode', 'chat');
    await fill(page, { '#pg-chat-input': 'Tell me a story.', '#pg-max': '12', '#pg-min': '' });
    await page.click('#pg-generate');
    const chat = await finished(page);
    await page.selectOption('#pg-mode', 'prompt');
    expect(chat).toBe('length');
    expect(await page.locator('#pg-transcript .msg').count()).toBe(2);
    expect((await text(page, '#pg-transcript .msg.assistant')).length).toBeGreaterThan(0);
    await page.selectOption('#pg-mode', 'chat');
    await shot(page, 'playground-chat');
    await page.selectOption('#pg-mode', 'prompt');
    expect(errorsIn(browser)).toEqual([]);
  });

  it('starts a reader from the form, sees it become ready, views its config, deletes it', async () => {
    const { web, browser } = await ready();
    const { page } = browser;
    await page.goto(`${web.page}#/readers`);
    await page.waitForSelector('tr[data-reader-id="primary-0"][data-ready="true"]');
    await fill(page, { '#rd-group': 'ui-test', '#rd-id': 'ui-reader', '#rd-backend': BACKEND, '#rd-context': '256' });
    await page.click('#rd-start');
    await page.waitForFunction(() => /Started ui-reader/.test(document.querySelector('#rd-form-msg')?.textContent ?? ''));
    await page.waitForSelector('tr[data-reader-id="ui-reader"][data-ready="true"]', { timeout: 60_000 });
    await page.click('tr[data-reader-id="ui-reader"] >> text=Config');
    await page.waitForFunction(() => (document.querySelector('#rd-config')?.textContent ?? '').includes('hidden_size'));
    await page.click('#rd-config-card >> text=Use in memory calculator');
    expect(await text(page, '#mc-params')).toBe((260_032).toLocaleString('en-US'));
    await shot(page, 'readers');
    await page.click('tr[data-reader-id="ui-reader"] >> text=Delete');
    await page.waitForSelector('tr[data-reader-id="ui-reader"]', { state: 'detached' });
    expect(web.svc.readers.all().map((r) => r.readerId)).toEqual(['primary-0']);
    expect(errorsIn(browser)).toEqual([]);
  });

  it("the memory calculator plans a model on the server's GPU, and shows a refusal with its numbers", async () => {
    const { browser } = await ready();
    const { page } = browser;
    await page.goto(`${(await ready()).web.page}#/readers`);
    await fill(page, { '#mp-model': DEFAULT_MODEL_DIR, '#mc-context': '256', '#mc-batch': '4' });
    await page.click('#mp-run');
    await page.waitForSelector('#mp-fits');
    expect(await text(page, '#mp-seqs')).toBe('4 sequences of 256 tokens');
    expect(await text(page, '#mp-weights')).toMatch(/MiB$/);
    // A 1 MiB budget (the operator's WEFT_GPU_MEMORY) cannot hold it: the refusal and its numbers.
    process.env.WEFT_GPU_MEMORY = String(2 ** 20);
    try {
      await page.click('#mp-run');
      await page.waitForSelector('#mp-refused');
    } finally {
      delete process.env.WEFT_GPU_MEMORY;
    }
    expect(await text(page, '#mp-refused')).toMatch(/does not fit/);
    expect(await text(page, '#mp-budget')).toBe('1.0 MiB (configured)');
    expect(await text(page, '#mp-min-kv')).toMatch(/MiB$/);
    await shot(page, 'memory-plan');
    expect(errorsIn(browser)).toEqual([]);
  });

  it('charts tokens/s, queue depth, batch size, KV blocks and CPU utilization from /metrics; shows the licence state', async () => {
    const { web, browser } = await ready();
    const { page } = browser;
    await page.goto(`${web.page}#/metrics`);
    const traffic = Promise.all(
      [0, 1, 2].map(async (i) => {
        for (let k = 0; k < 2; k++) {
          await fetch(`${web.inference}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: `Story ${i} ${k}`, max_new_tokens: 120, min_new_tokens: 120 }) });
        }
      }),
    );
    await page.waitForFunction(() => Number(document.querySelector('#mx-tps-value')?.textContent) > 0, undefined, { timeout: 30_000 });
    await traffic;
    await page.waitForTimeout(1500);
    for (const id of ['tps', 'queue', 'batch', 'kv', 'cpu']) {
      expect(await page.locator(`#mx-${id} svg.chart path.line`).count(), id).toBe(1);
    }
    expect(Number(await text(page, '#mx-cpu-value'))).toBeGreaterThan(0);
    // GPU utilization has its chart; its line needs timestamp queries, which software adapters may lack.
    expect(await page.locator('#mx-gpu svg.chart').count()).toBe(1);
    expect(await text(page, '#mx-license')).toMatch(/^missing/);
    expect(Number(await text(page, '#mx-requests'))).toBeGreaterThan(0);
    await shot(page, 'metrics');
    // The settings dialog shows where both APIs resolve to.
    await page.click('#open-settings');
    expect(await text(page, '#settings')).toContain(`Management → ${web.management}/`);
    await page.screenshot({ path: `${SHOTS}/web-settings.png` });
    await page.keyboard.press('Escape');
    expect(errorsIn(browser)).toEqual([]);
  });

  it('browser mode: stories260K in a worker on WebGPU gives the reference ids; a reload loads from IndexedDB', async () => {
    const { web, browser } = await ready();
    const { page } = browser;
    const load = async (): Promise<void> => {
      await page.goto(`${web.page}#/playground`);
      await page.waitForSelector('#bm-bundled option[value="stories260K"]', { state: 'attached' });
      await page.click('#bm-load');
      await page.waitForFunction(() => /^Loaded|^Load failed/.test(document.querySelector('#bm-status')?.textContent ?? ''), undefined, { timeout: 90_000 });
      expect(await text(page, '#bm-status'), browser.log.join('\n')).toMatch(/^Loaded stories260K/);
    };
    await load();
    expect(await page.getAttribute('#bm-status', 'data-cache-hits')).toBe('0');
    expect(await page.inputValue('#pg-target')).toBe('__browser__');
    await page.selectOption('#pg-mode', 'prompt');
    await fill(page, { '#pg-prompt': 'Once upon a time', '#pg-max': '64', '#pg-min': '', '#pg-temp': '0' });
    await page.click('#pg-generate');
    expect(await finished(page, 90_000)).toBe('length');
    expect(JSON.parse(await text(page, '#pg-ids'))).toEqual(REFERENCE_IDS);
    await shot(page, 'browser-mode');

    await page.reload();
    await load();
    const files = ((await (await fetch(`${web.page}models/stories260K/`)).json()) as { files: unknown[] }).files.length;
    expect(await page.getAttribute('#bm-status', 'data-cache-hits')).toBe(String(files));
    expect(await text(page, '#bm-status')).toContain(`${files}/${files} files from cache`);
    expect(errorsIn(browser)).toEqual([]);
  });
});
