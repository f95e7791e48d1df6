/**
 * The embedded document store in a real browser: headless Debian chromium
 * opens the SQL store over PGlite + pgvector at `idb://weft-test` (IndexedDB),
 * records documents through the DocumentStore API the pipeline uses (insert,
 * claim, transitions, complete with vectors), searches with a category +
 * owner filter, and is refused duplicates (the unique constraints). The page
 * is then reloaded — a new JS context, the same browser profile — and the
 * store reopened: the records, states, chunks and search result must be the
 * same, read back from IndexedDB. PGlite is served from its package's dist
 * directory through an import map, so its WASM and pgvector's tarball load
 * as a browser app would load them. WEFT_TEST_SEED fixes the vectors.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { randn } from '../helpers/gpu.ts';
import type { IdbDoc, IdbInput, IdbOutput } from './entry_documents_idb.ts';
import { bundle, callExport, launch, serve, type Browser, type StaticServer } from './harness.ts';

const seed = Number(process.env.WEFT_TEST_SEED ?? Math.floor(Math.random() * 1e9));
const DIMS = 16;
const PGLITE = ['@electric-sql/pglite', '@electric-sql/pglite-pgvector'];

const PAGE = `<!doctype html><meta charset="utf-8"><title>weft documents idb</title>
<script type="importmap">${JSON.stringify({ imports: Object.fromEntries(PGLITE.map((p) => [p, `/weft/${p.split('/')[1]}/dist/index.js`])) })}</script>`;

let n = 0;
const vec = (): number[] => Array.from(randn(DIMS, seed + ++n));
const doc = (i: number, category: string, owners: string[], chunks: number): IdbDoc => ({
  docId: `00000000-0000-4000-8000-00000000000${i}`,
  name: `doc${i}.txt`,
  category,
  owners,
  text: `document ${i} of seed ${seed}`,
  chunks: Array.from({ length: chunks }, (_, k) => ({ text: `doc ${i} chunk ${k}`, vector: vec() })),
});
// A: visible to the query (manuals, alice), two chunks. B: other owner. C: other category.
// D: matches the filter but is left in `chunking` (not ready, so never a hit).
const DOCS = [doc(1, 'manuals', ['alice'], 2), doc(2, 'manuals', ['bob'], 1), doc(3, 'notes', ['alice'], 1), doc(4, 'manuals', ['alice', 'carol'], 0)];
const QUERY = { vector: vec(), categories: ['manuals'], owners: ['alice'], topK: 10 };

function cosine(a: number[], b: number[]): number {
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) [ab, aa, bb] = [ab + a[i]! * b[i]!, aa + a[i]! * a[i]!, bb + b[i]! * b[i]!];
  return ab / Math.sqrt(aa * bb);
}

/** The hits the filter allows, best first, with reference cosine scores. */
const EXPECTED = DOCS[0]!.chunks.map((c, index) => ({ docId: DOCS[0]!.docId, index, text: c.text, score: cosine(QUERY.vector, c.vector) })).sort((a, b) => b.score - a.score);

describe('document store in the browser (PGlite idb://, headless chromium)', () => {
  let setup: Promise<{ server: StaticServer; browser: Browser }> | undefined;
  const ready = (): Promise<{ server: StaticServer; browser: Browser }> =>
    (setup ??= (async () => {
      const files = await bundle({ entry_documents_idb: 'test/browser/entry_documents_idb.ts' }, { external: PGLITE });
      const server = await serve({ files: { ...files, 'index.html': PAGE }, root: 'node_modules/@electric-sql', prefix: '/weft' });
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

  const run = async (record: boolean): Promise<IdbOutput> => {
    const { server, browser } = await ready();
    const input: IdbInput = { location: 'idb://weft-test', dims: DIMS, docs: DOCS, query: QUERY, record };
    const out = await callExport<IdbOutput>(browser.page, `${server.url}entry_documents_idb.js`, 'run', input);
    expect(out.error, `seed ${seed}: ${out.error}\n${browser.log.join('\n')}`).toBeUndefined();
    return out;
  };

  const checkStored = (out: IdbOutput): void => {
    expect(out.vectorVersion).toMatch(/^\d+\.\d+/);
    expect(out.dataDir).toBe('idb://weft-test');
    const a = out.records[DOCS[0]!.docId]!;
    expect(a).toMatchObject({ state: 'ready', category: 'manuals', owners: ['alice'], attempts: 1, finished: true, error: null });
    expect(a.counts).toEqual({ chunks: 2, tokens: 8, characters: DOCS[0]!.text.length, pages: null });
    expect(out.records[DOCS[1]!.docId]!.state).toBe('ready');
    expect(out.records[DOCS[2]!.docId]!.state).toBe('ready');
    expect(out.records[DOCS[3]!.docId]).toMatchObject({ state: 'chunking', owners: ['alice', 'carol'], finished: false });
    expect(out.chunks[DOCS[0]!.docId]).toEqual(['doc 1 chunk 0', 'doc 1 chunk 1']);
    expect(out.chunks[DOCS[3]!.docId]).toEqual([]);
    expect(out.stateCounts).toEqual({ queued: 0, reading: 0, chunking: 1, embedding: 0, ready: 3, failed: 0 });
    // Only A's chunks pass (B: other owner, C: other category, D: not ready), ranked by cosine.
    expect(out.hits.map((h) => [h.docId, h.index, h.text])).toEqual(EXPECTED.map((h) => [h.docId, h.index, h.text]));
    out.hits.forEach((h, i) => expect(h.score, `seed ${seed}`).toBeCloseTo(EXPECTED[i]!.score, 5));
    // Same content under a new id, then a new content under A's id: both refused by the constraints.
    expect(out.duplicates).toEqual(['duplicate_content', 'duplicate_doc_id']);
  };

  let first: IdbOutput | undefined;

  it('records documents with vectors, searches with a category + owner filter, refuses duplicates', async () => {
    first = await run(true);
    expect(first.inserted).toEqual(['inserted', 'inserted', 'inserted', 'inserted']);
    checkStored(first);
  }, 600_000);

  it('after a page reload (new JS context) reopens the same IndexedDB store and finds the same data', async () => {
    expect(first, 'the first test recorded the documents').toBeDefined();
    const { browser } = await ready();
    await browser.page.evaluate(() => ((globalThis as unknown as { weftMarker: number }).weftMarker = 1));
    await browser.page.reload();
    expect(await browser.page.evaluate(() => (globalThis as unknown as { weftMarker?: number }).weftMarker)).toBeUndefined();
    const dbs = await browser.page.evaluate(async () => (await indexedDB.databases()).map((d) => d.name));
    expect(dbs).toContain('/pglite/weft-test');
    const again = await run(false);
    checkStored(again);
    expect(again.records).toEqual(first!.records);
    expect(again.hits).toEqual(first!.hits);
    console.log(`idb open: first ${first!.openMs.toFixed(0)} ms (initdb), after reload ${again.openMs.toFixed(0)} ms; pgvector ${again.vectorVersion}`);
  }, 600_000);
});
