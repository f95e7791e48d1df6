/**
 * `constrained_decoding_budget` end to end: the bundled stories260K model in a
 * real worker-thread reader. With the default ('complete'), free-form JSON
 * (`json_schema: {}`) sampled at temperature 1 with a small max_new_tokens
 * always parses: the value is closed within the budget, finish_reason
 * `length` when the budget closed it, `stop` when it closed on its own. With
 * 'truncate' the output is cut where the budget ends, as before. A bad value
 * is a 400 with a stable code.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestService, type TestService } from './helpers.ts';

let t: TestService;
beforeAll(async () => {
  t = await startTestService({ maxPromptStringBytes: 2000 });
}, 120_000);
afterAll(async () => {
  await t?.svc.close();
});

const inf = (path: string, init?: RequestInit): Promise<Response> => Promise.resolve(t.apps.inference.request(path, init));
type Gen = { text: string; finish_reason: string };
/** An object whose one string is long by nature: without steering, 24 tokens end inside it. */
const STORY = { type: 'object', properties: { story: { type: 'string', minLength: 8 } }, required: ['story'], additionalProperties: false };

describe('constrained_decoding_budget', () => {
  it('complete (default): every output parses and validates, finish_reason length when the budget closed it', async () => {
    const reasons: string[] = [];
    for (const [schema, max] of [
      [{}, 12],
      [{}, 30],
      [STORY, 24],
    ] as const) {
      const res = await Promise.all([1, 2, 3, 4].map((seed) => inf('/generate', post({ text: 'Once upon a time', max_new_tokens: max, sampling_temperature: 1, seed, json_schema: schema }))));
      for (const r of res) {
        expect(r.status).toBe(200);
        const body = (await r.json()) as Gen;
        const value = JSON.parse(body.text) as Record<string, unknown>;
        expect(typeof value).toBe('object');
        if (schema === STORY) expect((value.story as string).length).toBeGreaterThanOrEqual(8);
        expect(['length', 'stop']).toContain(body.finish_reason);
        reasons.push(body.finish_reason);
      }
    }
    expect(reasons).toContain('length'); // values the budget closed
  }, 300_000);

  it('truncate: cut where the budget ends (the long string is not closed)', async () => {
    const res = await Promise.all([1, 2, 3].map((seed) => inf('/generate', post({ text: 'Once upon a time', max_new_tokens: 24, sampling_temperature: 1, seed, json_schema: { ...STORY, properties: { story: { type: 'string', minLength: 400 } } }, constrained_decoding_budget: 'truncate' }))));
    for (const r of res) {
      const body = (await r.json()) as Gen;
      expect(body.finish_reason).toBe('length');
      expect(() => JSON.parse(body.text)).toThrow();
    }
    // The same request steered: a 400-character string cannot close in 24 tokens either way, so nothing is narrowed.
    const same = (await (await inf('/generate', post({ text: 'Once upon a time', max_new_tokens: 24, sampling_temperature: 1, seed: 1, json_schema: { ...STORY, properties: { story: { type: 'string', minLength: 400 } } } }))).json()) as Gen;
    expect(same.finish_reason).toBe('length');
  }, 300_000);

  it('an unknown value is a 400 naming the field', async () => {
    const r = await inf('/generate', post({ text: 'x', max_new_tokens: 4, json_schema: {}, constrained_decoding_budget: 'close' }));
    expect(r.status).toBe(400);
    const body = (await r.json()) as { error: { code: string; details?: { field?: string } } };
    expect(body.error.code).toBe('invalid_constrained_decoding_budget');
  });

  it('OpenAI completions: steered by default, truncate on request, bad values refused', async () => {
    const ask = (extra: Record<string, unknown>) =>
      Promise.resolve(t.apps.openai.request('/v1/completions', post({ prompt: 'Once', max_tokens: 10, temperature: 1, seed: 3, response_format: { type: 'json_object' }, ...extra })));
    for (const seed of [3, 5, 7]) {
      const r = await ask({ seed });
      expect(r.status).toBe(200);
      const body = (await r.json()) as { choices: Array<{ text: string }> };
      expect(() => JSON.parse(body.choices[0]!.text)).not.toThrow();
    }
    expect((await ask({ constrained_decoding_budget: 'truncate' })).status).toBe(200);
    const bad = await ask({ constrained_decoding_budget: 'both' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('invalid_constrained_decoding_budget');
  }, 120_000);
});
