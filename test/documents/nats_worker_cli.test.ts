/**
 * The shipped commands end to end: `weft document-worker` (the bundled
 * USE-Lite embedder, OpenGL ES) and `weft serve` with a `nats:` section and
 * `documents: {database_url, workers: 0}` — a front end that only accepts —
 * on a real `nats-server` and a real PostgreSQL without pgvector. A document
 * loaded with wait_for_completion comes back `ready` though the front end
 * processes nothing; its status shows the NATS queue; search finds it. The
 * command refuses to start without a database or a broker, saying which.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kill, startFrontEnd, startNats, type FrontEnd, type NatsServer, type Proc } from '../server/nats_helpers.ts';
import { b64 } from './helpers.ts';
import { startRealPostgres, type RealPostgres } from './postgres_real.ts';

const WEFT = fileURLToPath(new URL('../../bin/weft.js', import.meta.url));

function weft(args: string[]): Proc {
  const child = spawn(process.execPath, [WEFT, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, WEFT_LOG_DISABLE_TIMESTAMPS: '1' } });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return { child, out: () => out, err: () => err };
}

const exitOf = (p: Proc): Promise<number | null> => new Promise((r) => (p.child.exitCode !== null ? r(p.child.exitCode) : p.child.once('exit', (code) => r(code))));

let nats: NatsServer;
let pg: RealPostgres;
let worker: Proc;
let fe: FrontEnd;

beforeAll(async () => {
  [nats, pg] = await Promise.all([startNats(), startRealPostgres()]);
  worker = weft(['document-worker', '--nats', nats.url, '--database-url', pg.url, '--backend', 'opengles', '--workers', '1']);
  const end = Date.now() + 90_000;
  while (!worker.out().includes('"document_worker"')) {
    if (worker.child.exitCode !== null || Date.now() > end) throw new Error(`document-worker did not start: ${worker.err()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  fe = await startFrontEnd({ url: nats.url }, `model: ''\nbackend: opengles\ndocuments:\n  database_url: ${JSON.stringify(pg.url)}\n  workers: 0`);
}, 150_000);

afterAll(async () => {
  for (const p of [worker, fe]) if (p) await kill(p.child);
  await nats?.stop();
  await pg?.stop();
}, 30_000);

describe('weft document-worker with weft serve on NATS', () => {
  it('the worker process embeds what the front end accepted', async () => {
    const line = JSON.parse(worker.out().split('\n').find((l) => l.includes('"document_worker"'))!) as { document_worker: { nats: string; workers: number; store: string } };
    expect(line.document_worker).toMatchObject({ nats: nats.url, workers: 1 });
    expect(line.document_worker.store).toMatch(/^postgresql /);
    const text = 'Weft spreads document ingestion over worker processes. Each worker embeds chunks and stores them in PostgreSQL.';
    const r = await fetch(`${fe.inference}/api/v1/documents`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ files: [{ name: 'workers.txt', doc_id: null, path: '', category: 'kb', bytes: b64(text) }], wait_for_completion: true }),
    });
    expect(r.status).toBe(202);
    const body = (await r.json()) as { accepted: { doc_id: string; state: string; counts: { chunks: number } }[] };
    expect(body.accepted[0]).toMatchObject({ state: 'ready' });
    expect(body.accepted[0]!.counts.chunks).toBeGreaterThan(0);
    const status = (await (await fetch(`${fe.inference}/api/v1/documents/status`)).json()) as { states: Record<string, number>; queue: Record<string, unknown>; totals: { ready: number } };
    expect(status.states.ready).toBe(1);
    expect(status.queue).toMatchObject({ kind: 'nats', workers: 0, messages: 0 });
    expect(status.totals.ready).toBe(0); // this front end processed nothing itself
    const hits = (await (await fetch(`${fe.inference}/api/v1/documents/search`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: 'worker processes embed chunks' }) })).json()) as { results: { document: { doc_id: string } }[] };
    expect(hits.results[0]?.document.doc_id).toBe(body.accepted[0]!.doc_id);
  });

  it('refuses to start without a database or a broker, saying which', async () => {
    const noDb = weft(['document-worker', '--nats', nats.url]);
    expect(await exitOf(noDb)).toBe(1);
    expect(noDb.err()).toMatch(/needs the shared PostgreSQL store: --database-url/);
    const noNats = weft(['document-worker', '--database-url', pg.url]);
    expect(await exitOf(noNats)).toBe(1);
    expect(noNats.err()).toMatch(/needs a broker: --nats URL/);
  });
});
