/**
 * Builds every HTTP app of the service, each a plain Hono app that tests can
 * drive with `app.request()`: inference (3000, which also carries the
 * OpenAI-compatible /v1 routes and /metrics), management (3001), the
 * OpenAI layer on its own port (3003), SageMaker-style (8080) and
 * Vertex-style (3002).
 */
import { Hono, type MiddlewareHandler } from 'hono';
import { InvalidRequestError, NotFoundError } from '../../core/errors.ts';
import { bearerAuth } from '../http/auth.ts';
import { errorBody, onError } from '../http/errors.ts';
import { frontendOptions, frontendRoutes } from './frontend.ts';
import type { Service } from '../service.ts';
import { inferenceApp } from './inference.ts';
import { healthz } from './health.ts';
import { managementApp } from './management.ts';
import { mountDocuments } from './documents.ts';
import { metricsRoute } from './metrics_route.ts';
import { openaiApp } from './openai.ts';
import { sagemakerApp } from './sagemaker.ts';
import { vertexApp, vertexPort } from './vertex.ts';
import type { ServiceConfig } from '../config.ts';
import { PACKAGE_NAME } from '../paths.ts';

export interface Apps {
  inference: Hono;
  management: Hono;
  openai: Hono;
  sagemaker: Hono;
  vertex: Hono;
}

/**
 * `pre`: routes mounted ahead of the shared auth (they carry their own, or are open probes).
 * `ui`: serve the web app (under WEFT_FRONTEND_BASE_PATH) from this app; the page and CORS
 * preflights carry no key, the API calls it makes do.
 */
function finish(app: Hono, svc: Service, auth: MiddlewareHandler, pre?: Hono, ui?: 'inference' | 'management'): Hono {
  const root = new Hono();
  root.onError(onError(svc.log));
  root.notFound((c) => c.json(errorBody(new NotFoundError('route_not_found', `no route ${c.req.method} ${c.req.path}`)), 404));
  if (ui) frontendRoutes(root, frontendOptions(svc.config, ui));
  if (pre) root.route('/', pre);
  root.route('/', commonRoutes(svc));
  root.use('*', auth);
  root.route('/', app);
  return root;
}

/**
 * Open routes every port carries (ahead of auth, like the probes they are):
 * `GET /version` → `{name, version}` (package.json), and `GET /health`, the
 * same answer as `/healthz` for load balancers and platforms that probe that
 * name. An app whose own health route is `/health` (Vertex with the default
 * AIP_HEALTH_ROUTE) keeps it: `pre` is mounted first.
 */
function commonRoutes(svc: Service): Hono {
  const app = new Hono();
  app.get('/version', (c) => c.json({ name: PACKAGE_NAME, version: svc.version }));
  app.get('/health', (c) => healthz(c, svc));
  return app;
}

export function buildApps(svc: Service): Apps {
  const inf = inferenceApp(svc);
  metricsRoute(inf.app, svc);
  mountDocuments(inf.app, svc, inf.spec);
  const mgmt = managementApp(svc);
  const { apiKeys, apiKeyOwners } = svc.config;
  const keys = bearerAuth(apiKeys, apiKeyOwners);
  // Keys bound to document owners never manage the server; with only such keys, management stays closed.
  const mkeys = bearerAuth(svc.config.managementApiKeys.length ? svc.config.managementApiKeys : apiKeys, {}, Object.keys(apiKeyOwners).length > 0);
  const oai = openaiApp(svc);
  const vx = vertexApp(svc);
  return {
    inference: finish(inf.app, svc, keys, oai.v1, 'inference'),
    management: finish(mgmt.app, svc, mkeys, undefined, 'management'),
    openai: finish(oai.extras, svc, keys, oai.v1),
    sagemaker: finish(sagemakerApp(svc).app, svc, keys),
    vertex: finish(vx.app, svc, keys, vx.open),
  };
}

type AppName = keyof Apps;

/**
 * The port each app listens on (0 = off, except the inference app). Vertex AI
 * sets AIP_HTTP_PORT (8080 unless the model's container spec says otherwise),
 * which is also the SageMaker app's default port: on such a host the Vertex
 * app takes the port and the SageMaker app is turned off, with a note saying
 * so. Any other two apps on one port are a configuration error, answered at
 * start-up instead of as an EADDRINUSE crash.
 */
export function appPorts(config: ServiceConfig, env: Record<string, string | undefined> = process.env): { ports: Record<AppName, number>; notes: string[] } {
  const ports: Record<AppName, number> = {
    inference: config.port,
    management: config.managementPort,
    openai: config.openaiPort,
    sagemaker: config.sagemakerPort,
    vertex: vertexPort(config, env),
  };
  const notes: string[] = [];
  const fromAip = env.AIP_HTTP_PORT !== undefined && env.AIP_HTTP_PORT !== '';
  if (fromAip && ports.vertex !== 0 && ports.vertex === ports.sagemaker) {
    notes.push(`sagemaker app off: port ${ports.sagemaker} is AIP_HTTP_PORT, the Vertex app's (set sagemaker_port to another port to keep both)`);
    ports.sagemaker = 0;
  }
  const owner = new Map<number, AppName>();
  for (const name of Object.keys(ports) as AppName[]) {
    const p = ports[name];
    if (p === 0) continue;
    const first = owner.get(p);
    if (first) {
      throw new InvalidRequestError('invalid_config', `config: the ${first} and ${name} apps are both on port ${p}; give one another port, or 0 to turn it off`, { key: name === 'inference' ? 'port' : `${name}_port`, port: p });
    }
    owner.set(p, name);
  }
  return { ports, notes };
}

/** Which app listens on which port (appPorts); shared by the Node and Deno entries. */
export function listenPlan(config: ServiceConfig, apps: Apps, env: Record<string, string | undefined> = process.env): [name: string, port: number, app: Hono][] {
  const { ports } = appPorts(config, env);
  return (Object.keys(ports) as AppName[]).map((n) => [n, ports[n], apps[n]]);
}
