/**
 * The embedded store: PGlite (Postgres in WebAssembly, in-process) with the
 * pgvector extension, behind the SqlClient the SQL store speaks.
 *
 * Data location: `<data_dir>/documents` for a directory data_dir (created
 * when missing), or `memory://` (tests; gone at close) / `idb://name`
 * (browsers) as given. Committed transactions are written through to the
 * directory's files before a query resolves, so a killed process loses
 * nothing it acknowledged (Postgres replays its WAL at the next open); an OS
 * crash or power loss may, since the WASM file system does not fsync.
 * One process at a time may open a data directory.
 *
 * The first open of a new directory runs initdb (seconds; much longer on a
 * loaded machine); `template` (a `dumpDataDir()` tarball) skips it — tests
 * use that.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { PGlite } from '@electric-sql/pglite';
import type { SqlClient, SqlRunner } from './sql_store.ts';

/** The PGlite data location for a configured data_dir. */
export function pgliteLocation(dataDir: string): string {
  if (/^(memory|idb|opfs-ahp):\/\//.test(dataDir)) return dataDir;
  return join(resolve(dataDir), 'documents');
}

export async function openPglite(dataDir: string, opts: { template?: Blob } = {}): Promise<SqlClient & { pg: PGlite }> {
  const where = pgliteLocation(dataDir);
  const onDisk = !where.includes('://');
  if (onDisk) mkdirSync(where, { recursive: true });
  const fresh = !onDisk || !existsSync(join(where, 'PG_VERSION'));
  // Loaded on first use: a server that never loads documents does not pay for the WASM module.
  const [{ PGlite }, { vector }] = await Promise.all([import('@electric-sql/pglite'), import('@electric-sql/pglite-pgvector')]);
  const pg = await PGlite.create(where, { extensions: { vector }, ...(opts.template && fresh ? { loadDataDir: opts.template } : {}) });
  const runner = (q: Pick<PGlite, 'query'>): SqlRunner => ({
    async query<T>(sql: string, params?: unknown[]) {
      const r = await q.query<T>(sql, params);
      return { rows: r.rows };
    },
  });
  return {
    pg,
    ...runner(pg),
    async exec(sql) {
      await pg.exec(sql);
    },
    async transaction(fn) {
      return pg.transaction((tx) => fn(runner(tx)));
    },
    async close() {
      if (!pg.closed) await pg.close();
    },
  };
}
