/**
 * `json_whitespace` end to end: the bundled model in a real worker-thread
 * reader, every API shape that carries the field (/generate,
 * /generate_stream, Vertex predict, SageMaker invocations, OpenAI chat and
 * completions). Outputs sampled at temperature 1 must validate with ajv and
 * be exactly in the requested form: reformatJson(text, mode) === text (no
 * whitespace outside strings, except one space after every ':' and ',' in
 * 'compact'). Bad values and misuse are 400s with stable codes.
 */
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reformatJson, whitespaceRuns } from '../structured/support.ts';
import { parseSse, post, startTestService, type TestService } from './helpers.ts';

let t: TestService;
beforeAll(async () => {
  t = await startTestService({ maxPromptStringBytes: 2000 });
}, 120_000);
afterAll(async () => {
  await t?.svc.close();
});

const inf = (path: string, init?: RequestInit): Promise<Response> => Promise.resolve(t.apps.inference.request(path, init));

/** Function-calling style: nested object, enum, bounded array; small enough to finish within the token budget. */
const SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 10 },
    args: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 8 }, days: { type: 'integer', minimum: 1, maximum: 14 }, units: { enum: ['metric', 'imperial'] } },
      required: ['city', 'days', 'units'],
      additionalProperties: false,
    },
    tags: { type: 'array', items: { type: 'string', maxLength: 5 }, minItems: 1, maxItems: 3 },
  },
  required: ['name', 'args', 'tags'],
  additionalProperties: false,
};
const ajv = new Ajv2020({ strict: false });
addFormats(ajv);
const validate = ajv.compile(SCHEMA);

/** Asserts a finished output validates and is exactly in `mode`; the fixed schema always has separators to check. */
function expectForm(text: string, mode: 'none' | 'compact'): void {
  const value: unknown = JSON.parse(text);
  expect(validate(value), `${text}: ${ajv.errorsText(validate.errors)}`).toBe(true);
  expect(reformatJson(text, mode), text).toBe(text);
  expect(text.includes(', ') && text.includes(': ')).toBe(mode === 'compact');
}

type Gen = { text: string; finish_reason: string };
type Err = { error: { code: string; message: string; details?: Record<string, unknown> } };

describe('json_whitespace on /generate', () => {
  it.each([
    ['native', undefined],
    ['native', 'none'],
    ['native', 'compact'],
    ['outlines', 'none'],
    ['outlines', 'compact'],
  ] as const)('%s backend, json_whitespace %s: outputs validate and have exactly that form', async (backend, ws) => {
    const seeds = [1, 2, 3];
    const res = await Promise.all(
      seeds.map((seed) =>
        inf('/generate', post({ text: 'Once upon a time', max_new_tokens: 200, sampling_temperature: 1, seed, json_schema: SCHEMA, constrained_decoding_backend: backend, ...(ws ? { json_whitespace: ws } : {}) })),
      ),
    );
    for (const r of res) {
      expect(r.status).toBe(200);
      const body = (await r.json()) as Gen;
      expect(body.finish_reason, body.text).toBe('stop');
      expectForm(body.text, ws ?? 'none');
    }
  }, 300_000);

  it('flexible:4 (native and outlines): outputs validate and no whitespace run exceeds the bound', async () => {
    let finished = 0;
    for (const backend of ['native', 'outlines']) {
      for (const seed of [1, 2]) {
        const r = await inf('/generate', post({ text: 'Once upon a time', max_new_tokens: 200, sampling_temperature: 1, seed, json_schema: SCHEMA, constrained_decoding_backend: backend, json_whitespace: 'flexible:4' }));
        expect(r.status).toBe(200);
        const body = (await r.json()) as Gen;
        // Two runs meet only inside an empty {} or []: at most 2 × 4 characters.
        expect(Math.max(0, ...whitespaceRuns(body.text)), body.text).toBeLessThanOrEqual(8);
        expect(body.text.startsWith('{'), body.text).toBe(true);
        if (body.finish_reason !== 'stop') continue;
        finished++;
        expect(validate(JSON.parse(body.text)), body.text).toBe(true);
      }
    }
    expect(finished).toBeGreaterThan(0);
  }, 300_000);

  it('keeps one cache entry per whitespace mode: the same schema and seed alternate between forms', async () => {
    const ask = async (ws: string): Promise<string> =>
      ((await (await inf('/generate', post({ text: 'The dog', max_new_tokens: 200, sampling_temperature: 1, seed: 9, json_schema: SCHEMA, json_whitespace: ws }))).json()) as Gen).text;
    const a = await ask('compact');
    const b = await ask('none');
    const c = await ask('compact');
    expectForm(a, 'compact');
    expectForm(b, 'none');
    expect(c).toBe(a); // same seed, same compiled entry: deterministic
    expect(b).not.toBe(a);
  }, 300_000);

  it('json_object via json_schema {} honours compact', async () => {
    const r = (await (await inf('/generate', post({ text: 'Tim', max_new_tokens: 60, sampling_temperature: 1, seed: 4, json_schema: {}, json_whitespace: 'compact' }))).json()) as Gen;
    // A free-form object may be cut by the token limit; the form holds for the prefix either way.
    expect(r.text.startsWith('{')).toBe(true);
    if (r.finish_reason === 'stop') expect(JSON.parse(r.text)).toBeTypeOf('object');
    const redone = reformatJson(r.text, 'compact');
    expect(redone === r.text || (r.finish_reason === 'length' && redone === `${r.text} `), r.text).toBe(true); // a cut may fall between ',' and its space
  }, 120_000);
});

