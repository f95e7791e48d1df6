/**
 * Browser entry for test/browser/documents_idb.test.ts, bundled by esbuild
 * with PGlite left external (an import map in the page points it at the
 * package's own dist files, so its WASM, data and vector.tar.gz load from
 * next to it). Drives the SQL document store over PGlite + pgvector at an
 * `idb://` location through the DocumentStore API the pipeline uses; returns
 * plain JSON data (no throw) so failures show their cause.
 */
import { openPgliteAt } from '../../server/documents/pglite_open.ts';
import { SqlDocumentStore } from '../../server/documents/sql_store.ts';
import type { DocumentRecord, NewDocument, SearchHit } from '../../core/documents/types.ts';

export interface IdbDoc {
  docId: string;
  name: string;
  category: string;
  owners: string[];
  text: string;
  /** Chunk texts and their vectors ([dims] each); empty = left in `chunking`. */
  chunks: { text: string; vector: number[] }[];
}

export interface IdbInput {
  location: string;
  dims: number;
  docs: IdbDoc[];
  /** Search: query vector and filters (categories AND owners). */
  query: { vector: number[]; categories: string[]; owners: string[]; topK: number };
  /** True: record the documents first (the first page load); false: only reopen and read. */
  record: boolean;
}

export interface IdbOutput {
  error?: string;
  /** Wall-clock milliseconds of open (initdb on the first open of a new location). */
  openMs: number;
  inserted: string[];
  records: Record<string, Omit<DocumentRecord, 'createdAt' | 'updatedAt' | 'startedAt' | 'finishedAt'> & { finished: boolean }>;
  chunks: Record<string, string[]>;
  hits: { docId: string; index: number; text: string; score: number }[];
  stateCounts: Record<string, number>;
  /** Re-inserting the first document under a new id, then under its own id: the outcomes. */
  duplicates: string[];
  /** pgvector's version and PGlite's data location as PGlite reports them. */
  vectorVersion: string;
  dataDir: string;
}

async function sha256(text: string): Promise<string> {
  const d = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return Array.from(new Uint8Array(d), (b) => b.toString(16).padStart(2, '0')).join('');
}

async function newDoc(d: IdbDoc, docId = d.docId): Promise<NewDocument> {
  const options = { reader: 'auto' as const, chunker: 'structure' as const, chunkUnits: 256, chunkOverlap: 32, embedder: 'test-embedder' };
  return { docId, name: d.name, category: d.category, owners: d.owners, sha256: await sha256(d.text), source: 'bytes', path: '', format: 'txt', options, content: new TextEncoder().encode(d.text) };
}

export async function run(input: IdbInput): Promise<IdbOutput> {
  const out: IdbOutput = { openMs: 0, inserted: [], records: {}, chunks: {}, hits: [], stateCounts: {}, duplicates: [], vectorVersion: '', dataDir: '' };
  let store: SqlDocumentStore | undefined;
  try {
    const t0 = performance.now();
    const client = await openPgliteAt(input.location);
    store = new SqlDocumentStore(client);
    await store.open({ id: 'test-embedder', dims: input.dims });
    out.openMs = performance.now() - t0;
    out.dataDir = client.pg.dataDir ?? '';
    out.vectorVersion = (await client.query<{ v: string }>(`SELECT extversion AS v FROM pg_extension WHERE extname = 'vector'`)).rows[0]?.v ?? '';
    if (input.record) {
      const outcomes = await store.insert(await Promise.all(input.docs.map((d) => newDoc(d))));
      out.inserted = outcomes.map((o) => o.status);
      // The pipeline's path: claim (queued → reading), chunking, embedding, complete (→ ready).
      for (;;) {
        const job = await store.claim();
        if (!job) break;
        const d = input.docs.find((x) => x.docId === job.record.docId)!;
        if (new TextDecoder().decode(job.content) !== d.text) throw new Error(`claimed content of ${d.docId} differs`);
        await store.transition(d.docId, 'reading', 'chunking', { counts: { characters: d.text.length } });
        if (!d.chunks.length) continue; // left in progress on purpose
        await store.transition(d.docId, 'chunking', 'embedding', { counts: { chunks: d.chunks.length } });
        const stored = d.chunks.map((c, index) => ({ index, text: c.text, tokens: c.text.split(/\s+/).length, heading: null, page: null, embedding: new Float32Array(c.vector) }));
        const ok = await store.complete(d.docId, stored, { chunks: stored.length, tokens: stored.reduce((s, c) => s + c.tokens, 0), characters: d.text.length, pages: null });
        if (!ok) throw new Error(`complete(${d.docId}) refused`);
      }
    }
    for (const r of await store.getMany(input.docs.map((d) => d.docId))) {
      const { createdAt: _c, updatedAt: _u, startedAt: _s, finishedAt, ...rest } = r;
      out.records[r.docId] = { ...rest, finished: finishedAt !== null };
      out.chunks[r.docId] = (await store.chunks(r.docId)).map((c) => c.text);
    }
    const hits: SearchHit[] = await store.search({
      vector: new Float32Array(input.query.vector),
      topK: input.query.topK,
      categories: input.query.categories,
      owners: input.query.owners,
      viewer: { owners: [], enforce: false },
    });
    out.hits = hits.map((h) => ({ docId: h.document.docId, index: h.chunk.index, text: h.chunk.text, score: h.score }));
    out.stateCounts = await store.stateCounts();
    const first = input.docs[0]!;
    const again = await store.insert([await newDoc(first, crypto.randomUUID()), await newDoc({ ...first, text: `${first.text} (edited)` })]);
    out.duplicates = again.map((o) => (o.status === 'duplicate' ? o.reason : o.status));
  } catch (e) {
    out.error = `${(e as Error).name}: ${(e as Error).message}\n${(e as Error).stack ?? ''}`;
  } finally {
    await store?.close().catch(() => {});
  }
  return out;
}
