/**
 * A real service for server tests: the bundled model in a worker-thread
 * reader, apps built in-process (for `app.request()`), readiness awaited.
 */
import { buildApps, type Apps } from '../../server/apps/index.ts';
import { loadConfig, type ServiceConfig } from '../../server/config.ts';
import { Service } from '../../server/service.ts';
import { prepareGpuEnv } from '../../core/gpu/device.ts';

export interface TestService {
  svc: Service;
  apps: Apps;
}

export async function startTestService(overrides: Partial<ServiceConfig> = {}): Promise<TestService> {
  prepareGpuEnv();
  // No pipeline warm-up (its default on OpenGL ES): these tests time no first request, and
  // warm-up compiles every common step shape before the reader is ready, in every file that
  // starts a service. test/server/warmup.test.ts covers warm-up itself.
  const svc = new Service(loadConfig({ env: {}, overrides: { embeddingModel: '', backend: process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles', logDisableTimestamps: true, warmup: 'off', ...overrides } }));
  svc.startConfiguredReaders();
  await svc.readers.waitSettled(60_000);
  for (const r of svc.readers.all()) if (!r.ready) throw new Error(`reader ${r.readerId} did not load: ${JSON.stringify(r.error)}`);
  return { svc, apps: buildApps(svc) };
}

export function post(body: unknown, headers: Record<string, string> = {}): RequestInit {
  return { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) };
}

/** Parses an SSE body into events. */
export function parseSse(text: string): { event: string; data: string }[] {
  return text
    .split('\n\n')
    .filter((b) => b.trim())
    .map((block) => {
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      return { event, data: data.join('\n') };
    });
}

/** Serves `app` over real HTTP on 127.0.0.1 (an ephemeral port); `close` stops the listener. */
export async function serveLoopback(app: { fetch: (req: Request) => Response | Promise<Response> }): Promise<{ base: string; close: () => Promise<void> }> {
  const { serve } = await import('@hono/node-server');
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  const addr = server.address();
  const base = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  return { base, close: () => new Promise<void>((r) => server.close(() => r())) };
}
