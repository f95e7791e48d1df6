/**
 * The Vertex AI-style app (`vertex_port`, 3002): the custom-container contract
 * of Vertex AI prediction. Health at AIP_HEALTH_ROUTE and predict at
 * AIP_PREDICT_ROUTE (environment variables Vertex sets; otherwise the
 * aip_health_route / aip_predict_route settings, default /health and
 * /predict), on AIP_HTTP_PORT when set (else vertex_port).
 *
 * Predict takes `{instances: [{text, ...params}], parameters: {...params}}`
 * with the /generate parameters; an instance's own fields override
 * `parameters`, and an instance may be a bare string. Instances run
 * concurrently; the answer is `{predictions: [{text, finish_reason, usage}],
 * deployedModelId?}` (deployedModelId from AIP_DEPLOYED_MODEL_ID). The health
 * route is mounted ahead of bearer auth, since Vertex probes it without keys.
 */
import { Hono } from 'hono';
import { z } from 'zod';
import { InvalidRequestError } from '../../core/errors.ts';
import type { ServiceConfig } from '../config.ts';
import { ApiSpec, parseBody } from '../http/api_spec.ts';
import * as S from '../http/schemas.ts';
import type { Service } from '../service.ts';
import { toGenerateRequest } from './generation.ts';
import { usageOf } from '../http/sse.ts';

type Env = Record<string, string | undefined>;

const Instance = S.GenerationParams.extend({ text: z.string() });

export const PredictBody = z.strictObject({
  instances: z.array(z.union([z.string(), Instance])).min(1).max(64).describe('Prompts: {text, ...generation params} or a bare string.'),
  parameters: S.GenerationParams.optional().describe('Generation params for every instance (an instance field wins).'),
});

export const PredictResponse = z.object({
  predictions: z.array(z.object({ text: z.string(), finish_reason: z.string(), usage: S.Usage })),
  deployedModelId: z.string().optional(),
});

const Health = z.object({ status: z.enum(['ok', 'loading']) });

/** The port Vertex expects: AIP_HTTP_PORT when set, else vertex_port. */
export function vertexPort(config: ServiceConfig, env: Env = process.env): number {
  const raw = env.AIP_HTTP_PORT;
  if (raw === undefined || raw === '') return config.vertexPort;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidRequestError('invalid_config', `AIP_HTTP_PORT must be a port number, got ${JSON.stringify(raw)}`, { key: 'AIP_HTTP_PORT' });
  return n;
}

const route = (r: string): string => (r.startsWith('/') ? r : `/${r}`);

/** The health and predict routes: AIP_* environment first, then the settings. */
export function vertexRoutes(config: ServiceConfig, env: Env = process.env): { health: string; predict: string } {
  return { health: route(env.AIP_HEALTH_ROUTE || config.aipHealthRoute), predict: route(env.AIP_PREDICT_ROUTE || config.aipPredictRoute) };
}

export function vertexApp(svc: Service, env: Env = process.env): { app: Hono; open: Hono; spec: ApiSpec } {
  const app = new Hono();
  const open = new Hono();
  const spec = new ApiSpec('Weft Vertex AI-style API', 'The Vertex AI custom-container contract: health and predict routes.', svc.version);
  const routes = vertexRoutes(svc.config, env);
  const maxBody = Math.max(svc.config.maxPromptStringBytes * 64 + 65536, 1 << 20);

  spec.add({ method: 'get', path: routes.health, summary: '200 when every reader is ready, else 503 (no auth)', response: Health });
  open.get(routes.health, (c) => (svc.readers.allReady ? c.json({ status: 'ok' }, 200) : c.json({ status: 'loading' }, 503)));

  spec.add({ method: 'post', path: routes.predict, summary: 'Generate for each instance', body: PredictBody, response: PredictResponse });
  app.post(routes.predict, async (c) => {
    const body = await parseBody(c, PredictBody, maxBody);
    const params = body.parameters ?? {};
    const items = body.instances.map((inst) => (typeof inst === 'string' ? { ...params, text: inst } : { ...params, ...inst }));
    const reqs = items.map((p) => toGenerateRequest(p, p.text, svc.config.maxPromptStringBytes));
    const ids = reqs.map(() => svc.newRequestId());
    c.header('x-request-id', ids.join(','));
    const ds = await Promise.all(reqs.map((r, i) => svc.runToCompletion(items[i]!.consumer_group, { ...r, id: ids[i]! }, c.req.raw.signal)));
    const deployed = env.AIP_DEPLOYED_MODEL_ID;
    return c.json({
      predictions: ds.map((d) => ({ text: d.text, finish_reason: d.finishReason, usage: usageOf(d) })),
      ...(deployed ? { deployedModelId: deployed } : {}),
    });
  });

  spec.mountDocs(app);
  return { app, open, spec };
}
