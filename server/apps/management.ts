/**
 * The management app (port 3001): reader groups with readiness, starting
 * readers (`PUT /models`), deleting them, and each reader's model config.
 */
import { Hono } from 'hono';
import { z } from 'zod';
import { ApiSpec, parseBody } from '../http/api_spec.ts';
import * as S from '../http/schemas.ts';
import { parseReaderSpec } from '../readers/spec.ts';
import type { Service } from '../service.ts';
import { healthz } from './inference.ts';

const ReaderSummary = z.object({
  reader_id: z.string(),
  consumer_group: z.string(),
  model: z.string(),
  type: z.string(),
  device: z.string().nullable(),
  backend: z.string().nullable(),
  ready: z.boolean(),
  state: z.string(),
});

export function managementApp(svc: Service): { app: Hono; spec: ApiSpec } {
  const app = new Hono();
  const spec = new ApiSpec('Weft management API', 'Readers (loaded models) and consumer groups.', svc.version);

  spec.add({ method: 'get', path: '/reader_groups', summary: 'Consumer groups and their readers, each with its ready flag', response: z.record(z.string(), z.array(ReaderSummary)) });
  app.get('/reader_groups', (c) => {
    const out: Record<string, unknown[]> = {};
    for (const [g, list] of svc.readers.groups()) out[g] = list.map((r) => svc.readers.summary(r));
    return c.json(out);
  });

  spec.add({ method: 'put', path: '/models', summary: 'Start a reader from a configuration (201 with its id; loads in the background)', body: S.ReaderSpecBody, response: ReaderSummary });
  app.put('/models', async (c) => {
    const body = await parseBody(c, S.ReaderSpecBody, 1 << 16);
    const r = svc.readers.start(svc.withReaderDefaults(parseReaderSpec(body, { model: svc.config.model })));
    svc.log('reader started', { reader_id: r.readerId, model: r.spec.model, group: r.spec.consumerGroup });
    return c.json(svc.readers.summary(r), 201);
  });

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

  spec.add({ method: 'get', path: '/healthz', summary: '200 when every reader is ready, else 503' });
  app.get('/healthz', (c) => healthz(c, svc));

  spec.mountDocs(app);
  return { app, spec };
}
