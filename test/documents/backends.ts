/**
 * The two store backends the document tests run over:
 *  - `pglite`: embedded PGlite in memory (the default store);
 *  - `postgres`: the `pg` client against a real server process — PGlite's
 *    socket server (scripts/pg_server.ts) started here as a child process on
 *    an ephemeral TCP port, seeded from the cached template (no initdb), one
 *    connection (see server/documents/postgres.ts);
 *  - `postgresql-plain`: the `pg` client against a real PostgreSQL server
 *    without pgvector (postgres_real.ts), four connections: the store's
 *    `real[]` vectors.
 *
 * `fresh()` gives the config overrides for an empty store of that backend and
 * a `close()` that disposes of it (the postgres one stops its server).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { DocumentsConfig } from '../../server/documents/config.ts';
import { pgliteTemplate, TEMPLATE } from './helpers.ts';
import { startRealPostgres } from './postgres_real.ts';

const PG_SERVER = fileURLToPath(new URL('../../scripts/pg_server.ts', import.meta.url));

export interface PgServer {
  url: string;
  proc: ChildProcess;
  stop(): Promise<void>;
}

/** scripts/pg_server.ts in a child process; resolves once it accepts connections. `db`: memory:// (default) or a directory. */
export async function startPgServer(opts: { db?: string; timeoutMs?: number } = {}): Promise<PgServer> {
  await pgliteTemplate(); // the child seeds a new database from the cached template
  const proc = spawn(process.execPath, ['--import', 'tsx', PG_SERVER, '--port', '0', '--template', TEMPLATE, ...(opts.db ? ['--db', opts.db] : [])], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const stop = async (): Promise<void> => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill('SIGTERM');
    const t = setTimeout(() => proc.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(t);
  };
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => {
      void stop();
      reject(new Error(`pg_server did not start in ${opts.timeoutMs ?? 90_000} ms: ${err}`));
    }, opts.timeoutMs ?? 90_000);
    proc.stderr!.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /^DATABASE_URL=(\S+)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`pg_server exited (${code}) before listening: ${err}`));
    });
  });
  return { url, proc, stop };
}

export type BackendName = 'pglite' | 'postgres' | 'postgresql-plain';

export interface FreshStore {
  config: Partial<Pick<DocumentsConfig, 'dataDir' | 'databaseUrl' | 'databasePool'>>;
  close(): Promise<void>;
}

export interface StoreBackend {
  name: BackendName;
  fresh(): Promise<FreshStore>;
}

export const BACKENDS: Record<BackendName, StoreBackend> = {
  pglite: { name: 'pglite', fresh: async () => ({ config: { dataDir: 'memory://' }, close: async () => {} }) },
  postgres: {
    name: 'postgres',
    async fresh() {
      const server = await startPgServer();
      return { config: { databaseUrl: server.url, databasePool: 1 }, close: () => server.stop() };
    },
  },
  'postgresql-plain': {
    name: 'postgresql-plain',
    async fresh() {
      const server = await startRealPostgres();
      return { config: { databaseUrl: server.url, databasePool: 4 }, close: () => server.stop() };
    },
  },
};
