/**
 * Real processes for the NATS tests: a `nats-server` (Debian package) on a
 * free loopback port with JetStream in a temporary directory, `weft reader
 * --nats` processes, and `weft serve` front ends configured with a `nats:`
 * section. Each is a child process the test kills (SIGKILL for crashes).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { kill, sleep } from './remote_helpers.ts';

const WEFT = fileURLToPath(new URL('../../bin/weft.js', import.meta.url));

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

const canConnect = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const c = createConnection({ host: '127.0.0.1', port }, () => {
      c.destroy();
      resolve(true);
    });
    c.once('error', () => resolve(false));
  });

export interface NatsServer {
  url: string;
  port: number;
  dir: string;
  child: ChildProcess;
  log: () => string;
  /** SIGKILL, then a new server on the same port and store. */
  restart(downMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/** Starts nats-server (`-js -sd <tmp>`), with `conf` (nats-server config text) when given. */
export async function startNats(conf?: string): Promise<NatsServer> {
  const dir = mkdtempSync(join(tmpdir(), 'weft-nats-'));
  const port = await freePort();
  let out = '';
  const args = ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', join(dir, 'js')];
  if (conf) {
    writeFileSync(join(dir, 'server.conf'), conf);
    args.push('-c', join(dir, 'server.conf'));
  }
  const launch = async (): Promise<ChildProcess> => {
    const child = spawn('nats-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const end = Date.now() + 15_000;
    while (!(await canConnect(port))) {
      if (child.exitCode !== null || Date.now() > end) throw new Error(`nats-server did not start: ${out}`);
      await sleep(50);
    }
    return child;
  };
  const srv: NatsServer = {
    url: `nats://127.0.0.1:${port}`,
    port,
    dir,
    child: await launch(),
    log: () => out,
    restart: async (downMs = 500) => {
      await kill(srv.child, 'SIGKILL');
      await sleep(downMs);
      srv.child = await launch();
    },
    stop: async () => {
      await kill(srv.child, 'SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return srv;
}

export interface Proc {
  child: ChildProcess;
  out: () => string;
  err: () => string;
}

function launchWeft(args: string[], env: Record<string, string> = {}): Proc {
  const child = spawn(process.execPath, [WEFT, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, WEFT_LOG_DISABLE_TIMESTAMPS: '1', ...env } });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return { child, out: () => out, err: () => err };
}

async function waitFor(p: Proc, what: string, test: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!test()) {
    if (p.child.exitCode !== null) throw new Error(`${what}: process exited (${p.child.exitCode}): ${p.err()}${p.out()}`);
    if (Date.now() > end) {
      p.child.kill('SIGKILL');
      throw new Error(`${what}: not within ${ms} ms: ${p.err()}`);
    }
    await sleep(100);
  }
}

export interface ReaderProc extends Proc {
  readerId: string;
}

/** `weft reader --nats URL --group G` (OpenGL ES), resolved once it printed its attached line. */
export async function startReader(url: string, group: string, args: string[] = [], ms = 120_000): Promise<ReaderProc> {
  const p = launchWeft(['reader', '--nats', url, '--group', group, '--backend', 'opengles', ...args]);
  await waitFor(p, 'reader attach', () => p.out().includes('"attached"'), ms);
  const line = p.out().split('\n').find((l) => l.includes('"attached"'))!;
  return { ...p, readerId: (JSON.parse(line) as { reader_id: string }).reader_id };
}

/** Runs `weft reader` expecting it to fail; resolves with its exit code and stderr. */
export async function readerFails(args: string[], ms = 60_000): Promise<{ code: number | null; err: string }> {
  const p = launchWeft(['reader', ...args]);
  await waitFor(p, 'reader exit', () => p.child.exitCode !== null, ms).catch(() => undefined);
  await sleep(50);
  if (p.child.exitCode === null) {
    await kill(p.child);
    return { code: null, err: p.err() };
  }
  return { code: p.child.exitCode, err: p.err() };
}

export interface FrontEnd extends Proc {
  inference: string;
  management: string;
}

/** `weft serve` with a `nats:` section (and `extra` YAML lines: local readers for comparison). */
export async function startFrontEnd(nats: Record<string, string>, extra = "model: ''", ms = 120_000): Promise<FrontEnd> {
  const dir = mkdtempSync(join(tmpdir(), 'weft-fe-'));
  const [port, mgmt] = [await freePort(), await freePort()];
  const natsYaml = Object.entries(nats)
    .map(([k, v]) => `  ${k}: ${JSON.stringify(v)}`)
    .join('\n');
  const yaml = `host: 127.0.0.1\nport: ${port}\nmanagement_port: ${mgmt}\nopenai_port: 0\nsagemaker_port: 0\nvertex_port: 0\n${extra.includes('embedding_model:') ? '' : "embedding_model: ''\n"}${extra}\nnats:\n${natsYaml}\n`;
  writeFileSync(join(dir, 'config.yaml'), yaml);
  const p = launchWeft(['serve', '--config', join(dir, 'config.yaml')]);
  p.child.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  await waitFor(p, 'front end listen', () => (p.err() + p.out()).includes(`"port":${mgmt}`), ms);
  return { ...p, inference: `http://127.0.0.1:${port}`, management: `http://127.0.0.1:${mgmt}` };
}

export type Groups = Record<string, { reader_id: string; ready: boolean; state: string; remote: string | null; in_flight: number }[]>;

export const readerGroups = async (fe: FrontEnd): Promise<Groups> => (await (await fetch(`${fe.management}/reader_groups`)).json()) as Groups;

/** One /generate_stream: status, token ids, and the error code of an SSE `error` event or an error response. */
export async function stream(base: string, body: Record<string, unknown>, onToken?: () => void): Promise<{ status: number; ids: number[]; error: string | null; done: boolean }> {
  const res = await fetch(`${base}/generate_stream`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (res.status !== 200) {
    const j = (await res.json().catch(() => null)) as { error?: { code?: string } } | null;
    return { status: res.status, ids: [], error: j?.error?.code ?? 'unknown', done: false };
  }
  const ids: number[] = [];
  let error: string | null = null;
  let done = false;
  let buf = '';
  const dec = new TextDecoder();
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buf += dec.decode(chunk, { stream: true });
    let i: number;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const ev = /^event: ?(.*)$/m.exec(block)?.[1] ?? 'message';
      const data = /^data: ?(.*)$/m.exec(block)?.[1];
      if (ev === 'error' && data) error = (JSON.parse(data) as { error?: { code?: string } }).error?.code ?? 'unknown';
      else if (ev === 'done') done = true;
      else if (ev === 'message' && data) {
        ids.push((JSON.parse(data) as { token_id: number }).token_id);
        onToken?.();
      }
    }
  }
  return { status: 200, ids, error, done };
}

export { kill, sleep };
