/**
 * `weft serve`: loads the configuration, starts the configured readers (each
 * in its own worker thread with its own GPU device) and listens on every
 * enabled port. Ctrl-C / SIGTERM stop the readers and close the listeners.
 */
import { serve as listen, type ServerType } from '@hono/node-server';
import { parseArgs } from 'node:util';
import { prepareGpuEnv } from '../core/gpu/device.ts';
import { appPorts, buildApps, listenPlan } from './apps/index.ts';
import { loadConfig, type ServiceConfig } from './config.ts';
import { Service } from './service.ts';

export interface Running {
  service: Service;
  servers: { name: string; port: number; server: ServerType }[];
  close(): Promise<void>;
}

/**
 * Starts the service; resolves once every listener is bound. Port 0 disables
 * an app (the inference app binds an ephemeral port instead); with
 * `ephemeral`, port 0 binds an ephemeral port for every app (tests).
 */
export async function start(config: ServiceConfig, opts: { ephemeral?: boolean } = {}): Promise<Running> {
  prepareGpuEnv(); // before any worker starts: workers cannot change the native environment
  const { notes } = appPorts(config); // throws on two apps on one port, before any reader starts
  const service = new Service(config);
  for (const note of notes) service.log(note, {}, 'warn');
  service.startConfiguredReaders();
  await service.attachNats();
  const apps = buildApps(service);
  const plan = listenPlan(config, apps);
  const servers: Running['servers'] = [];
  for (const [name, port, app] of plan) {
    if (port === 0 && name !== 'inference' && !opts.ephemeral) continue;
    const server = await new Promise<ServerType>((resolve, reject) => {
      const s = listen({ fetch: app.fetch, port, hostname: config.host }, () => resolve(s));
      s.once('error', reject);
    });
    const addr = server.address();
    const bound = typeof addr === 'object' && addr ? addr.port : port;
    servers.push({ name, port: bound, server });
    service.log('listening', { app: name, host: config.host, port: bound });
  }
  return {
    service,
    servers,
    async close() {
      await Promise.all(servers.map((s) => new Promise<void>((r) => s.server.close(() => r()))));
      await service.close();
    },
  };
}

export async function serve(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { config: { type: 'string' }, port: { type: 'string' }, model: { type: 'string' } } });
  const config = loadConfig({
    ...(values.config ? { file: values.config } : {}),
    overrides: {
      ...(values.port ? { port: Number(values.port) } : {}),
      ...(values.model ? { model: values.model } : {}),
    },
  });
  const running = await start(config);
  const lic = running.service.license.state();
  running.service.log('licence', { state: lic.state, required: lic.required, licensee: lic.licensee, expires: lic.expires, reason: lic.reason });
  const onHup = (): void => {
    const s = running.service.license.reload();
    running.service.log('licence reloaded', { state: s.state, licensee: s.licensee, expires: s.expires, reason: s.reason }, s.state === 'valid' || !s.required ? 'info' : 'warn');
  };
  process.on('SIGHUP', onHup);
  await new Promise<void>((resolve) => {
    const stop = (): void => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  running.service.log('shutting down');
  await running.close();
  return 0;
}
