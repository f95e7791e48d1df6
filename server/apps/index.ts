/**
 * Builds every HTTP app of the service, each a plain Hono app that tests can
 * drive with `app.request()`: inference (3000, which also carries the
 * OpenAI-compatible /v1 routes and /metrics), management (3001), the
 * OpenAI layer on its own port (3003), SageMaker-style (8080) and
 * Vertex-style (3002).
 */
import { Hono, type MiddlewareHandler } from 'hono';
import { NotFoundError } from '../../core/errors.ts';
import { bearerAuth } from '../http/auth.ts';
import { errorBody, onError } from '../http/errors.ts';
import { frontendOptions, frontendRoutes } from './frontend.ts';
import type { Service } from '../service.ts';
import { inferenceApp } from './inference.ts';
import { managementApp } from './management.ts';
import { mountDocuments } from './documents.ts';
import { metricsRoute } from './metrics_route.ts';
import { openaiApp } from './openai.ts';
import { sagemakerApp } from './sagemaker.ts';
import { vertexApp, vertexPort } from './vertex.ts';
import type { ServiceConfig } from '../config.ts';

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
  root.use('*', auth);
  root.route('/', app);
  return root;
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

/** Which app listens on which configured port (0 = disabled, except the inference app); shared by the Node and Deno entries. */
export function listenPlan(config: ServiceConfig, apps: Apps): [name: string, port: number, app: Hono][] {
  return [
    ['inference', config.port, apps.inference],
    ['management', config.managementPort, apps.management],
    ['openai', config.openaiPort, apps.openai],
    ['sagemaker', config.sagemakerPort, apps.sagemaker],
    ['vertex', vertexPort(config), apps.vertex],
  ];
}
