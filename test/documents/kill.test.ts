/**
 * Crash safety with a real process: a document server in a child process
 * (child_server.ts, a deliberately slow embedder) over each persistent store —
 * on-disk PGlite, and PostgreSQL (a server process that outlives the killed
 * Weft, through `pg`) — accepts 50
 * documents; while they are in flight the child is killed with SIGKILL. A new
 * child over the same data directory resumes: every accepted document
 * reaches `ready`, none is completed twice (no `READY` printed twice for a
 * document across both runs), and in the database every document has
 * exactly its chunk count of chunk rows with indices 0..n-1 and no orphans.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, onTestFinished } from 'vitest';
import { openPglite } from '../../server/documents/pglite.ts';
import { openPostgres } from '../../server/documents/postgres.ts';
import type { SqlClient } from '../../server/documents/sql_store.ts';
import { startPgServer, type PgServer } from './backends.ts';
import { b64, pgliteTemplate, TEMPLATE } from './helpers.ts';

const CHILD = fileURLToPath(new URL('./child_server.ts', import.meta.url));

interface Child {
  proc: ChildProcess;
  port: number;
  ready: string[];
  exited: Promise<void>;
}

function startChild(dataDir: string, databaseUrl?: string): Promise<Child> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ['--import', 'tsx', CHILD, dataDir, TEMPLATE, ...(databaseUrl ? [databaseUrl] : [])], { stdio: ['ignore', 'pipe', 'pipe'] });
    const ready: string[] = [];
    const exited = new Promise<void>((r) => proc.once('exit', () => r()));
    let buf = '';
    let err = '';
    proc.stderr!.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
    proc.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.startsWith('PORT ')) resolve({ proc, port: Number(line.slice(5)), ready, exited });
        else if (line.startsWith('READY ')) ready.push(line.slice(6));
      }
    });
    proc.once('exit', (code) => reject(new Error(`child exited (${code}) before listening: ${err}`)));
  });
}

async function call(port: number, path: string, body?: unknown): Promise<any> {
  const r = await fetch(`http://127.0.0.1:${port}${path}`, body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

const until = async (cond: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> => {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
};

describe.each(['pglite', 'postgres'] as const)('SIGKILL while 50 documents are in flight (%s)', (backend) => {
  it('a restarted server finishes every accepted document exactly once', async () => {
    await pgliteTemplate(); // make sure the cached template exists
    const dataDir = mkdtempSync(join(tmpdir(), 'weft-docs-kill-'));
    const server: PgServer | null = backend === 'postgres' ? await startPgServer() : null;
    onTestFinished(() => server?.stop()); // also when the test fails before its end
    const first = await startChild(dataDir, server?.url);
    const files = Array.from({ length: 50 }, (_, d) => ({
      name: `doc${d}.txt`, doc_id: null, path: '', category: 'kb',
      bytes: b64(Array.from({ length: 6 }, (_, i) => `Document ${d} has sentence ${i} about crash safety.`).join(' ')),
    }));
    const load = await call(first.port, '/api/v1/documents', { files, chunk_units: 16, chunk_overlap: 2 });
    expect(load.status).toBe(202);
    const ids: string[] = load.body.accepted.map((e: { doc_id: string }) => e.doc_id);
    expect(ids.length).toBe(50);
    await until(() => first.ready.length >= 3, 60_000, 'the first documents');
    first.proc.kill('SIGKILL');
    await first.exited;
    const doneBeforeKill = first.ready.length;
    expect(doneBeforeKill).toBeLessThan(50);
    console.info(`killed with ${doneBeforeKill} of 50 documents ready`);

    const second = await startChild(dataDir, server?.url);
    try {
      await until(async () => {
        const states = await Promise.all(ids.map(async (id) => (await call(second.port, `/api/v1/document/${id}`)).body.state));
        return states.every((s) => s === 'ready');
      }, 90_000, 'every document to be ready');
    } finally {
      second.proc.kill('SIGTERM');
      await second.exited;
    }
    const completions = new Map<string, number>();
    for (const id of [...first.ready, ...second.ready]) completions.set(id, (completions.get(id) ?? 0) + 1);
    expect([...completions.values()].every((n) => n === 1)).toBe(true);
    expect(second.ready.length).toBeGreaterThanOrEqual(50 - doneBeforeKill - 2); // a kill between commit and print loses at most a line per worker

    const db: SqlClient = server ? await openPostgres(server.url, { max: 1 }) : await openPglite(dataDir);
    try {
      const docs = (await db.query<{ doc_id: string; state: string; chunk_count: number; rows: number; distinct_idx: number; max_idx: number | null }>(
        `SELECT d.doc_id, d.state, d.chunk_count, count(c.idx)::int AS rows, count(DISTINCT c.idx)::int AS distinct_idx, max(c.idx) AS max_idx
         FROM weft_documents d LEFT JOIN weft_chunks c ON c.doc_id = d.doc_id GROUP BY d.doc_id, d.state, d.chunk_count`,
      )).rows;
      expect(docs.length).toBe(50);
      expect(new Set(docs.map((d) => d.doc_id))).toEqual(new Set(ids));
      for (const d of docs) {
        expect(d.state).toBe('ready');
        expect(d.chunk_count).toBeGreaterThan(1);
        expect([d.rows, d.distinct_idx, (d.max_idx ?? -1) + 1]).toEqual([d.chunk_count, d.chunk_count, d.chunk_count]);
      }
      const orphans = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM weft_chunks c WHERE NOT EXISTS (SELECT 1 FROM weft_documents d WHERE d.doc_id = c.doc_id)`);
      expect(orphans.rows[0]!.n).toBe(0);
    } finally {
      await db.close();
      await server?.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
