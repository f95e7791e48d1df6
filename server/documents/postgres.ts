/**
 * The store on a PostgreSQL server: the `pg` client's connection pool behind
 * the SqlClient the SQL store speaks (sql_store.ts), so the same statements
 * run here and on embedded PGlite (pglite.ts).
 *
 * Server requirements: PostgreSQL ≥ 13. With the pgvector extension
 * available, vectors use it (`CREATE EXTENSION IF NOT EXISTS vector` runs at
 * open: the role needs the right to create it, or it must exist already);
 * without it, plain `real[]` columns (sql_store.ts). PGlite's socket server
 * (scripts/pg_server.ts) also works, with a pool of ONE connection: it runs
 * one PGlite session for every client, and its query queue keeps a
 * transaction's messages together but not the Parse / Bind / Execute
 * messages of two clients' concurrent statements, so a second connection
 * could interleave with the first (by default it refuses a second one).
 *
 * Transactions hold one pooled connection from BEGIN to COMMIT; everything
 * else takes any connection for one statement. With `max` = 1 statements
 * queue behind a running transaction (the store never queries the pool from
 * inside a transaction, so this cannot deadlock).
 *
 * With the local queue, one Weft process per database: at start the pool
 * requeues every document left in progress, which would take over another
 * live process's jobs. With the NATS work queue (nats_queue.ts) any number of
 * front ends and workers share it: the queue's messages decide who works.
 */
import type { Pool, PoolClient } from 'pg';
import type { SqlClient, SqlRunner } from './sql_store.ts';

export interface PostgresOptions {
  /** Connections in the pool (1 for PGlite's socket server). */
  max: number;
  /** Give up one connection attempt after this long, ms (default 10 s). */
  connectTimeoutMs?: number;
  /** Keep retrying the first connection this long, ms (default 5 s). */
  connectRetryMs?: number;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
}

/** `postgres://user:***@host:port/db`: a URL for logs, without its password. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable database URL)';
  }
}

const runner = (c: Pick<Pool | PoolClient, 'query'>): SqlRunner => ({
  async query<T>(sql: string, params?: unknown[]) {
    const r = await c.query(sql, params as unknown[]);
    return { rows: r.rows as T[] };
  },
});

export async function openPostgres(url: string, opts: PostgresOptions): Promise<SqlClient & { pool: Pool }> {
  // Loaded on first use, like PGlite: a server on the embedded store never loads the driver.
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({ connectionString: url, max: Math.max(1, opts.max), connectionTimeoutMillis: opts.connectTimeoutMs ?? 10_000, idleTimeoutMillis: 10_000 });
  // An idle client's socket error (server restart) surfaces here; the pool drops the client and the next query reconnects.
  pool.on('error', (e) => opts.log?.('documents: database connection lost', { error: e.message, database: redactUrl(url) }));
  // Retried for a few seconds: a server that is starting, or one that still counts the connection of a
  // process that just closed (PGlite's socket server refuses a second connection until it notices).
  const deadline = Date.now() + (opts.connectRetryMs ?? 5000);
  for (let wait = 100; ; wait = Math.min(1000, wait * 2)) {
    try {
      await pool.query('SELECT 1');
      break;
    } catch (e) {
      if (Date.now() + wait > deadline) {
        await pool.end().catch(() => undefined);
        throw new Error(`cannot connect to the documents database ${redactUrl(url)}: ${(e as Error).message}`);
      }
      await new Promise((r) => setTimeout(r, wait));
    }
  }
  return {
    pool,
    ...runner(pool),
    async exec(sql) {
      await pool.query(sql);
    },
    async transaction(fn) {
      const client = await pool.connect();
      let broken = false;
      try {
        await client.query('BEGIN');
        const out = await fn(runner(client));
        await client.query('COMMIT');
        return out;
      } catch (e) {
        try {
          await client.query('ROLLBACK');
        } catch {
          broken = true; // the connection is gone: do not hand it out again
        }
        throw e;
      } finally {
        client.release(broken);
      }
    },
    async close() {
      if (!pool.ended) await pool.end();
    },
  };
}
