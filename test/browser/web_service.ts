/**
 * The real service for the web-app tests: startTestService()'s inference and
 * management apps, each on its own loopback port behind a Hono app that
 * mounts the built web app at `/ui/` with frontendRoutes — as `weft serve`
 * does, with the page's management base pointing at the management port
 * (cross-origin, answered by frontendRoutes' same-host CORS). Also builds
 * the app with Vite's API into a temporary directory.
 */
import { serve as listen, type ServerType } from '@hono/node-server';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Hono } from 'hono';
import { frontendRoutes } from '../../server/apps/frontend.ts';
import { startTestService, type TestService } from '../server/helpers.ts';

export const UI_BASE = '/ui/';

/** Builds web/ with Vite into a fresh temp dir; returns it. */
export async function buildWebApp(): Promise<string> {
  const outDir = await mkdtemp(join(tmpdir(), 'weft-web-'));
  const { build } = await import('vite');
  await build({ configFile: 'web/vite.config.ts', logLevel: 'warn', build: { outDir, emptyOutDir: true, sourcemap: false } });
  return outDir;
}

async function listenOn(fetch: (r: Request) => Response | Promise<Response>): Promise<{ server: ServerType; origin: string }> {
  const server = await new Promise<ServerType>((ok, fail) => {
    const s = listen({ fetch, port: 0, hostname: '127.0.0.1' }, () => ok(s));
    s.once('error', fail);
  });
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

export interface WebService extends TestService {
  distDir: string;
  inference: string;
  management: string;
  /** The app's URL on the inference port. */
  page: string;
  close(): Promise<void>;
}

export async function startWebService(overrides: Parameters<typeof startTestService>[0] = {}): Promise<WebService> {
  const [distDir, ts] = await Promise.all([buildWebApp(), startTestService(overrides)]);
  let inf: Hono | undefined;
  let mgmt: Hono | undefined;
  const a = await listenOn((r) => inf!.fetch(r));
  const b = await listenOn((r) => mgmt!.fetch(r));
  const mport = new URL(b.origin).port;
  const iport = new URL(a.origin).port;
  inf = new Hono();
  frontendRoutes(inf, { basePath: UI_BASE, distDir, managementBase: `:${mport}` });
  inf.mount('/', ts.apps.inference.fetch);
  mgmt = new Hono();
  frontendRoutes(mgmt, { basePath: UI_BASE, distDir, inferenceBase: `:${iport}` });
  mgmt.mount('/', ts.apps.management.fetch);
  return {
    ...ts,
    distDir,
    inference: a.origin,
    management: b.origin,
    page: `${a.origin}${UI_BASE}`,
    async close() {
      for (const s of [a.server, b.server]) {
        (s as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
        await new Promise<void>((ok) => s.close(() => ok()));
      }
      await ts.svc.close();
      await rm(distDir, { recursive: true, force: true });
    },
  };
}
