/**
 * Document ingestion across processes, on real parts: a `nats-server` with
 * JetStream (test/server/nats_helpers.ts), a real PostgreSQL server without
 * pgvector (postgres_real.ts), two front ends that only accept and two
 * document workers, each its own process (nats_child.ts).
 *
 * 50 documents go to front end A (202, every one accepted); the same content
 * sent to front end B is a duplicate (one store behind both). One worker is
 * SIGKILLed while it holds documents mid-job: their messages come back after
 * ack_wait and the other worker takes them over. In the end every document
 * is `ready` as read from B, each was completed once (no `READY` twice), the
 * documents the dead worker held were finished by the other on a second
 * attempt, every document has exactly its chunks (indices 0..n-1, the count
 * an uninterrupted chunking gives), the work queue is empty, and B's status
 * and search see it all. Also: wait_for_completion on a front end that
 * processes nothing answers with the final state, and a document committed
 * without a message (a front end dead before its publish) is republished by
 * the workers' reconciliation and processed. Then the broker is killed and
 * restarted with documents in flight and a load sent while it is down: every
 * one ends ready, none completed twice.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chunkBlocks } from '../../core/documents/chunker.ts';
import { readDocument } from '../../core/documents/readers/index.ts';
import { openPostgres } from '../../server/documents/postgres.ts';
import { SqlDocumentStore } from '../../server/documents/sql_store.ts';
import { startNats, type NatsServer } from '../server/nats_helpers.ts';
import { b64, hashEmbedder } from './helpers.ts';
import { startRealPostgres, type RealPostgres } from './postgres_real.ts';

const CHILD = fileURLToPath(new URL('./nats_child.ts', import.meta.url));

interface Child {
  proc: ChildProcess;
  port: number;
  reading: string[];
  ready: string[];
  /** Resolves once the process ended and its stdout and stderr were read to the end ('close', not 'exit': lines printed before a kill may still be in the pipe at 'exit'). */
  exited: Promise<void>;
  err: () => string;
}

function startChild(role: 'front' | 'worker', natsUrl: string, databaseUrl: string): Promise<Child> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ['--import', 'tsx', CHILD, role, natsUrl, databaseUrl], { stdio: ['ignore', 'pipe', 'pipe'] });
    const c: Child = { proc, port: 0, reading: [], ready: [], exited: new Promise<void>((r) => proc.once('close', () => r())), err: () => err };
    let buf = '';
    let err = '';
    proc.stderr!.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-6000)));
    proc.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.startsWith('PORT ')) resolve({ ...c, port: Number(line.slice(5)) });
        else if (line === 'CONSUMING') resolve(c);
        else if (line.startsWith('READING ')) c.reading.push(line.slice(8));
        else if (line.startsWith('READY ')) c.ready.push(line.slice(6));
      }
    });
    proc.once('exit', (code) => reject(new Error(`${role} exited (${code}) before it was up: ${err}`)));
  });
}

