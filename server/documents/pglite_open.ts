/**
 * Opening PGlite + pgvector at a location PGlite understands, behind the
 * SqlClient the SQL store speaks. No Node imports: a browser bundle imports
 * this directly (`idb://name` = IndexedDB database `/pglite/name`), and
 * pglite.ts wraps it for Node (data directory resolution, mkdir, template
 * only on a fresh directory). test/browser/documents_idb.test.ts runs it in
 * chromium.
 */
import type { PGlite } from '@electric-sql/pglite';
import type { SqlClient, SqlRunner } from './sql_store.ts';

export interface PgliteOpenOptions {
  /** A `dumpDataDir()` tarball to start from instead of running initdb; only used when `fresh`. */
  template?: Blob;
  /** True when the location holds no database yet (so the template may seed it). */
  fresh?: boolean;
}

/** `where`: a directory path, `memory://`, `idb://name` or `opfs-ahp://name`, passed to PGlite as is. */
export async function openPgliteAt(where: string, opts: PgliteOpenOptions = {}): Promise<SqlClient & { pg: PGlite }> {
  // Loaded on first use: a server that never loads documents does not pay for the WASM module.
  const [{ PGlite }, { vector }] = await Promise.all([import('@electric-sql/pglite'), import('@electric-sql/pglite-pgvector')]);
  const pg = await PGlite.create(where, { extensions: { vector }, ...(opts.template && opts.fresh ? { loadDataDir: opts.template } : {}) });
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
