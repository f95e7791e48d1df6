/**
 * Contract tests of the inference and management apps through
 * `app.request()`, with the bundled model in a real worker-thread reader.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFERENCE_IDS } from '../models/stories260k.fixture.ts';
import { parseSse, post, startTestService, type TestService } from './helpers.ts';

let t: TestService;
beforeAll(async () => {
  t = await startTestService({ maxPromptStringBytes: 2000 });
});
afterAll(async () => {
  await t?.svc.close();
});

const inf = (path: string, init?: RequestInit): Promise<Response> => Promise.resolve(t.apps.inference.request(path, init));
const mgmt = (path: string, init?: RequestInit): Promise<Response> => Promise.resolve(t.apps.management.request(path, init));

describe('inference app', () => {
  it('generates greedily by default and reports usage and a request id', async () => {
    const res = await inf('/generate', post({ text: 'Once upon a time', max_new_tokens: 64 }));
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const body = (await res.json()) as { text: string; finish_reason: string; usage: { completion_tokens: number; prompt_tokens: number } };
    expect(body.finish_reason).toBe('length');
    expect(body.usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 64 });
    const tok = (await (await inf('/tokenize/primary-0', post({ text: body.text, add_special_tokens: false }))).json()) as { tokens: number[] };
    // Re-tokenizing the text need not give the same ids, but decoding the reference ids gives the text.
    const detok = (await (await inf('/detokenize/primary-0', post({ tokens: REFERENCE_IDS, skip_special_tokens: true }))).json()) as { text: string };
    expect(body.text).toBe(detok.text);
    expect(tok.tokens.length).toBeGreaterThan(30);
  });

  it('serves a list of prompts concurrently, in order', async () => {
    const res = await inf('/generate', post({ text: ['Once upon a time', 'The dog'], max_new_tokens: 8 }));
    const body = (await res.json()) as { text: string[]; finish_reason: string[] };
    expect(body.text).toHaveLength(2);
    const single = (await (await inf('/generate', post({ text: 'The dog', max_new_tokens: 8 }))).json()) as { text: string };
    expect(body.text[1]).toBe(single.text);
  });

  it('applies sampling parameters reproducibly by seed, and stop strings', async () => {
    const req = { text: 'Once upon a time', max_new_tokens: 30, sampling_temperature: 1, sampling_topk: 50, sampling_topp: 0.9, seed: 42 };
    const a = (await (await inf('/generate', post(req))).json()) as { text: string };
    const b = (await (await inf('/generate', post(req))).json()) as { text: string };
    const c = (await (await inf('/generate', post({ ...req, seed: 43 }))).json()) as { text: string };
    expect(a.text).toBe(b.text);
    expect(c.text).not.toBe(a.text);
    const stopped = (await (await inf('/generate', post({ text: 'Once upon a time', max_new_tokens: 64, stop: ['Lily'] }))).json()) as { text: string; finish_reason: string };
    expect(stopped.finish_reason).toBe('stop');
    expect(stopped.text).toBe(', there was a little girl named ');
  });

  it('streams tokens as SSE with a final done event', async () => {
    const res = await inf('/generate_stream', post({ text: 'Once upon a time', max_new_tokens: 6 }));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const events = parseSse(await res.text());
    const tokens = events.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as { text: string; token_id: number });
    expect(tokens.map((x) => x.token_id)).toEqual(REFERENCE_IDS.slice(0, 6));
    const done = events.at(-1)!;
    expect(done.event).toBe('done');
    expect(JSON.parse(done.data)).toMatchObject({ finish_reason: 'length', usage: { completion_tokens: 6 } });
  });

  it('constrains output to a JSON schema ({} = any object), a regex, and refuses bad schemas', async () => {
    const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer', minimum: 1, maximum: 99 } }, required: ['name', 'age'], additionalProperties: false };
    for (const backend of ['native', 'outlines']) {
      const r = (await (await inf('/generate', post({ text: 'Once upon a time', max_new_tokens: 60, sampling_temperature: 1, seed: 5, json_schema: schema, constrained_decoding_backend: backend }))).json()) as { text: string; finish_reason: string };
      const v = JSON.parse(r.text) as { name: string; age: number };
      expect(Object.keys(v)).toEqual(['name', 'age']);
      expect(Number.isInteger(v.age) && v.age >= 1 && v.age <= 99).toBe(true);
      expect(r.finish_reason).toBe('stop');
    }
    const any = (await (await inf('/generate', post({ text: 'Tim', max_new_tokens: 40, json_schema: {}, sampling_temperature: 1, seed: 2 }))).json()) as { text: string; finish_reason: string };
    if (any.finish_reason === 'stop') expect(typeof JSON.parse(any.text)).toBe('object');
    else expect(any.text.startsWith('{')).toBe(true);
    const re = (await (await inf('/generate', post({ text: 'Call', max_new_tokens: 30, regex_string: '\\d{3}-\\d{4}', sampling_temperature: 1, seed: 1 }))).json()) as { text: string };
    expect(re.text).toMatch(/^\d{3}-\d{4}$/);
    const bad = await inf('/generate', post({ text: 'a', json_schema: { type: 'object', properties: { x: { type: 'strnig' } } } }));
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string; details: { path: string } } }).error).toMatchObject({ code: 'invalid_schema', details: { path: '/properties/x/type' } });
    const badRe = await inf('/generate', post({ text: 'a', regex_string: '(ab' }));
    expect(((await badRe.json()) as { error: { code: string } }).error.code).toBe('invalid_regex');
  });

  it('truncates prompts to prompt_max_tokens, keeping BOS and the end', async () => {
    const long = (await (await inf('/generate', post({ text: 'The sun was up. Once upon a time', max_new_tokens: 5, prompt_max_tokens: 5 }))).json()) as { usage: { prompt_tokens: number }; text: string };
    expect(long.usage.prompt_tokens).toBe(5);
    const ref = (await (await inf('/generate', post({ text: 'Once upon a time', max_new_tokens: 5 }))).json()) as { text: string };
    expect(long.text).toBe(ref.text);
  });

  it('cancels a request by id', async () => {
    const pending = inf('/generate', post({ text: 'Once upon a time', max_new_tokens: 400, min_new_tokens: 400 }));
    // Cancel as soon as it is in flight: on a fast host 400 tokens take well under a second.
    let status = { requests_in_flight: 0 };
    for (let i = 0; i < 500 && status.requests_in_flight === 0; i++) {
      status = (await (await inf('/status')).json()) as { requests_in_flight: number };
      if (status.requests_in_flight === 0) await new Promise((r) => setTimeout(r, 5));
    }
    expect(status.requests_in_flight).toBe(1);
    // The id is only in the response header, so find it through the service registry.
    const ids = [...(t.svc as unknown as { inFlight: Map<string, unknown> }).inFlight.keys()];
    const c = (await (await inf(`/cancel/${ids[0]}`, { method: 'POST' })).json()) as { cancelled: boolean };
    expect(c.cancelled).toBe(true);
    const res = (await (await pending).json()) as { finish_reason: string; usage: { completion_tokens: number } };
    expect(res.finish_reason).toBe('cancelled');
    expect(res.usage.completion_tokens).toBeLessThan(400);
    expect((await (await inf('/cancel/nope', { method: 'POST' })).json()) as object).toEqual({ request_id: 'nope', cancelled: false });
  });

  it.each([
    ['malformed JSON', '/generate', '{"text": ', 400, 'invalid_json'],
    ['wrong type', '/generate', { text: 42 }, 400, 'invalid_request'],
    ['negative max_new_tokens', '/generate', { text: 'a', max_new_tokens: -1 }, 400, 'invalid_request'],
    ['huge max_new_tokens', '/generate', { text: 'a', max_new_tokens: 1e12 }, 400, 'invalid_request'],
    ['bad top-p', '/generate', { text: 'a', sampling_topp: 2 }, 400, 'invalid_request'],
    ['unknown group', '/generate', { text: 'a', consumer_group: 'nope' }, 404, 'consumer_group_not_found'],
    ['oversize prompt', '/generate', { text: 'x'.repeat(2001) }, 413, 'prompt_too_large'],
    ['both constraints', '/generate', { text: 'a', json_schema: {}, regex_string: 'a' }, 400, 'conflicting_constraints'],
    ['unknown backend', '/generate', { text: 'a', constrained_decoding_backend: 'magic' }, 400, 'invalid_constrained_decoding_backend'],
    ['stream of a list', '/generate_stream', { text: ['a', 'b'] }, 400, 'invalid_request'],
    ['an unknown field', '/generate', { text: 'a', regexp: '[0-9]+' }, 400, 'unknown_field'],
    ['an unknown stream field', '/generate_stream', { text: 'a', temprature: 0.5 }, 400, 'unknown_field'],
    ['an unknown tokenize field', '/tokenize/primary-0', { text: 'a', add_bos: true }, 400, 'unknown_field'],
    ['a field named like an Object member', '/generate', '{"text": "a", "constructor": 1, "__proto__": 2}', 400, 'unknown_field'],
    ['unknown reader', '/tokenize/nope', { text: 'a' }, 404, 'reader_not_found'],
    ['token outside vocab', '/detokenize/primary-0', { tokens: [1, 99999] }, 400, 'invalid_token'],
    ['no chat template', '/chat_template/primary-0', { messages: [{ role: 'user', content: 'hi' }] }, 400, 'chat_template_error'],
  ])('rejects %s with a JSON error', async (_name, path, body, status, code) => {
    const res = await inf(path as string, post(body));
    expect(res.status).toBe(status);
    const j = (await res.json()) as { error: { code: string; message: string } };
    expect(j.error.code).toBe(code);
    expect(j.error.message.length).toBeGreaterThan(5);
  });

  it('names unknown fields and what they probably meant, instead of dropping them', async () => {
    const err = async (path: string, body: unknown): Promise<{ status: number; error: { code: string; message: string; details: Record<string, unknown> } }> => {
      const res = await inf(path, post(body));
      return { status: res.status, ...((await res.json()) as { error: { code: string; message: string; details: Record<string, unknown> } }) };
    };
    // Another API's name for a constraint: before, the request ran unconstrained.
    const re = await err('/generate', { text: 'Phone:', max_new_tokens: 8, regex: '[0-9]{3}' });
    expect(re.status).toBe(400);
    expect(re.error).toEqual({
      code: 'unknown_field',
      message: 'unknown field "regex" (did you mean "regex_string"?)',
      details: { field: 'regex', fields: ['regex'], suggestions: { regex: 'regex_string' } },
    });
    // Several at once, a near miss and one with no suggestion; reported even with the prompt missing.
    const two = await err('/generate', { max_new_tokns: 4, colour: 'red' });
    expect(two.error.code).toBe('unknown_field');
    expect(two.error.details).toEqual({ field: 'max_new_tokns', fields: ['max_new_tokns', 'colour'], suggestions: { max_new_tokns: 'max_new_tokens' } });
    expect(two.error.message).toBe('unknown fields "max_new_tokns" (did you mean "max_new_tokens"?), "colour"');
    // The fix works as suggested: regex_string constrains the output.
    const ok = (await (await inf('/generate', post({ text: 'Phone:', max_new_tokens: 8, regex_string: '[0-9]{3}' }))).json()) as { text: string };
    expect(ok.text).toMatch(/^[0-9]{3}$/);
  });

  it('keeps serving after bad input, and 404s unknown routes as JSON', async () => {
    const res = await inf('/nope');
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('route_not_found');
    expect((await inf('/generate', post({ text: 'Tim', max_new_tokens: 2 }))).status).toBe(200);
  });

  it('reports health, status, metrics and API docs', async () => {
    const h = await inf('/healthz');
    expect(h.status).toBe(200);
    expect(await h.json()).toMatchObject({ status: 'ok', readers: [{ reader_id: 'primary-0', ready: true }] });
    let m = await (await inf('/metrics')).text();
    expect(m).toMatch(/weft_requests_total\{model="[^"]*",consumer_group="primary"\} \d+/);
    expect(m).toMatch(/weft_request_tokens_per_second_count\{model="[^"]*",consumer_group="primary"\} \d+/);
    expect(m).toContain('weft_kv_blocks_total{reader_id="primary-0",consumer_group="primary"}');
    // Step counters per decode path: on these software adapters stories260K decodes through
    // the megakernel, one dispatch per wave (a generation first, so the test stands alone).
    expect((await inf('/generate', post({ text: 'Tim', max_new_tokens: 3 }))).status).toBe(200);
    m = await (await inf('/metrics')).text();
    const num = (re: RegExp): number => Number(re.exec(m)?.[1] ?? NaN);
    const mk = num(/weft_engine_steps_total\{reader_id="primary-0",consumer_group="primary",path="megakernel"\} (\d+)/);
    const generic = num(/weft_engine_steps_total\{reader_id="primary-0",consumer_group="primary",path="generic"\} (\d+)/);
    const dispatches = num(/weft_megakernel_dispatches_total\{reader_id="primary-0",consumer_group="primary"\} (\d+)/);
    expect(mk).toBeGreaterThan(0);
    expect(generic).toBeGreaterThanOrEqual(0);
    expect(dispatches).toBeGreaterThanOrEqual(mk);
    const spec = (await (await inf('/openapi.json')).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(spec.paths)).toEqual(expect.arrayContaining(['/generate', '/generate_stream', '/tokenize/{reader_id}', '/cancel/{request_id}']));
    expect(await (await inf('/docs')).text()).toContain('swagger-ui-bundle.js');
    expect((await inf('/docs/swagger-ui-bundle.js')).status).toBe(200);
  });
});

describe('management app', () => {
  it('lists groups with ready flags and serves the model config', async () => {
    const groups = (await (await mgmt('/reader_groups')).json()) as Record<string, { reader_id: string; ready: boolean }[]>;
    expect(groups.primary).toEqual([expect.objectContaining({ reader_id: 'primary-0', ready: true, type: 'generate' })]);
    const cfg = (await (await mgmt('/config/primary-0')).json()) as { architectures: string[]; hidden_size: number };
    expect(cfg).toMatchObject({ architectures: ['LlamaForCausalLM'], hidden_size: 64 });
    expect((await mgmt('/config/nope')).status).toBe(404);
  });

  it('starts a reader with PUT /models (an f16 KV cache), serves it by group, and deletes it', async () => {
    const res = await mgmt('/models', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ consumer_group: 'second', reader_id: 'second-0', max_batch_size: 2, kv_cache_dtype: 'f16' }) });
    expect(res.status).toBe(201);
    expect(await res.json()).toMatchObject({ reader_id: 'second-0', consumer_group: 'second', ready: false });
    await t.svc.readers.get('second-0').waitSettled(60_000);
    expect(((await (await mgmt('/reader_groups')).json()) as Record<string, { ready: boolean }[]>).second![0]!.ready).toBe(true);
    const gen = (await (await inf('/generate', post({ text: 'Once upon a time', max_new_tokens: 3, consumer_group: 'second' }))).json()) as { text: string };
    expect(gen.text).toBe(', there was');
    expect((await mgmt('/reader/second-0', { method: 'DELETE' })).status).toBe(200);
    expect((await mgmt('/reader/second-0', { method: 'DELETE' })).status).toBe(404);
    expect((await inf('/generate', post({ text: 'a', consumer_group: 'second' }))).status).toBe(404);
  });

  it('refuses bad reader configurations', async () => {
    const bad = async (body: unknown): Promise<{ status: number; code: string }> => {
      const r = await mgmt('/models', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return { status: r.status, code: ((await r.json()) as { error: { code: string } }).error.code };
    };
    expect(await bad({ dtype: 'int3' })).toEqual({ status: 400, code: 'invalid_request' });
    expect(await bad({ kv_cache_dtype: 'f8' })).toEqual({ status: 400, code: 'invalid_request' });
    expect(await bad({ unknown_field: 1 })).toEqual({ status: 400, code: 'unknown_field' });
    expect(await bad({ reader_id: 'primary-0' })).toEqual({ status: 400, code: 'duplicate_reader_id' });
  });

  it('reports a reader whose model fails to load, without affecting the others', async () => {
    const res = await mgmt('/models', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: '/nonexistent/model', consumer_group: 'broken', reader_id: 'broken-0' }) });
    expect(res.status).toBe(201);
    await t.svc.readers.get('broken-0').waitSettled(60_000);
    const groups = (await (await mgmt('/reader_groups')).json()) as Record<string, { ready: boolean; state: string; error: { code: string } | null }[]>;
    expect(groups.broken![0]).toMatchObject({ ready: false, state: 'failed', error: { code: 'model_format' } });
    // A reader added at run time that failed is reported, but the serving server stays healthy.
    expect((await inf('/healthz')).status).toBe(200);
    const gen = await inf('/generate', post({ text: 'a', consumer_group: 'broken' }));
    expect(gen.status).toBe(503);
    expect(gen.headers.get('retry-after')).toBe('2');
    await mgmt('/reader/broken-0', { method: 'DELETE' });
    expect((await inf('/healthz')).status).toBe(200);
  });
});