async function call(port: number, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const r = await fetch(`http://127.0.0.1:${port}${path}`, body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

const until = async (what: string, cond: () => boolean | Promise<boolean>, ms: number): Promise<void> => {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

const text = (d: number): string => Array.from({ length: 6 }, (_, i) => `Document ${d} has sentence ${i} about work queues and workers.`).join(' ');
const FILES = Array.from({ length: 50 }, (_, d) => ({ name: `doc${d}.txt`, doc_id: null, path: '', category: 'kb', bytes: b64(text(d)) }));
const CHUNKING = { chunk_units: 16, chunk_overlap: 2 };

let nats: NatsServer;
let pg: RealPostgres;
let a: Child;
let b: Child;
let workers: Child[] = [];

beforeAll(async () => {
  [nats, pg] = await Promise.all([startNats(), startRealPostgres()]);
  // Front ends first: one of them creates the schema and the stream, then workers join.
  a = await startChild('front', nats.url, pg.url);
  b = await startChild('front', nats.url, pg.url);
  workers = await Promise.all([startChild('worker', nats.url, pg.url), startChild('worker', nats.url, pg.url)]);
}, 60_000);

afterAll(async () => {
  for (const c of [a, b, ...workers]) {
    if (!c || c.proc.exitCode !== null || c.proc.signalCode !== null) continue;
    c.proc.kill('SIGTERM');
    const t = setTimeout(() => c.proc.kill('SIGKILL'), 5000);
    await c.exited;
    clearTimeout(t);
  }
  await nats?.stop();
  await pg?.stop();
}, 30_000);

describe('document workers on a NATS work queue over a shared PostgreSQL', () => {
  it('accepts on one front end, processes on two workers, survives a worker SIGKILL mid-job: every document ready exactly once, visible from the other front end', async () => {
    // A front end that died between its commit and its publish: a document in the store with no message.
    // Workers republish it (reconciliation, every 5 s in nats_child.ts).
    const orphanId = randomUUID();
    const orphanText = 'An orphan document about reconciliation and lost messages.';
    {
      const db = await openPostgres(pg.url, { max: 1 });
      const store = new SqlDocumentStore(db);
      await store.open({ id: 'hash-test', dims: 256 });
      const bytes = new TextEncoder().encode(orphanText);
      expect(await store.insert([{
        docId: orphanId, name: 'orphan.txt', category: 'kb', owners: [], sha256: createHash('sha256').update(bytes).digest('hex'), source: 'bytes', path: '', format: 'txt', content: bytes,
        options: { reader: 'auto', chunker: 'structure', chunkUnits: 16, chunkOverlap: 2, embedder: 'hash-test' },
      }])).toEqual([{ status: 'inserted' }]);
      await store.close();
    }

    const load = await call(a.port, '/api/v1/documents', { files: FILES, ...CHUNKING });
    expect(load.status).toBe(202);
    const ids: string[] = load.body.accepted.map((e: { doc_id: string }) => e.doc_id);
    expect(ids.length).toBe(50);

    // Front end B sees A's documents: the same content is a duplicate there.
    const dup = await call(b.port, '/api/v1/documents', { files: [FILES[7]], ...CHUNKING });
    expect(dup.status).toBe(207);
    expect(dup.body.duplicate[0]).toMatchObject({ reason: 'duplicate_content', duplicate_of: ids[7] });

    // Kill worker 0 while it holds documents it has not finished.
    const [w0, w1] = workers as [Child, Child];
    const held = (): string[] => w0.reading.filter((id) => !w0.ready.includes(id));
    // Both of its job slots busy: a kill between a job's commit and its printed line hides that
    // completion (it is held here but done), and with one held document that left nothing to take over.
    await until('worker 0 mid-job in both slots after finishing a few', () => w0.ready.length >= 3 && held().length >= 2, 30_000);
    w0.proc.kill('SIGKILL');
    await w0.exited;
    const inFlight = held();
    expect(inFlight.length).toBeGreaterThan(0);
    expect(w1.ready.length).toBeGreaterThan(0); // both workers shared the queue
    console.info(`worker killed holding ${inFlight.length} documents; ${w0.ready.length + w1.ready.length} of 50 ready then`);

    await until('every document ready, as front end B reads them', async () => {
      const states = await Promise.all(ids.map(async (id) => (await call(b.port, `/api/v1/document/${id}`)).body.state));
      return states.every((s) => s === 'ready');
    }, 40_000);

    // Each completed once; the killed worker's documents were finished by the other on a second attempt
    // (a kill between a commit and its printed line can hide one completion per job slot).
    const completions = new Map<string, number>();
    for (const id of [...w0.ready, ...w1.ready]) completions.set(id, (completions.get(id) ?? 0) + 1);
    expect([...completions.values()].every((n) => n === 1)).toBe(true);
    expect(completions.size).toBeGreaterThanOrEqual(48);
    const takenOver = [];
    for (const id of inFlight) {
      const rec = (await call(b.port, `/api/v1/document/${id}`)).body;
      if (w1.ready.includes(id)) {
        expect(rec.attempts).toBeGreaterThanOrEqual(2);
        takenOver.push(id);
      }
    }
    expect(takenOver.length).toBeGreaterThan(0);

    // wait_for_completion on a front end that processes nothing: answered once a worker finished.
    const waited = await call(b.port, '/api/v1/documents', { files: [{ name: 'w.txt', doc_id: null, path: '', category: 'kb', bytes: b64('Waiting for a worker elsewhere.') }], wait_for_completion: true });
    expect(waited.status).toBe(202);
    expect(waited.body.accepted[0]).toMatchObject({ state: 'ready' });

    await until('the orphan document to be republished and processed', async () => (await call(b.port, `/api/v1/document/${orphanId}`)).body.state === 'ready', 20_000);

    // Exactly the chunks an uninterrupted run makes, once each.
    const tokenizer = hashEmbedder().tokenizer;
    const want = await Promise.all(
      FILES.map(async (_, d) => chunkBlocks((await readDocument(new TextEncoder().encode(text(d)), 'txt')).blocks, tokenizer, { mode: 'structure', units: 16, overlap: 2 }).length),
    );
    const db = await openPostgres(pg.url, { max: 1 });
    try {
      const rows = (await db.query<{ doc_id: string; name: string; chunk_count: number; rows: number; distinct_idx: number; max_idx: number | null }>(
        `SELECT d.doc_id, d.name, d.chunk_count, count(c.idx)::int AS rows, count(DISTINCT c.idx)::int AS distinct_idx, max(c.idx) AS max_idx
         FROM weft_documents d LEFT JOIN weft_chunks c ON c.doc_id = d.doc_id WHERE d.name LIKE 'doc%' GROUP BY d.doc_id, d.name, d.chunk_count`,
      )).rows;
      expect(rows.length).toBe(50);
      for (const r of rows) {
        const n = want[Number(r.name.slice(3, -4))]!;
        expect(n).toBeGreaterThan(1);
        expect([r.chunk_count, r.rows, r.distinct_idx, (r.max_idx ?? -1) + 1]).toEqual([n, n, n, n]);
      }
    } finally {
      await db.close();
    }

    // Status from B: the shared store's states, and a work queue with nothing left in it.
    await until('the work queue to drain', async () => (await call(b.port, '/api/v1/documents/status')).body.queue.messages === 0, 10_000);
    const status = (await call(b.port, '/api/v1/documents/status')).body;
    expect(status.states).toMatchObject({ ready: 52, queued: 0, reading: 0, chunking: 0, embedding: 0, failed: 0 });
    expect(status.queue).toMatchObject({ kind: 'nats', stream: 'WEFT_DOCUMENTS', pending: 0, in_progress: 0 });

    // Search through B over the plain-PostgreSQL vectors: the document the query names ranks first.
    const hits = (await call(b.port, '/api/v1/documents/search', { query: 'Document 42 has sentence', top_k: 3 })).body.results;
    expect(hits[0].document.name).toBe('doc42.txt');
  }, 90_000);

  it('rides out a broker restart: documents in flight and documents accepted while it is down all end ready', async () => {
    const more = (k: number, tag: string): unknown[] => Array.from({ length: k }, (_, i) => ({ name: `${tag}${i}.txt`, doc_id: null, path: '', category: 'kb', bytes: b64(`${tag} ${i}: ${text(100 + i)}`) }));
    const first = await call(b.port, '/api/v1/documents', { files: more(10, 'before'), ...CHUNKING });
    expect(first.status).toBe(202);
    const w1 = workers[1]!;
    const readyBefore = w1.ready.length;
    await until('a document of the batch done', () => w1.ready.length > readyBefore, 20_000);
    // Down for 1.5 s; a load sent meanwhile is still committed and answered 202 (its messages follow on
    // reconnection, or from reconciliation).
    const restart = nats.restart(1500);
    await new Promise((r) => setTimeout(r, 300));
    const during = await call(a.port, '/api/v1/documents', { files: more(5, 'during'), ...CHUNKING });
    await restart;
    expect(during.status).toBe(202);
    const ids = [...first.body.accepted, ...during.body.accepted].map((e: { doc_id: string }) => e.doc_id);
    expect(ids.length).toBe(15);
    await until('every document ready after the restart', async () => {
      const states = await Promise.all(ids.map(async (id) => (await call(a.port, `/api/v1/document/${id}`)).body.state));
      return states.every((st) => st === 'ready');
    }, 40_000);
    const counts = new Map<string, number>();
    for (const id of w1.ready) counts.set(id, (counts.get(id) ?? 0) + 1);
    expect(ids.every((id) => (counts.get(id) ?? 0) <= 1)).toBe(true);
  }, 60_000);
});
