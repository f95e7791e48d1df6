/**
 * Requests that used to end in a 500 or in a server reported unhealthy:
 * a `json_schema` nested 2,000 levels (a stack overflow while sizing the
 * request) is a 400 `json_too_deep` on the native and OpenAI routes; a
 * reader started at run time (PUT /models) that fails to load is reported in
 * /reader_groups and /reader/{id} while /healthz stays 200 and the configured
 * reader keeps serving; bound API keys never open the management app. Real
 * service: the bundled model in a worker-thread reader.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApps } from '../../server/apps/index.ts';
import { post, startTestService, type TestService } from './helpers.ts';

const nested = (depth: number): unknown => {
  let s: unknown = { type: 'string' };
  for (let i = 0; i < depth; i++) s = { type: 'array', items: s };
  return s;
};

describe('request limits and health', () => {
  let t: TestService;
  let broken = '';
  beforeAll(async () => {
    t = await startTestService();
    broken = mkdtempSync(join(tmpdir(), 'weft-broken-model-'));
    writeFileSync(join(broken, 'config.json'), '{"model_type": "not-a-model"}');
  }, 120_000);
  afterAll(async () => {
    await t?.svc.close();
    if (broken) rmSync(broken, { recursive: true, force: true });
  });

  it('a json_schema nested 2,000 levels is a 400 json_too_deep, not a 500', async () => {
    const g = await t.apps.inference.request('/generate', post({ text: 'x', max_new_tokens: 2, json_schema: nested(2000) }));
    expect(g.status).toBe(400);
    expect(await g.json()).toMatchObject({ error: { code: 'json_too_deep', details: { limit: 64 } } });
    const o = await t.apps.inference.request('/v1/chat/completions', post({ messages: [{ role: 'user', content: 'x' }], max_tokens: 2, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: nested(2000) } } }));
    expect(o.status).toBe(400);
    expect(((await o.json()) as { error: { code: string } }).error.code).toBe('json_too_deep');
    // A string holding brackets is not nesting.
    const s = await t.apps.inference.request('/tokenize/primary-0', post({ text: '['.repeat(5000) }));
    expect(s.status).toBe(200);
  }, 60_000);

  it('a failed PUT /models is reported while /healthz stays 200 and the other readers serve', async () => {
    const m = t.apps.management;
    expect((await m.request('/healthz')).status).toBe(200);
    const put = await m.request('/models', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: broken, consumer_group: 'extra', reader_id: 'extra-0' }) });
    expect(put.status).toBe(201);
    const end = Date.now() + 60_000;
    let state = '';
    while (Date.now() < end && state !== 'failed') {
      state = ((await (await m.request('/reader/extra-0')).json()) as { state: string }).state;
      if (state !== 'failed') await new Promise((r) => setTimeout(r, 100));
    }
    expect(state).toBe('failed');
    const groups = (await (await m.request('/reader_groups')).json()) as unknown;
    expect(JSON.stringify(groups)).toContain('"failed"');
    const status = JSON.stringify(await (await t.apps.inference.request('/status')).json());
    expect(status).toContain('extra-0');
    expect(status).toContain('failed');
    const h = await m.request('/healthz');
    expect(h.status).toBe(200);
    expect((await t.apps.inference.request('/healthz')).status).toBe(200);
    const g = await t.apps.inference.request('/generate', post({ text: 'Once upon a time', max_new_tokens: 3 }));
    expect(g.status).toBe(200);
    await m.request('/reader/extra-0', { method: 'DELETE' });
  }, 90_000);

  it('keys bound to document owners do not open the management app', async () => {
    const saved = { ...t.svc.config };
    Object.assign(t.svc.config, { apiKeys: [], managementApiKeys: [], apiKeyOwners: { tenant: ['alice'] } });
    try {
      const apps = buildApps(t.svc);
      expect((await apps.management.request('/reader_groups', { headers: { authorization: 'Bearer tenant' } })).status).toBe(401);
      expect((await apps.management.request('/reader_groups')).status).toBe(401);
      expect((await apps.inference.request('/tokenize/primary-0', post({ text: 'hi' }, { authorization: 'Bearer tenant' }))).status).toBe(200);
    } finally {
      Object.assign(t.svc.config, saved);
    }
  });
});
