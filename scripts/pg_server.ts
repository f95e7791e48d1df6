/**
 * A PostgreSQL server for trying the documents store's PostgreSQL backend
 * without installing PostgreSQL: PGlite (Postgres 17 in WebAssembly) with the
 * pgvector extension, served over the Postgres wire protocol on a TCP port by
 * @electric-sql/pglite-socket. The tests start it as a child process.
 *
 *   npx tsx scripts/pg_server.ts [--port 5433] [--host 127.0.0.1]
 *       [--db memory:// | <directory>] [--template <dumpDataDir tarball>]
 *
 * Prints one line `DATABASE_URL=postgresql://postgres@<host>:<port>/postgres`
 * once it accepts connections (port 0 picks a free one), then serves until
 * SIGINT / SIGTERM (which closes the database cleanly). Use it with
 *
 *   DATABASE_URL=… WEFT_DOCUMENTS_DATABASE_POOL=1 weft serve
 *
 * ONE connection at a time: PGlite is a single session, and the socket
 * server's query queue keeps a transaction's messages together but not two
 * clients' concurrent extended-protocol statements, so it refuses a second
 * connection; the pool must be 1. Any user name and password are accepted.
 * A directory --db persists across restarts (one process at a time).
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';

const { values: a } = parseArgs({
  options: {
    port: { type: 'string', default: '5433' },
    host: { type: 'string', default: '127.0.0.1' },
    db: { type: 'string', default: 'memory://' },
    template: { type: 'string' },
  },
});

const port = Number(a.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port: expected 0..65535, got ${a.port}`);
const where = a.db!.includes('://') ? a.db! : resolve(a.db!);
const onDisk = !where.includes('://');
if (onDisk) mkdirSync(where, { recursive: true });
const fresh = !onDisk || !existsSync(join(where, 'PG_VERSION'));
const template = a.template && fresh ? new Blob([readFileSync(a.template)]) : undefined;

const db = await PGlite.create(where, { extensions: { vector }, ...(template ? { loadDataDir: template } : {}) });
const server = new PGLiteSocketServer({ db, port, host: a.host!, maxConnections: 1 });
await server.start();
const [host, actualPort] = [a.host!, server.getServerConn().split(':').pop()];
process.stdout.write(`DATABASE_URL=postgresql://postgres@${host.includes(':') ? `[${host}]` : host}:${actualPort}/postgres\n`);

let stopping = false;
const stop = async (): Promise<void> => {
  if (stopping) return;
  stopping = true;
  await server.stop();
  await db.close();
  process.exit(0);
};
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());
