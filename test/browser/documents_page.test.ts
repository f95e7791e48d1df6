/**
 * The Documents page in headless Debian chromium against the real document
 * routes on loopback: the app is built with Vite into a temp dir and served
 * two levels deep (/proxy/weft/, as behind a reverse proxy) by frontendRoutes
 * in front of the document service (PGlite store, worker pool, API keys on).
 * The embedder is the tests' hashing bag-of-words one (test/documents/
 * helpers.ts) behind a gate that holds every embed call until the test
 * opens it, so the table is seen with documents still `embedding`.
 *
 * Covers: a real drag and drop (DataTransfer made in the page) and the file
 * picker, the accepted / duplicate / invalid lists per file, the table
 * reaching `ready` by polling (and polling stopping then), search ranking
 * the right document first, the category filter, a whole-request JSON error
 * shown with its code, delete, and the tracked list surviving a reload.
 * Screenshots: test-results/web-documents{,-empty,-processing,-dark}.png.
 */
import { mkdir } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { serve as listen, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frontendRoutes } from '../../server/apps/frontend.ts';
import { documentsApp, gated, hashEmbedder, type DocumentsApp } from '../documents/helpers.ts';
import { launch, type Browser } from './harness.ts';
import { buildWebApp } from './web_service.ts';
import { splitList, toBase64 } from '../../web/src/pages/documents_api.ts';
import { batches } from '../../web/src/pages/documents_upload.ts';

const SHOTS = 'test-results';
const BASE = '/proxy/weft/';
const KEY = 'docs-page-key';

const VACATION = [
  '# Leave policy',
  '',
  'Every employee gets twenty five vacation days per year. Unused vacation days carry over to the next year, up to ten days.',
  '',
  '## Sick leave',
  '',
  'Sick leave is separate from vacation and needs a note from a doctor after three days.',
].join('\n');
const BRIDGES = 'The old stone bridge crosses the river near the mill. It was built from granite in 1820 and still carries carts and walkers.';

interface Setup {
  t: DocumentsApp;
  /** Lets embedding run (until then every embed call waits). */
  release(): void;
  server: ServerType;
  origin: string;
  page: string;
  browser: Browser;
  distDir: string;
}

describe('documents page helpers', () => {
  it('base64-encodes any bytes like Buffer does, across its 32 KiB slices', () => {
    for (const n of [0, 1, 2, 3, 0x8000 - 1, 0x8000, 0x8000 + 1, 100_003]) {
      const bytes = new Uint8Array(n).map(() => Math.floor(Math.random() * 256));
      expect(toBase64(bytes), `${n} bytes`).toBe(Buffer.from(bytes).toString('base64'));
    }
  });

  it('groups files into requests by count and bytes, a too-big file alone, order kept', () => {
    const f = (size: number, i: number): { size: number; i: number } => ({ size, i });
    expect(batches([f(4, 0), f(4, 1), f(4, 2)], 10, 5).map((b) => b.map((x) => x.i))).toEqual([[0, 1], [2]]);
    expect(batches([f(1, 0), f(50, 1), f(1, 2)], 10, 5).map((b) => b.map((x) => x.i))).toEqual([[0], [1], [2]]);
    expect(batches([0, 1, 2, 3, 4].map((i) => f(1, i)), 100, 2).map((b) => b.map((x) => x.i))).toEqual([[0, 1], [2, 3], [4]]);
    expect(batches([], 10, 5)).toEqual([]);
  });

  it('splits comma lists, dropping blanks', () => {
    expect(splitList(' alice, bob ,,  ')).toEqual(['alice', 'bob']);
    expect(splitList('')).toEqual([]);
  });
});

