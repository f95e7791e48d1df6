/**
 * The management app (port 3001): reader groups with readiness, starting
 * readers (`PUT /models`), deleting them, and each reader's model config.
 * Groups with a scaling policy show their replicas, scaled-to-zero state and
 * policy (`?detail=true`, `/reader_groups/{group}`), and the policy can be
 * changed at run time (PATCH); see docs/scaling.md. A model given to
 * `PUT /models` as a Hub id is downloaded by the server first, with progress
 * on the reader's summary (docs/models.md).
 */
import { Hono } from 'hono';
import { z } from 'zod';
import { ApiSpec, parseBody } from '../http/api_spec.ts';
import * as S from '../http/schemas.ts';
import { hubModelFetch } from '../hub/resolve.ts';
import { parseScaling } from '../readers/scaling.ts';
import { parseReaderSpec } from '../readers/spec.ts';
import type { Service } from '../service.ts';
import { healthz } from './health.ts';
import { planModel } from '../models/plan.ts';

const ReaderSummary = z.object({
  reader_id: z.string(),
  consumer_group: z.string(),
  model: z.string(),
  type: z.string(),
  device: z.string().nullable(),
  backend: z.string().nullable(),
  ready: z.boolean(),
  state: z.string(),
  remote: z.string().nullable(),
  autoscaled: z.boolean(),
  draining: z.boolean(),
  download: z.object({ loaded: z.number(), total: z.number(), file: z.string() }).nullable().describe('A model given as a Hub id: bytes fetched so far and in all (all files together) and the file in progress; null for a local model'),
});

const GroupSummary = z.object({
  consumer_group: z.string(),
  state: z.enum(['ready', 'starting', 'scaled_to_zero', 'failed']),
  ready_replicas: z.number(),
  replicas: z.array(ReaderSummary),
  scaling: z.record(z.string(), z.number()).nullable(),
  cold_starts: z.number(),
  scale_ups: z.number(),
  scale_downs: z.number(),
});