describe('json_whitespace on the other shapes', () => {
  it('/generate_stream: the streamed text is in compact form', async () => {
    const res = await inf('/generate_stream', post({ text: 'Once upon a time', max_new_tokens: 200, sampling_temperature: 1, seed: 5, json_schema: SCHEMA, json_whitespace: 'compact' }));
    expect(res.status).toBe(200);
    const events = parseSse(await res.text());
    const text = events
      .filter((e) => e.event === 'message')
      .map((e) => (JSON.parse(e.data) as { text?: string }).text ?? '')
      .join('');
    expect(JSON.parse(events.at(-1)!.data)).toMatchObject({ finish_reason: 'stop' });
    expectForm(text, 'compact');
  }, 120_000);

  it('Vertex predict (parameters) and SageMaker invocations carry it', async () => {
    const v = await t.apps.vertex.request('/predict', post({ instances: [{ text: 'Once', seed: 6 }], parameters: { max_new_tokens: 200, sampling_temperature: 1, json_schema: SCHEMA, json_whitespace: 'compact' } }));
    expect(v.status).toBe(200);
    expectForm(((await v.json()) as { predictions: Gen[] }).predictions[0]!.text, 'compact');
    const s = await t.apps.sagemaker.request('/invocations', post({ text: 'Once', seed: 7, max_new_tokens: 200, sampling_temperature: 1, json_schema: SCHEMA, json_whitespace: 'compact' }));
    expect(s.status).toBe(200);
    expectForm(((await s.json()) as Gen).text, 'compact');
  }, 120_000);

  it('OpenAI chat and completions: json_whitespace extension with response_format', async () => {
    type Chat = { choices: { message: { content: string }; finish_reason: string }[] };
    type Cmpl = { choices: { text: string; finish_reason: string }[] };
    const rf = { type: 'json_schema', json_schema: { name: 'call', schema: SCHEMA } };
    const chat = await t.apps.openai.request('/v1/chat/completions', post({ messages: [{ role: 'user', content: 'Call' }], max_tokens: 200, seed: 8, response_format: rf, json_whitespace: 'compact' }));
    expect(chat.status).toBe(200);
    const cc = ((await chat.json()) as Chat).choices[0]!;
    expect(cc.finish_reason).toBe('stop');
    expectForm(cc.message.content, 'compact');
    const cmpl = await t.apps.openai.request('/v1/completions', post({ prompt: 'Once', max_tokens: 200, seed: 8, response_format: rf, json_whitespace: 'none' }));
    expect(cmpl.status).toBe(200);
    expectForm(((await cmpl.json()) as Cmpl).choices[0]!.text, 'none');
  }, 120_000);
});

describe('json_whitespace errors', () => {
  it.each([
    ['/generate', { text: 'a', json_schema: SCHEMA, json_whitespace: 'pretty' }, 'invalid_json_whitespace'],
    ['/generate', { text: 'a', json_whitespace: 'tabs' }, 'invalid_json_whitespace'],
    ['/generate_stream', { text: 'a', json_schema: SCHEMA, json_whitespace: 'COMPACT' }, 'invalid_json_whitespace'],
    ['/generate', { text: 'a', json_schema: SCHEMA, json_whitespace: 2 }, 'invalid_request'],
    ['/generate', { text: 'a', regex_string: '[ab]{3}', json_whitespace: 'compact' }, 'conflicting_constraints'],
  ])('%s %j → 400 %s', async (path, body, code) => {
    const res = await inf(path, post(body));
    expect(res.status).toBe(400);
    const e = (await res.json()) as Err;
    expect(e.error.code).toBe(code);
    expect(e.error.details).toMatchObject({ field: 'json_whitespace' });
  });

  it('Vertex and OpenAI refuse a bad value with the same code (OpenAI: param json_whitespace)', async () => {
    const v = await t.apps.vertex.request('/predict', post({ instances: ['a'], parameters: { json_schema: SCHEMA, json_whitespace: 'pretty' } }));
    expect(v.status).toBe(400);
    expect(((await v.json()) as Err).error.code).toBe('invalid_json_whitespace');
    const o = await t.apps.openai.request('/v1/chat/completions', post({ messages: [{ role: 'user', content: 'a' }], response_format: { type: 'json_object' }, json_whitespace: 'pretty' }));
    expect(o.status).toBe(400);
    expect(((await o.json()) as { error: { code: string; param: string } }).error).toMatchObject({ code: 'invalid_json_whitespace', param: 'json_whitespace' });
  });

  it("'none' with a regex is accepted (nothing to change); a mode without a constraint is validated and has no effect", async () => {
    const re = await inf('/generate', post({ text: 'Call', max_new_tokens: 12, regex_string: '[ab]{3}', json_whitespace: 'none', sampling_temperature: 1, seed: 1 }));
    expect(re.status).toBe(200);
    expect(((await re.json()) as Gen).text).toMatch(/^[ab]{3}$/);
    const free = await inf('/generate', post({ text: 'Once upon a time', max_new_tokens: 8, json_whitespace: 'compact' }));
    expect(free.status).toBe(200);
    const plain = await inf('/generate', post({ text: 'Once upon a time', max_new_tokens: 8 }));
    expect(((await free.json()) as Gen).text).toBe(((await plain.json()) as Gen).text);
  });
});