describe('documents page (headless chromium, real document service)', () => {
  let setup: Promise<Setup> | undefined;
  const ready = (): Promise<Setup> =>
    (setup ??= (async () => {
      await mkdir(SHOTS, { recursive: true });
      const gate = gated(hashEmbedder());
      const [distDir, t] = await Promise.all([buildWebApp(), documentsApp({ apiKeys: [KEY], embedder: gate.embedder, config: { workers: 3 } })]);
      const root = new Hono();
      frontendRoutes(root, { basePath: BASE, distDir, modelsDir: null });
      root.mount('/', t.app.fetch);
      const server = await new Promise<ServerType>((ok, fail) => {
        const s = listen({ fetch: root.fetch, port: 0, hostname: '127.0.0.1' }, () => ok(s));
        s.once('error', fail);
      });
      const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const browser = await launch();
      await browser.page.setViewportSize({ width: 1280, height: 900 });
      browser.page.on('dialog', (d) => void d.accept());
      return { t, release: gate.release, server, origin, page: origin + BASE, browser, distDir };
    })());
  beforeAll(async () => void (await ready().catch(() => undefined)), 180_000);
  afterAll(async () => {
    const s = await setup?.catch(() => undefined);
    if (!s) return;
    await s.browser.close();
    (s.server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
    await new Promise<void>((ok) => s.server.close(() => ok()));
    await s.t.close();
    const { rm } = await import('node:fs/promises');
    await rm(s.distDir, { recursive: true, force: true });
  });

  const text = async (page: Page, sel: string): Promise<string> => (await page.textContent(sel)) ?? '';
  const errorsIn = (b: Browser): string[] => b.log.filter((l) => l.startsWith('[pageerror]') || /Content Security Policy|Refused to/.test(l));
  /** The upload line of file `name` once it has an outcome other than "uploading". */
  const outcome = async (page: Page, name: string, nth = 0): Promise<{ outcome: string; text: string }> => {
    const li = page.locator('#doc-uploads li', { has: page.locator('.up-name', { hasText: new RegExp(`^${name.replace('.', '\\.')}$`) }) }).nth(nth);
    await li.and(page.locator(':not([data-outcome="uploading"])')).waitFor({ timeout: 30_000 });
    return { outcome: (await li.getAttribute('data-outcome')) ?? '', text: (await li.textContent()) ?? '' };
  };
  const idOf = (line: string): string => /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/.exec(line)?.[0] ?? '';
  const search = async (page: Page, query: string, category = ''): Promise<{ docId: string; score: number; text: string }[]> => {
    await page.fill('#doc-query', query);
    await page.fill('#doc-search-category', category);
    await page.evaluate(() => document.querySelector('#doc-search-meta')!.replaceChildren());
    await page.click('#doc-search-btn');
    await page.waitForFunction(() => (document.querySelector('#doc-search-meta')?.textContent ?? '') !== '' || (document.querySelector('#doc-search-error')?.textContent ?? '') !== '', undefined, { timeout: 20_000 });
    return page.$$eval('#doc-results li.hit', (lis) => lis.map((li) => ({ docId: (li as HTMLElement).dataset.docId ?? '', score: Number(li.querySelector('.score')?.textContent), text: li.textContent ?? '' })));
  };

  it('uploads by drag and drop and by the picker, follows them to ready, searches, reports duplicates and errors, deletes', async () => {
    const { t, release, page: url, origin, browser } = await ready();
    const { page } = browser;
    const recordRequests: string[] = [];
    page.on('request', (r) => {
      if (r.url().includes('/api/v1/document/')) recordRequests.push(`${r.method()} ${r.url()}`);
    });

    // The API key goes in through the Settings dialog, as a user would set it (saving reloads the page).
    // Without it, the page says so in the API's words.
    await page.goto(`${url}#/documents`);
    await page.waitForFunction(() => /missing or invalid API key \(unauthorized\)/.test(document.querySelector('#doc-summary')?.textContent ?? ''));
    await page.click('#open-settings');
    await page.fill('#set-key', KEY);
    await Promise.all([page.waitForEvent('load'), page.click('#settings button[value="save"]')]);
    await page.waitForSelector('#doc-drop');
    expect(await page.textContent('nav a.active')).toBe('Documents');
    await page.waitForFunction(() => /starts with the first upload/.test(document.querySelector('#doc-summary')?.textContent ?? ''));
    await page.screenshot({ path: `${SHOTS}/web-documents-empty.png` });
    await page.fill('#doc-category', 'handbook');
    await page.fill('#doc-owners', 'alice');
    await page.fill('#doc-identity', 'alice');
    await page.press('#doc-identity', 'Tab'); // `change` stores the identity

    // A real drag and drop: the DataTransfer and its File are made in the page; the zone lights up while dragged over.
    const over = await page.evaluate((content) => {
      const dt = new DataTransfer();
      dt.items.add(new File([content], 'vacation.md', { type: 'text/markdown' }));
      (window as unknown as { dt: DataTransfer }).dt = dt;
      const zone = document.querySelector('#doc-drop')!;
      const enter = new DragEvent('dragenter', { dataTransfer: dt, bubbles: true, cancelable: true });
      zone.dispatchEvent(enter);
      const dragover = new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true });
      zone.dispatchEvent(dragover);
      return { highlighted: zone.classList.contains('over'), accepted: enter.defaultPrevented && dragover.defaultPrevented };
    }, VACATION);
    expect(over).toEqual({ highlighted: true, accepted: true });
    const dropped = await page.evaluate(() => {
      const zone = document.querySelector('#doc-drop')!;
      const drop = new DragEvent('drop', { dataTransfer: (window as unknown as { dt: DataTransfer }).dt, bubbles: true, cancelable: true });
      zone.dispatchEvent(drop);
      return { handled: drop.defaultPrevented, highlighted: zone.classList.contains('over') };
    });
    expect(dropped).toEqual({ handled: true, highlighted: false });
    const vac = await outcome(page, 'vacation.md');
    expect(vac.outcome, vac.text).toBe('accepted');
    const vacId = idOf(vac.text);
    expect(vacId).not.toBe('');

    // The picker: several files at once; a legacy binary .doc is invalid on the server, an empty file is refused before sending.
    const ole = Buffer.alloc(512, 0xff);
    Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1, 0, 0, 0x80, 0x81]).copy(ole);
    await page.setInputFiles('#doc-file', [
      { name: 'bridges.txt', mimeType: 'text/plain', buffer: Buffer.from(BRIDGES) },
      { name: 'legacy.doc', mimeType: 'application/msword', buffer: ole },
      { name: 'empty.txt', mimeType: 'text/plain', buffer: Buffer.alloc(0) },
      { name: 'broken.pdf', mimeType: 'application/pdf', buffer: Buffer.from('%PDF-1.7\nthis is not a real PDF body\n%%EOF\n') },
    ]);
    const br = await outcome(page, 'bridges.txt');
    expect(br.outcome, br.text).toBe('accepted');
    const brId = idOf(br.text);
    const doc = await outcome(page, 'legacy.doc');
    expect(doc.outcome).toBe('invalid');
    expect(doc.text).toContain('unsupported_format');
    expect(doc.text).toContain('cannot tell the format of "legacy.doc"');
    const empty = await outcome(page, 'empty.txt');
    expect(empty.outcome).toBe('invalid');
    expect(empty.text).toContain('empty_file');

    // Live states: with embedding held, both text documents sit in `embedding` (polling goes on) and the
    // corrupt PDF — accepted, since its format is known — fails when read, with the reason in its row.
    const pdf = await outcome(page, 'broken.pdf');
    expect(pdf.outcome).toBe('accepted');
    const pdfId = idOf(pdf.text);
    for (const id of [vacId, brId]) await page.waitForSelector(`tr[data-doc-id="${id}"][data-state="embedding"]`, { timeout: 30_000 });
    await page.waitForSelector(`tr[data-doc-id="${pdfId}"][data-state="failed"]`, { timeout: 60_000 });
    expect(await text(page, `tr[data-doc-id="${pdfId}"] td.doc-state`)).toContain('document_unreadable');
    expect(await text(page, `tr[data-doc-id="${vacId}"] td.doc-state`)).toContain('step 4 of 5');
    const whileHeld = recordRequests.length;
    await page.waitForTimeout(1500);
    expect(recordRequests.length).toBeGreaterThan(whileHeld);
    await page.screenshot({ path: `${SHOTS}/web-documents-processing.png` });
    release();
    for (const id of [vacId, brId]) await page.waitForSelector(`tr[data-doc-id="${id}"][data-state="ready"]`, { timeout: 60_000 });
    const vacRow = (await text(page, `tr[data-doc-id="${vacId}"]`)).replace(/\s+/g, ' ');
    expect(vacRow).toContain('vacation.md');
    expect(vacRow).toContain('handbook');
    expect(vacRow).toContain('alice');
    const stored = (await (await t.app.request(`/api/v1/document/${vacId}`, { headers: { authorization: `Bearer ${KEY}`, 'x-weft-owner': 'alice' } })).json()) as { state: string; counts: { chunks: number; tokens: number } };
    expect(stored.state).toBe('ready');
    const cells = await page.$$eval(`tr[data-doc-id="${vacId}"] td.num`, (tds) => tds.map((td) => td.textContent));
    expect(cells.slice(0, 2)).toEqual([String(stored.counts.chunks), stored.counts.tokens.toLocaleString('en-US')]);
    await page.waitForFunction(() => /2 ready · 1 failed/.test(document.querySelector('#doc-summary')?.textContent ?? ''));
    // Final states stop the polling.
    const polled = recordRequests.length;
    await page.waitForTimeout(2000);
    expect(recordRequests.length).toBe(polled);

    // Search: each document is found first by its own subject; the category filter applies.
    const hits = await search(page, 'how many vacation days do employees get');
    expect(hits[0]?.docId).toBe(vacId);
    expect(hits[0]!.score).toBeGreaterThan(0);
    expect(hits.map((h) => h.score)).toEqual([...hits.map((h) => h.score)].sort((a, b) => b - a));
    expect(hits[0]!.text).toContain('vacation.md');
    expect(await page.locator('#doc-results li.hit').first().locator('mark').count()).toBeGreaterThan(0);
    expect((await search(page, 'stone bridge over the river'))[0]?.docId).toBe(brId);
    expect(await search(page, 'vacation days', 'recipes')).toEqual([]);
    expect(await text(page, '#doc-results')).toContain('Nothing found');
    await search(page, 'vacation days');

    // The same content again (same category and owners) is a duplicate of the first one.
    await page.setInputFiles('#doc-file', { name: 'vacation-copy.md', mimeType: 'text/markdown', buffer: Buffer.from(VACATION) });
    const dup = await outcome(page, 'vacation-copy.md');
    expect(dup.outcome).toBe('duplicate');
    expect(dup.text).toContain('duplicate_content');
    expect(idOf(dup.text)).toBe(vacId);

    // A request the server refuses as a whole: its JSON error is shown with code and status, nothing is listed as accepted.
    await page.click('#doc-options summary');
    await page.fill('#doc-units', '1');
    await page.setInputFiles('#doc-file', { name: 'tiny.txt', mimeType: 'text/plain', buffer: Buffer.from('tiny chunks') });
    expect((await outcome(page, 'tiny.txt')).outcome).toBe('error');
    const err = await text(page, '#doc-upload-error');
    expect(err).toContain('chunk_units: must be in [8,');
    expect(err).toContain('invalid_chunk_units · HTTP 400');
    await page.fill('#doc-units', '');

    await page.waitForTimeout(300);
    await page.evaluate(() => scrollTo({ top: 0, behavior: 'instant' }));
    await page.screenshot({ path: `${SHOTS}/web-documents.png`, fullPage: true });
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.screenshot({ path: `${SHOTS}/web-documents-dark.png`, fullPage: true });
    await page.emulateMedia({ colorScheme: 'light' });

    // Delete: the row goes, the server no longer has it, search no longer finds it.
    await page.click(`tr[data-doc-id="${vacId}"] >> text=Delete`);
    await page.waitForSelector(`tr[data-doc-id="${vacId}"]`, { state: 'detached' });
    expect((await fetch(`${origin}/api/v1/document/${vacId}`, { headers: { authorization: `Bearer ${KEY}`, 'x-weft-owner': 'alice' } })).status).toBe(404);
    expect((await search(page, 'how many vacation days do employees get')).map((h) => h.docId)).not.toContain(vacId);

    // The tracked list is kept across a reload, and re-read from the server.
    await page.reload();
    await page.waitForSelector(`tr[data-doc-id="${brId}"][data-state="ready"]`);
    await page.waitForSelector(`tr[data-doc-id="${pdfId}"][data-state="failed"]`);
    expect(await page.locator('#doc-table tbody tr').count()).toBe(2);
    expect(errorsIn(browser)).toEqual([]);
  });
});
