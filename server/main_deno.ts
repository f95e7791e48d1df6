/**
 * The Deno entry: the same Service and HTTP apps as `weft serve` (main.ts),
 * served with Deno.serve. Readers run in module Web Workers
 * (readers/transport.ts) on Deno's own WebGPU, falling back to Dawn through
 * npm:webgpu (readers/web_worker_entry.ts).
 *
 * Usage: deno run -A server/main_deno.ts [--config file] [--port n] [--model path]
 *        (or `deno task serve`)
 * Settings come from loadConfig as on Node (config.yaml, WEFT_* variables).
 * Once every listener is bound it prints one line to stdout,
 * `{"listening":[{"app":"inference","port":3000},...]}` (port 0 binds an
 * ephemeral port for the inference app and disables the others). SIGINT and
 * SIGTERM stop the listeners and the readers.
 */
import { parseArgs } from 'node:util';
import { buildApps, listenPlan } from './apps/index.ts';
import { loadConfig } from './config.ts';
import { Service } from './service.ts';

/** The slice of the Deno namespace used here (tsc type-checks this file with Node's types). */
interface DenoServer {
  addr: { port: number };
  shutdown(): Promise<void>;
}
interface DenoLike {
  args: string[];
  serve(opts: { port: number; hostname: string; onListen?: (addr: { port: number }) => void }, handler: (r: Request) => Response | Promise<Response>): DenoServer;
  addSignalListener(sig: 'SIGINT' | 'SIGTERM', cb: () => void): void;
  exit(code: number): never;
}
const Deno = (globalThis as unknown as { Deno: DenoLike }).Deno;

const { values } = parseArgs({ args: Deno.args, options: { config: { type: 'string' }, port: { type: 'string' }, model: { type: 'string' } } });
const config = loadConfig({
  ...(values.config ? { file: values.config } : {}),
  overrides: {
    ...(values.port ? { port: Number(values.port) } : {}),
    ...(values.model ? { model: values.model } : {}),
  },
});

const service = new Service(config);
service.startConfiguredReaders();
const apps = buildApps(service);
const plan = listenPlan(config, apps);
const servers: { app: string; port: number; server: DenoServer }[] = [];
for (const [app, port, { fetch }] of plan) {
  if (port === 0 && app !== 'inference') continue;
  const server = Deno.serve({ port, hostname: config.host, onListen: () => {} }, (r) => fetch(r));
  servers.push({ app, port: server.addr.port, server });
  service.log('listening', { app, host: config.host, port: server.addr.port, runtime: 'deno' });
}
console.log(JSON.stringify({ listening: servers.map(({ app, port }) => ({ app, port })) }));

/** Longest the listeners wait for open requests to finish after SIGTERM / SIGINT (ms); then the readers stop regardless. */
const DRAIN_MS = 10_000;

let stopping = false;
async function stop(): Promise<void> {
  if (stopping) return;
  stopping = true;
  const started = performance.now();
  service.log('shutting down');
  // Open requests may finish (a graceful stop), but a connection that never ends must not hold
  // the process: past DRAIN_MS the readers stop, which ends every generation still running.
  let timer: ReturnType<typeof setTimeout> | undefined;
  const drained = await Promise.race([
    Promise.all(servers.map((s) => s.server.shutdown())).then(() => true),
    new Promise<boolean>((r) => (timer = setTimeout(() => r(false), DRAIN_MS))),
  ]);
  clearTimeout(timer);
  service.log('listeners closed', { drained, ms: Math.round(performance.now() - started) });
  await service.close();
  service.log('readers stopped', { ms: Math.round(performance.now() - started) });
  Deno.exit(0);
}
Deno.addSignalListener('SIGINT', () => void stop());
Deno.addSignalListener('SIGTERM', () => void stop());