export function managementApp(svc: Service): { app: Hono; spec: ApiSpec } {
  const app = new Hono();
  const spec = new ApiSpec('Weft management API', 'Readers (loaded models) and consumer groups.', svc.version);

  spec.add({
    method: 'get',
    path: '/reader_groups',
    summary: 'Consumer groups and their readers, each with its ready flag (a group scaled to zero has none); `?detail=true`: each group with its state, scaling policy and counters',
    query: { detail: 'true: one GroupSummary per group instead of the reader list' },
    response: z.record(z.string(), z.union([z.array(ReaderSummary), GroupSummary])),
  });
  app.get('/reader_groups', (c) => {
    const detail = /^(1|true|yes)$/i.test(c.req.query('detail') ?? '');
    const out: Record<string, unknown> = {};
    for (const [g, list] of svc.readers.groups()) out[g] = detail ? svc.readers.groupSummary(g) : list.map((r) => svc.readers.summary(r));
    return c.json(out);
  });

  spec.add({ method: 'get', path: '/reader_groups/{group}', summary: 'One group: state (ready, starting, scaled_to_zero, failed), replicas, scaling policy, cold starts', response: GroupSummary });
  app.get('/reader_groups/:group', (c) => c.json(svc.readers.groupSummary(c.req.param('group'))));

  spec.add({ method: 'patch', path: '/reader_groups/{group}', summary: "Change a group's scaling policy (fields not given keep their value)", body: S.ScalingFields, response: GroupSummary });
  app.patch('/reader_groups/:group', async (c) => {
    const body = await parseBody(c, S.ScalingFields, 1 << 12);
    const group = c.req.param('group');
    const policy = svc.readers.setPolicy(group, parseScaling(body) ?? {});
    svc.log('scaling policy changed', { consumer_group: group, ...policy });
    return c.json(svc.readers.groupSummary(group));
  });

  spec.add({ method: 'put', path: '/models', summary: 'Start a reader from a configuration (201 with its id; loads in the background). A `model` that is a Hub id (`org/name`, `org/name:file.gguf`) and not an existing path is downloaded first: state `downloading` with `download` progress, then `loading`; a failed download leaves the reader `failed` with the Hub error', body: S.ReaderSpecBody, response: ReaderSummary });
  app.put('/models', async (c) => {
    const body = await parseBody(c, S.ReaderSpecBody, 1 << 16);
    svc.license.assertReaderSlot(svc.readers.all().length);
    const readerSpec = svc.withReaderDefaults(parseReaderSpec(body, { model: svc.config.model }));
    const fetchModel = readerSpec.remote ? null : await hubModelFetch(readerSpec.model);
    const r = svc.readers.start(readerSpec, fetchModel ?? undefined);
    r.runtime = true;
    svc.log('reader started', { reader_id: r.readerId, model: r.spec.model, group: r.spec.consumerGroup, ...(fetchModel ? { download: true } : {}) });
    void r.fetched?.then((err) => {
      if (err) svc.log('model download failed', { reader_id: r.readerId, model: r.spec.model, code: err.code, error: err.message }, 'warn');
      else if (r.state !== 'stopped') svc.log('model downloaded', { reader_id: r.readerId, model: r.spec.model, bytes: r.download?.loaded ?? 0 });
    });
    return c.json(svc.readers.summary(r), 201);
  });

  spec.add({
    method: 'get',
    path: '/memory_plan',
    summary:
      "The device memory plan of a model on this server's GPU, from its headers (nothing is loaded): weights, activations, reserve, KV pool and the tokens of context it holds. A model that cannot fit: 507 model_too_large with every number in details",
    query: {
      model: 'a model directory or .gguf file on the server (required)',
      max_context: 'context limit in tokens (default: the model\'s)',
      max_seqs: 'sequences the KV pool is sized for (default 16, as a reader)',
      dtype: 'auto (default), f32, f16, q8_0, q4_0',
      kv_cache_dtype: 'auto (default: f16 where the adapter has shader-f16 and the megakernel does not run the model, else f32), f32, f16 or q8',
      gpu_memory: 'device memory budget in bytes (default: WEFT_GPU_MEMORY, else the adapter default)',
    },
  });
  app.get('/memory_plan', async (c) => c.json(await planModel(c.req.query(), svc.config.backend, process.env)));

  spec.add({ method: 'get', path: '/reader/{reader_id}', summary: 'One reader with its state', response: ReaderSummary });
  app.get('/reader/:reader_id', (c) => c.json(svc.readers.summary(svc.readers.get(c.req.param('reader_id')))));

  spec.add({ method: 'delete', path: '/reader/{reader_id}', summary: 'Stop and remove a reader' });
  app.delete('/reader/:reader_id', async (c) => {
    const id = c.req.param('reader_id');
    await svc.readers.delete(id);
    svc.log('reader deleted', { reader_id: id });
    return c.json({ reader_id: id, deleted: true });
  });

  spec.add({ method: 'get', path: '/config/{reader_id}', summary: "The config.json of the reader's model" });
  app.get('/config/:reader_id', async (c) => c.json((await svc.readers.api(c.req.param('reader_id')).modelConfig()) as Record<string, unknown>));

  spec.add({ method: 'delete', path: '/reader_groups/{group}', summary: 'Stop every reader of a group and remove the group with its scaling policy' });
  app.delete('/reader_groups/:group', async (c) => {
    const group = c.req.param('group');
    const stopped = await svc.readers.deleteGroup(group);
    svc.log('consumer group deleted', { consumer_group: group, readers: stopped });
    return c.json({ consumer_group: group, deleted: true, readers: stopped });
  });

  spec.add({ method: 'get', path: '/license', summary: 'The licence state (docs/licence.md)' });
  app.get('/license', (c) => c.json(svc.license.state()));
  spec.add({ method: 'post', path: '/license/reload', summary: 'Re-read the licence file (as SIGHUP does) and return its state' });
  app.post('/license/reload', (c) => {
    const s = svc.license.reload();
    svc.log('licence reloaded', { state: s.state, licensee: s.licensee, expires: s.expires, reason: s.reason }, s.state === 'valid' || !s.required ? 'info' : 'warn');
    return c.json(s);
  });

  spec.add({ method: 'get', path: '/healthz', summary: '200 when every group is healthy (a group scaled to zero by design counts as healthy; docs/scaling.md), else 503' });
  app.get('/healthz', (c) => healthz(c, svc));

  spec.mountDocs(app);
  return { app, spec };
}
