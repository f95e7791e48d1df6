/**
 * Service resilience: bearer-token auth on the APIs (probes stay open), and a
 * reader whose worker dies is restarted with backoff and serves again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestService, type TestService } from './helpers.ts';

let t: TestService;
beforeAll(async () => {
  t = await startTestService({ apiKeys: ['k-inference'], managementApiKeys: ['k-admin'] });
});
afterAll(async () => {
  await t?.svc.close();
});

describe('auth', () => {
  it('requires the inference key on inference routes and leaves probes open', async () => {
    const body = { text: 'Once upon a time', max_new_tokens: 2 };
    const none = await t.apps.inference.request('/generate', post(body));
    expect(none.status).toBe(401);
    expect(((await none.json()) as { error: { code: string } }).error.code).toBe('unauthorized');
    expect((await t.apps.inference.request('/generate', post(body, { authorization: 'Bearer wrong' }))).status).toBe(401);
    expect((await t.apps.inference.request('/generate', post(body, { authorization: 'Bearer k-inference' }))).status).toBe(200);
    expect((await t.apps.inference.request('/generate', post(body, { 'x-api-key': 'k-inference' }))).status).toBe(200);
    expect((await t.apps.inference.request('/healthz')).status).toBe(200);
    expect((await t.apps.inference.request('/metrics')).status).toBe(200);
  });

  it('uses the management key on the management app', async () => {
    expect((await t.apps.management.request('/reader_groups', { headers: { authorization: 'Bearer k-inference' } })).status).toBe(401);
    expect((await t.apps.management.request('/reader_groups', { headers: { authorization: 'Bearer k-admin' } })).status).toBe(200);
  });
});

describe('reader crash', () => {
  it('restarts a dead reader worker with backoff; requests meanwhile get 503, then succeed', async () => {
    const r = t.svc.readers.get('primary-0');
    // Kill the worker as a crash would (not through stop(), which marks it deleted).
    const victim = (r as unknown as { worker: { terminate(): Promise<unknown> } | null }).worker;
    expect(victim).not.toBeNull();
    await victim!.terminate();
    for (let i = 0; i < 20 && r.ready; i++) await new Promise((res) => setTimeout(res, 50));
    expect(r.ready).toBe(false);
    const during = await t.apps.inference.request('/generate', post({ text: 'a', max_new_tokens: 1 }, { authorization: 'Bearer k-inference' }));
    expect(during.status).toBe(503);
    await new Promise((res) => setTimeout(res, 700)); // first backoff is 500 ms
    await r.waitSettled(60_000);
    expect(r.state).toBe('ready');
    expect(r.restarts).toBe(1);
    const after = await t.apps.inference.request('/generate', post({ text: 'Once upon a time', max_new_tokens: 3 }, { authorization: 'Bearer k-inference' }));
    expect(((await after.json()) as { text: string }).text).toBe(', there was');
  });
});
