/**
 * Bounded work per request, over real HTTP on loopback: a constraint whose
 * expansion would hold a reader for minutes is answered 400
 * `constraint_too_complex` quickly, and a /tokenize text above
 * `max_tokenize_bytes` is answered 413 `input_too_large`, while a generation
 * running on the same reader completes normally.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveLoopback, startTestService, type TestService } from './helpers.ts';

let t: TestService;
let http: { base: string; close: () => Promise<void> };
beforeAll(async () => {
  t = await startTestService();
  http = await serveLoopback(t.apps.inference);
});
afterAll(async () => {
  await http?.close();
  await t?.svc.close();
});

const postJson = (path: string, body: unknown): Promise<Response> =>
  fetch(`${http.base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });

/** A generation that must run to its full length next to the hostile request. */
async function steadyGeneration(): Promise<{ status: number; tokens: number }> {
  const r = await postJson('/generate', { text: 'Once upon a time', max_new_tokens: 48, min_new_tokens: 48 });
  const body = (await r.json()) as { usage?: { completion_tokens: number } };
  return { status: r.status, tokens: body.usage?.completion_tokens ?? -1 };
}

describe('bounded work per request', () => {
  it('a minItems of 100000 is refused within seconds and a concurrent generation completes', async () => {
    const steady = steadyGeneration();
    const t0 = performance.now();
    const r = await postJson('/generate', { text: 'x', max_new_tokens: 4, json_schema: { type: 'array', items: { type: 'integer' }, minItems: 100000 } });
    const ms = performance.now() - t0;
    expect(r.status).toBe(400);
    const err = ((await r.json()) as { error: { code: string; details?: { keyword?: string } } }).error;
    expect(err.code).toBe('constraint_too_complex');
    expect(err.details?.keyword).toBe('minItems');
    expect(ms).toBeLessThan(5000);
    expect(await steady).toEqual({ status: 200, tokens: 48 });
  });

  it('a constraint that would compile past its budget is refused, and the reader keeps serving', async () => {
    // Within every count bound, but 900 x 900 string slots: far more automaton than the budget allows.
    const schema = { type: 'array', items: { type: 'array', items: { type: 'string', maxLength: 900 }, maxItems: 900 }, maxItems: 900 };
    const steady = steadyGeneration();
    const t0 = performance.now();
    const r = await postJson('/generate', { text: 'x', max_new_tokens: 4, json_schema: schema });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe('constraint_too_complex');
    expect(performance.now() - t0).toBeLessThan(5000);
    expect(await steady).toEqual({ status: 200, tokens: 48 });
    const ok = await postJson('/generate', { text: 'x', max_new_tokens: 8, json_schema: { type: 'array', items: { type: 'integer' }, maxItems: 2 } });
    expect(ok.status).toBe(200);
  });

  it('a 1.9 MB /tokenize is refused by max_tokenize_bytes and a concurrent generation completes', async () => {
    const steady = steadyGeneration();
    const readerId = t.svc.readers.all().find((r) => r.info?.type === 'generate')!.readerId;
    const t0 = performance.now();
    const r = await postJson(`/tokenize/${readerId}`, { text: 'Once upon a time there was a cat. '.repeat(56_000) });
    expect(r.status).toBe(413);
    const err = ((await r.json()) as { error: { code: string; details?: { limit?: number } } }).error;
    expect(err.code).toBe('input_too_large');
    expect(err.details?.limit).toBe(t.svc.config.maxTokenizeBytes);
    expect(performance.now() - t0).toBeLessThan(5000);
    expect(await steady).toEqual({ status: 200, tokens: 48 });
    const small = await postJson(`/tokenize/${readerId}`, { text: 'Once upon a time' });
    expect(small.status).toBe(200);
  });
});
