/**
 * The queued-work memory bound (`kvstore_max_memory`): work that would hold more
 * than the bound gets 503 `overloaded` with Retry-After, the request already in
 * flight still completes, and its reservation is returned afterwards.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestService, type TestService } from './helpers.ts';

// A 200-token request for "Once upon a time" reserves 1024 + 32 + 200 * 16 = 4,256 bytes
// (server/service.ts requestBytes): one fits under 6,000, two do not.
const LIMIT = 6000;
const body = { text: 'Once upon a time', max_new_tokens: 200, min_new_tokens: 200 };

let t: TestService;
beforeAll(async () => {
  t = await startTestService({ kvstoreMaxMemory: LIMIT });
});
afterAll(async () => {
  await t?.svc.close();
});

const errorCode = async (r: Response): Promise<string> => ((await r.json()) as { error: { code: string } }).error.code;

describe('kvstore_max_memory', () => {
  it('refuses a request larger than the bound on its own', async () => {
    const r = await t.apps.inference.request('/generate', post({ ...body, max_new_tokens: 1000, min_new_tokens: 0 }));
    expect(r.status).toBe(503);
    expect(r.headers.get('retry-after')).toBe('1');
    expect(await errorCode(r)).toBe('overloaded');
  });

  it('refuses a second request while the first holds the memory, and serves again after', async () => {
    const first = t.apps.inference.request('/generate', post(body));
    const t0 = Date.now();
    while (t.svc.reservedBytes === 0 && Date.now() - t0 < 30_000) await new Promise((r) => setTimeout(r, 5));
    expect(t.svc.reservedBytes).toBeGreaterThan(0);

    const second = await t.apps.inference.request('/generate', post(body));
    expect(second.status).toBe(503);
    expect(second.headers.get('retry-after')).toBe('1');
    expect(await errorCode(second)).toBe('overloaded');
    const stream = await t.apps.inference.request('/generate_stream', post(body));
    expect(stream.status).toBe(503);

    const done = await first;
    expect(done.status).toBe(200);
    const d = (await done.json()) as { usage: { completion_tokens: number } };
    expect(d.usage.completion_tokens).toBe(200); // the admitted request was not cut short
    expect(t.svc.reservedBytes).toBe(0);

    const again = await t.apps.inference.request('/generate', post(body));
    expect(again.status).toBe(200);
    const metrics = await (await t.apps.inference.request('/metrics')).text();
    expect(metrics).toMatch(/weft_requests_rejected_total\{consumer_group="primary"\} 3\b/);
  });
});
