/**
 * End to end with a real embedder: the service loads the BERT fixture from
 * its directory (documents.embedder) onto a GPU context, and real files of
 * each format generated here (PDF, DOCX, HTML, Markdown, text, CSV, JSON) go
 * from upload to `ready` in one wait_for_completion request; chunk sizes
 * respect the embedder's input limit; searching a chunk's own text ranks that
 * chunk first.
 *
 * The fixture is a tiny random model, so paraphrase retrieval is only checked
 * with a trained embedder: WEFT_TEST_DOCUMENTS_EMBEDDER (a sentence-transformers
 * directory), or the bundled models/use-lite once the document embedder can
 * load it; skipped otherwise.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareGpuEnv } from '../../core/gpu/device.ts';
import { BUNDLED_EMBEDDER } from '../../server/documents/config.ts';
import { embedderProblem } from '../../server/documents/embedder.ts';
import { makeDocx, makePdf } from './fixtures.ts';
import { b64, documentsApp, json, type DocumentsApp } from './helpers.ts';

const FIXTURE = fileURLToPath(new URL('../fixtures/encoders/bert', import.meta.url));
const BACKEND = process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles';
// The bundled embedder counts once the document embedder can load it.
const TRAINED = process.env.WEFT_TEST_DOCUMENTS_EMBEDDER ?? (existsSync(`${BUNDLED_EMBEDDER}/config.json`) && !(await embedderProblem(BUNDLED_EMBEDDER)) ? BUNDLED_EMBEDDER : '');

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

describe.skipIf(!TRAINED)('paraphrase retrieval with a trained embedder', () => {
  let t: DocumentsApp;
  beforeAll(async () => {
    prepareGpuEnv();
    t = await documentsApp({ config: { embedder: TRAINED, backend: BACKEND } });
  });
  afterAll(() => t?.close());

  it('a paraphrased query ranks the right document first on a small labelled set', async () => {
    const docs = {
      'tea.txt': 'Green tea sales increased sharply during the spring quarter.',
      'leave.txt': 'Every employee is entitled to twenty days of paid vacation per year.',
      'bridge.txt': 'An ancient stone bridge spans the river close to the old mill.',
      'backup.txt': 'Always keep copies of your data on a separate disk in case of failure.',
      'fox.txt': 'A quick brown fox leaps over a sleeping dog in the yard.',
    };
    const accepted = await loadFiles(t, Object.entries(docs).map(([name, text]) => ({ name, bytes: text })));
    expect(accepted.every((a) => a.state === 'ready')).toBe(true);
    const labelled: [string, string][] = [
      ['How many holidays do workers get annually?', 'leave.txt'],
      ['Which beverage sold more in springtime?', 'tea.txt'],
      ['old crossing made of rock over a stream', 'bridge.txt'],
      ['protect files against a hard drive crash', 'backup.txt'],
      ['an animal jumping above a resting hound', 'fox.txt'],
    ];
    for (const [query, want] of labelled) {
      const res = await t.app.request('/api/v1/documents/search', json({ query, top_k: 1 }));
      const top = ((await res.json()) as { results: { document: { name: string } }[] }).results[0];
      expect(top?.document.name, query).toBe(want);
    }
  });
});
