/**
 * The SQL store's contract, the same assertions on every backend: embedded
 * PGlite, PostgreSQL through the `pg` driver against PGlite's socket server
 * (backends.ts), both with pgvector, and against a real PostgreSQL server
 * without pgvector (Debian's, postgres_real.ts: `real[]` vectors scored by
 * weft_cosine):
 *  - the unique constraints decide duplicates even when the pre-check is
 *    skipped (same doc_id; same content + category + owner set) — also for
 *    concurrent inserts — and insert is all-or-nothing per call;
 *  - content bytes, owners, options and timestamps round-trip exactly;
 *  - claim hands each queued document to one caller, oldest first; state
 *    changes are compare-and-set; complete writes chunks once;
 *  - search: cosine order, category / owner filters, viewer visibility,
 *    ready documents only; delete removes the chunks;
 *  - requeueInProgress puts in-progress documents back; claimById takes a
 *    queued or abandoned in-progress document, never a finished one;
 *    unfinished lists what is left; reopening with another embedder is
 *    refused while documents exist; concurrent opens (several processes
 *    starting on one database) do not race.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreEmbedderMismatchError } from '../../core/documents/errors.ts';
import type { NewDocument, StoredChunk } from '../../core/documents/types.ts';
import { openPglite } from '../../server/documents/pglite.ts';
import { openPostgres } from '../../server/documents/postgres.ts';
import { SqlDocumentStore, type SqlClient } from '../../server/documents/sql_store.ts';
import { startPgServer, type PgServer } from './backends.ts';
import { startRealPostgres, type RealPostgres } from './postgres_real.ts';
import { pgliteTemplate } from './helpers.ts';

const DIMS = 4;
const OPTIONS = { reader: 'auto', chunker: 'structure', chunkUnits: 64, chunkOverlap: 8, embedder: 'test' } as const;
const unit = (...v: number[]): Float32Array => {
  const a = Float32Array.from(v);
  const n = Math.hypot(...a);
  return a.map((x) => x / n);
};
const doc = (over: Partial<NewDocument> = {}): NewDocument => ({
  docId: randomUUID(), name: 'a.txt', category: 'kb', owners: [], sha256: randomUUID().replace(/-/g, ''), source: 'bytes', path: '', format: 'txt',
  options: { ...OPTIONS }, content: new TextEncoder().encode(`content ${randomUUID()}`), ...over,
});
const chunk = (index: number, embedding: Float32Array, text = `chunk ${index}`): StoredChunk => ({ index, text, tokens: 2, heading: index ? 'H' : null, page: index === 2 ? 3 : null, embedding });

interface Backend {
  name: string;
  vectors: 'pgvector' | 'real[]';
  open(): Promise<SqlClient>;
  setup?(): Promise<void>;
  teardown?(): Promise<void>;
}

let server: PgServer | null = null;
let real: RealPostgres | null = null;
const backends: Backend[] = [
  { name: 'pglite', vectors: 'pgvector', open: async () => openPglite('memory://', { template: await pgliteTemplate() }) },
  {
    name: 'postgresql server without pgvector',
    vectors: 'real[]',
    setup: async () => void (real = await startRealPostgres()),
    teardown: async () => real?.stop(),
    open: () => openPostgres(real!.url, { max: 4 }),
  },
  {
    name: 'postgres',
    vectors: 'pgvector',
    setup: async () => void (server = await startPgServer()),
    teardown: async () => server?.stop(),
    open: () => openPostgres(server!.url, { max: 1 }),
  },
];

describe.each(backends)('SqlDocumentStore on $name', (backend) => {
  let db: SqlClient;
  let store: SqlDocumentStore;
  beforeAll(async () => {
    await backend.setup?.();
    db = await backend.open();
    store = new SqlDocumentStore(db);
    await store.open({ id: 'test', dims: DIMS });
    expect(store.vectorKind).toBe(backend.vectors);
  });
  afterAll(async () => {
    await store?.close();
    await backend.teardown?.();
  });

  it('round-trips a document: bytes, owners, options, counts, timestamps', async () => {
    const bytes = Uint8Array.from({ length: 300 }, (_, i) => (i * 37) & 255); // every byte value class, incl. 0
    const d = doc({ owners: ['alice', 'bob'], content: bytes, source: 'path', path: 'team/a.txt', format: 'md' });
    expect(await store.insert([d])).toEqual([{ status: 'inserted' }]);
    const r = (await store.get(d.docId))!;
    expect(r).toMatchObject({ docId: d.docId, owners: ['alice', 'bob'], source: 'path', path: 'team/a.txt', format: 'md', state: 'queued', error: null, attempts: 0, sizeBytes: 300, options: OPTIONS });
    expect(r.counts).toEqual({ chunks: 0, tokens: 0, characters: 0, pages: null });
    expect(r.createdAt).toBeInstanceOf(Date);
    expect(Math.abs(r.createdAt.getTime() - Date.now())).toBeLessThan(60_000);
    expect(r.startedAt).toBeNull();
    const job = (await store.claim())!;
    expect(job.record.docId).toBe(d.docId);
    expect(job.record).toMatchObject({ state: 'reading', attempts: 1 });
    expect(Object.getPrototypeOf(job.content)).toBe(Uint8Array.prototype); // not a Buffer (pdfjs refuses those)
    expect(job.content).toEqual(bytes);
    expect(await store.delete(d.docId)).toBe(true);
    expect(await store.get(d.docId)).toBeNull();
    expect(await store.delete(d.docId)).toBe(false);
  });

  it('unique constraints decide duplicates, also without the pre-check and for concurrent inserts', async () => {
    const a = doc({ owners: ['carol'] });
    expect(await store.insert([a])).toEqual([{ status: 'inserted' }]);
    const sameId = doc({ docId: a.docId });
    const sameContent = doc({ sha256: a.sha256, owners: ['carol'] });
    const otherOwners = doc({ sha256: a.sha256, owners: ['dave'] });
    const otherCategory = doc({ sha256: a.sha256, owners: ['carol'], category: 'faq' });
    expect(await store.insert([sameId, sameContent, otherOwners, otherCategory])).toEqual([
      { status: 'duplicate', reason: 'duplicate_doc_id', existing: a.docId },
      { status: 'duplicate', reason: 'duplicate_content', existing: a.docId },
      { status: 'inserted' },
      { status: 'inserted' },
    ]);
    // Two requests racing with the same content: exactly one row wins.
    const sha = randomUUID();
    const racers = Array.from({ length: 4 }, () => doc({ sha256: sha, owners: ['erin'] }));
    const outcomes = (await Promise.all(racers.map((r) => store.insert([r])))).flat();
    expect(outcomes.filter((o) => o.status === 'inserted').length).toBe(1);
    const winner = racers[outcomes.findIndex((o) => o.status === 'inserted')]!;
    for (const o of outcomes.filter((x) => x.status === 'duplicate')) expect(o).toEqual({ status: 'duplicate', reason: 'duplicate_content', existing: winner.docId });
    const found = await store.findDuplicates([{ docId: null, key: { category: 'kb', owners: ['erin'], sha256: sha } }, { docId: a.docId, key: doc() }, { docId: randomUUID(), key: doc() }]);
    expect(found).toEqual([{ reason: 'duplicate_content', existing: winner.docId }, { reason: 'duplicate_doc_id', existing: a.docId }, null]);
    for (const id of [a.docId, otherOwners.docId, otherCategory.docId, winner.docId]) await store.delete(id);
  });

  it('claim: oldest first, each document once; transitions are compare-and-set; complete writes once', async () => {
    const docs = [doc({ name: 'one' }), doc({ name: 'two' }), doc({ name: 'three' })];
    await store.insert(docs);
    const claims = await Promise.all([store.claim(), store.claim(), store.claim(), store.claim()]);
    const got = claims.filter((c) => c !== null).map((c) => c.record.name);
    expect(got.sort()).toEqual(['one', 'three', 'two']);
    expect(claims.filter((c) => c === null).length).toBe(1);
    const [d0, d1, d2] = docs.map((d) => d.docId) as [string, string, string];
    expect(await store.transition(d0, 'reading', 'chunking', { counts: { characters: 10, pages: 2 } })).toBe(true);
    expect(await store.transition(d0, 'reading', 'chunking')).toBe(false); // not in reading any more
    expect(await store.transition(d0, 'chunking', 'embedding', { counts: { chunks: 3, tokens: 6 } })).toBe(true);
    const chunks = [chunk(0, unit(1, 0, 0, 0)), chunk(1, unit(0, 1, 0, 0)), chunk(2, unit(0, 0, 1, 0))];
    expect(await store.complete(d0, chunks, { chunks: 3, tokens: 6, characters: 10, pages: 2 })).toBe(true);
    expect(await store.complete(d0, [chunk(0, unit(1, 1, 1, 1), 'again')], { chunks: 1, tokens: 1, characters: 1, pages: null })).toBe(false);
    expect(await store.chunks(d0)).toEqual(chunks.map(({ embedding: _, ...c }) => c));
    const r0 = (await store.get(d0))!;
    expect(r0).toMatchObject({ state: 'ready', counts: { chunks: 3, tokens: 6, characters: 10, pages: 2 } });
    expect(r0.finishedAt!.getTime()).toBeGreaterThanOrEqual(r0.startedAt!.getTime());
    expect((await store.claim())).toBeNull();
    // A failure keeps its error; a dead process's in-progress documents go back to the queue.
    expect(await store.transition(d1, 'reading', 'failed', { error: { code: 'document_unreadable', message: 'bad' } })).toBe(true);
    expect((await store.get(d1))).toMatchObject({ state: 'failed', error: { code: 'document_unreadable', message: 'bad' } });
    expect(await store.requeueInProgress()).toBe(1);
    expect((await store.get(d2))!.state).toBe('queued');
    expect((await store.claim())!.record).toMatchObject({ docId: d2, attempts: 2 });
    expect(await store.stateCounts()).toMatchObject({ ready: 1, failed: 1, reading: 1, queued: 0 });
    for (const id of [d0, d1, d2]) await store.delete(id);
  });

  it('search: cosine order, filters and visibility in SQL, ready documents only; delete removes chunks', async () => {
    const ready = async (d: NewDocument, vectors: Float32Array[]): Promise<string> => {
      await store.insert([d]);
      const job = (await store.claim())!;
      expect(job.record.docId).toBe(d.docId);
      await store.transition(d.docId, 'reading', 'chunking');
      await store.transition(d.docId, 'chunking', 'embedding');
      await store.complete(d.docId, vectors.map((v, i) => chunk(i, v)), { chunks: vectors.length, tokens: 2 * vectors.length, characters: 9, pages: null });
      return d.docId;
    };
    const pub = await ready(doc({ name: 'public', category: 'geo' }), [unit(1, 0, 0, 0), unit(0, 0, 0, 1)]);
    const alice = await ready(doc({ name: 'alice', owners: ['alice'] }), [unit(0.9, 0.1, 0, 0)]);
    const bob = await ready(doc({ name: 'bob', owners: ['bob', 'zed'] }), [unit(0.5, 0.5, 0, 0)]);
    await store.insert([doc({ name: 'queued' })]); // not ready: never a hit
    const q: { vector: Float32Array; topK: number; categories: string[] | null; owners: string[] | null } = { vector: unit(1, 0, 0, 0), topK: 10, categories: null, owners: null };
    const names = async (over: Partial<typeof q> & { viewer?: { owners: string[]; enforce: boolean } }): Promise<string[]> =>
      (await store.search({ ...q, viewer: { owners: [], enforce: false }, ...over })).map((h) => `${h.document.name}#${h.chunk.index}`);
    const all = await store.search({ ...q, viewer: { owners: [], enforce: false } });
    expect(all.map((h) => `${h.document.name}#${h.chunk.index}`)).toEqual(['public#0', 'alice#0', 'bob#0', 'public#1']);
    expect(all[0]!.score).toBeCloseTo(1, 5);
    expect(all[3]!.score).toBeCloseTo(0, 5);
    expect(all[1]!.document).toEqual({ docId: alice, name: 'alice', category: 'kb', owners: ['alice'] });
    expect(await names({ topK: 2 })).toEqual(['public#0', 'alice#0']);
    expect(await names({ categories: ['geo'] })).toEqual(['public#0', 'public#1']);
    expect(await names({ owners: ['zed', 'nobody'] })).toEqual(['bob#0']);
    expect(await names({ viewer: { owners: ['alice'], enforce: true } })).toEqual(['public#0', 'alice#0', 'public#1']);
    expect(await names({ viewer: { owners: [], enforce: true } })).toEqual(['public#0', 'public#1']);
    expect(await names({ owners: ['bob'], viewer: { owners: ['alice'], enforce: true } })).toEqual([]);
    expect(await store.delete(alice)).toBe(true);
    expect(await store.chunks(alice)).toEqual([]);
    expect(await names({})).toEqual(['public#0', 'bob#0', 'public#1']);
    for (const id of [pub, bob]) await store.delete(id);
  });

  it('claimById: queued or abandoned in progress → reading (attempts + 1); never a finished document; unfinished lists the rest', async () => {
    const [a, b, c] = [doc({ name: 'a' }), doc({ name: 'b' }), doc({ name: 'c' })];
    await store.insert([a, b, c]);
    const first = (await store.claimById(b.docId))!;
    expect(first.record).toMatchObject({ docId: b.docId, state: 'reading', attempts: 1 });
    expect(first.content).toEqual(b.content);
    await store.transition(b.docId, 'reading', 'chunking');
    await store.transition(b.docId, 'chunking', 'embedding');
    // Its worker died mid-job: the next holder of its message takes it over from `embedding`.
    expect((await store.claimById(b.docId))!.record).toMatchObject({ state: 'reading', attempts: 2 });
    await store.transition(b.docId, 'reading', 'chunking');
    await store.transition(b.docId, 'chunking', 'embedding');
    expect(await store.complete(b.docId, [chunk(0, unit(1, 0, 0, 0))], { chunks: 1, tokens: 2, characters: 5, pages: null })).toBe(true);
    expect(await store.claimById(b.docId)).toBeNull(); // ready: a redelivered message finds nothing to do
    expect(await store.claimById(randomUUID())).toBeNull();
    expect((await store.chunks(b.docId)).length).toBe(1);
    await new Promise((r) => setTimeout(r, 20));
    const mine = new Set([a.docId, b.docId, c.docId]);
    const left = (await store.unfinished(10, 100)).filter((x) => mine.has(x.docId)); // (earlier tests left queued documents too)
    expect(left).toEqual([{ docId: a.docId, state: 'queued', attempts: 0 }, { docId: c.docId, state: 'queued', attempts: 0 }]);
    expect((await store.unfinished(60_000, 100)).filter((x) => mine.has(x.docId))).toEqual([]); // touched too recently
    expect((await store.unfinished(10, 1)).length).toBe(1);
    for (const d of [a, b, c]) await store.delete(d.docId);
  });

  it('several processes opening one database at once do not race on the schema', async () => {
    if (backend.vectors === 'pgvector') return; // PGlite, and its socket server: one connection, one process by construction
    const others = await Promise.all([0, 1, 2].map(() => backend.open()));
    try {
      await Promise.all(others.map((db2) => new SqlDocumentStore(db2).open({ id: 'test', dims: DIMS })));
    } finally {
      await Promise.all(others.map((db2) => db2.close()));
    }
  });

  it('refuses another embedder while documents exist', async () => {
    await store.insert([doc()]);
    await expect(store.open({ id: 'other', dims: 8 })).rejects.toBeInstanceOf(StoreEmbedderMismatchError);
    await store.open({ id: 'test', dims: DIMS }); // the same one reopens
  });
});
