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
 * use that. The browser-safe part (no node: imports) is pglite_open.ts.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { PGlite } from '@electric-sql/pglite';
import { openPgliteAt } from './pglite_open.ts';
import type { SqlClient } from './sql_store.ts';

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
  return openPgliteAt(where, { ...opts, fresh });
}
