/**
 * A real PostgreSQL server for tests: Debian's packaged server (`postgresql`,
 * which scripts/setup.sh installs; no pgvector there, so the store uses its
 * plain `real[]` vectors), a cluster made by `initdb` in a temporary
 * directory, `postgres` listening on a free loopback port, trust auth for
 * the role `weft`. Stopped (fast shutdown) and removed by `stop()`.
 *
 * Running as root (CI containers): PostgreSQL refuses to start as root
 * ("root" execution of the PostgreSQL server is not permitted), so initdb
 * and postgres are spawned with the uid/gid of `nobody` (65534, present on
 * every Debian system) through Node's spawn options, and the temporary
 * directory is handed to that user first. Run as another user, they run as
 * that user.
 *
 * Binaries: /usr/lib/postgresql/<newest version>/bin (where Debian keeps
 * initdb and postgres; they are not on PATH), else PATH.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';

const NOBODY = 65534;

/** A TCP port free on loopback now (the server binds it a moment later). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      srv.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

export interface RealPostgres {
  url: string;
  port: number;
  dir: string;
  proc: ChildProcess;
  log: () => string;
  stop(): Promise<void>;
}

function binDir(): string {
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => existsSync(join(root, v, 'bin', 'postgres')))
      .sort((a, b) => Number(b) - Number(a));
    if (versions[0]) return join(root, versions[0], 'bin');
  }
  return ''; // PATH
}

export async function startRealPostgres(): Promise<RealPostgres> {
  const bin = binDir();
  const exe = (name: string): string => (bin ? join(bin, name) : name);
  const dir = mkdtempSync(join(tmpdir(), 'weft-pg-'));
  const asRoot = process.getuid?.() === 0;
  if (asRoot) chownSync(dir, NOBODY, NOBODY);
  const ids = asRoot ? { uid: NOBODY, gid: NOBODY } : {};
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C', TZ: 'UTC' };
  const data = join(dir, 'data');
  const init = spawnSync(exe('initdb'), ['-D', data, '-U', 'weft', '--auth=trust', '-E', 'UTF8', '--no-sync', '--no-instructions'], { cwd: dir, env, ...ids, encoding: 'utf8' });
  if (init.error || init.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed (${init.error?.message ?? `exit ${init.status}`}): ${init.stderr ?? ''}`);
  }
  const port = await freePort();
  // Durability settings off: a test cluster, thrown away after the file.
  const args = ['-D', data, '-h', '127.0.0.1', '-p', String(port), '-k', dir, '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=100'];
  const proc = spawn(exe('postgres'), args, { cwd: dir, env, ...ids, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-8000)));
  proc.stderr!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-8000)));
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const url = `postgres://weft@127.0.0.1:${port}/postgres`;
  const stop = async (): Promise<void> => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGINT'); // fast shutdown
      const t = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(t);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const { default: pg } = await import('pg');
  const end = Date.now() + 30_000;
  for (;;) {
    const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
    try {
      await c.connect();
      await c.query('SELECT 1');
      await c.end();
      break;
    } catch (e) {
      await c.end().catch(() => undefined);
      if (proc.exitCode !== null || Date.now() > end) {
        await stop();
        throw new Error(`postgres did not start: ${(e as Error).message}\n${out}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { url, port, dir, proc, log: () => out, stop };
}
