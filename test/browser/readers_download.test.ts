/**
 * The console's readers page while a reader downloads its model by Hub id, in
 * headless chromium against the real service on loopback and the fake Hub
 * (test/helpers/fake_hub.ts, dripping its bytes so the download lasts a few
 * polls): the start form takes `org/name`, the reader's row shows a progress
 * bar with percent and bytes that advances, and the bar is gone once the
 * reader is ready.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeHub, type FakeHub } from '../helpers/fake_hub.ts';
import { launch, type Browser } from './harness.ts';
import { startWebService, type WebService } from './web_service.ts';

const STORIES = fileURLToPath(new URL('../../models/stories260K', import.meta.url));
const BACKEND = process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles';
const ENV = ['HF_HOME', 'HF_ENDPOINT', 'HF_TOKEN', 'HF_HUB_CACHE'] as const;

type Bar = { loaded: number; total: number; value: number; text: string };

describe('readers page: a Hub download (headless chromium, real server, fake Hub)', () => {
  let hub: FakeHub;
  let home: string;
  let setup: Promise<{ web: WebService; browser: Browser }> | undefined;
  const saved: Record<string, string | undefined> = {};
  const ready = (): Promise<{ web: WebService; browser: Browser }> =>
    (setup ??= (async () => {
      const web = await startWebService();
      const browser = await launch().catch(async (e: unknown) => {
        await web.close();
        throw e;
      });
      return { web, browser };
    })());
  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), 'weft-hf-web-'));
    // ~1 MB in 16 KiB chunks 60 ms apart: about four seconds, several of the page's 1 s polls.
    hub = await startFakeHub({ 'tiny/stories': { dir: STORIES, drip: { bytes: 16 << 10, ms: 60 } } });
    for (const k of ENV) saved[k] = process.env[k];
    delete process.env.HF_TOKEN;
    delete process.env.HF_HUB_CACHE;
    Object.assign(process.env, { HF_HOME: home, HF_ENDPOINT: hub.endpoint });
    await ready().catch(() => undefined);
  }, 120_000);
  afterAll(async () => {
    const s = await setup?.catch(() => undefined);
    await s?.browser.close();
    await s?.web.close();
    await hub?.close();
    for (const k of ENV) saved[k] === undefined ? delete process.env[k] : (process.env[k] = saved[k]);
    if (home) await rm(home, { recursive: true, force: true });
  });

  it('starts a reader by Hub id and shows its download as an advancing bar until it is ready', async () => {
    const { web, browser } = await ready();
    const { page } = browser;
    await page.goto(`${web.page}#/readers`);
    await page.waitForSelector('tr[data-reader-id="primary-0"][data-ready="true"]');
    for (const [sel, v] of Object.entries({ '#rd-model': 'tiny/stories', '#rd-group': 'hub-ui', '#rd-id': 'hub-ui-0', '#rd-backend': BACKEND, '#rd-context': '256' })) await page.fill(sel, v);
    await page.click('#rd-start');

    const row = 'tr[data-reader-id="hub-ui-0"]';
    const read = (): Promise<Bar | null> =>
      page.evaluate((sel) => {
        const d = document.querySelector<HTMLElement>(`${sel} .rd-download`);
        if (!d) return null;
        return { loaded: Number(d.dataset.loaded), total: Number(d.dataset.total), value: d.querySelector('progress')!.value, text: d.querySelector('div')!.textContent ?? '' };
      }, row);
    const bars: Bar[] = [];
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const b = await read();
      if (b && b.total > 0 && b.loaded !== bars.at(-1)?.loaded) bars.push(b);
      if ((await page.getAttribute(row, 'data-ready').catch(() => null)) === 'true') break;
      await page.waitForTimeout(100);
    }
    const partial = bars.filter((b) => b.loaded < b.total);
    expect(partial.length, JSON.stringify(bars)).toBeGreaterThanOrEqual(2);
    for (const b of partial) {
      const pct = Math.floor((100 * b.loaded) / b.total);
      expect(b.value).toBe(pct);
      expect(b.text).toMatch(new RegExp(`^${pct}% · [\\d.]+ (B|KiB|MiB) / 1\\.\\d+ MiB · [\\w.]+$`));
    }
    expect(partial.at(-1)!.loaded).toBeGreaterThan(partial[0]!.loaded);
    await page.waitForSelector(`${row}[data-ready="true"]`, { timeout: 60_000 });
    expect(await read()).toBeNull();
    expect(await page.textContent(`${row} td:nth-child(3)`)).toBe('tiny/stories');
  }, 120_000);
});
