/**
 * The OpenAI-compatible /v1 layer with the bundled model in a real worker
 * reader: in-process through `app.request()` (shapes, SSE framing, the
 * ChatML fallback, error statuses), then over real loopback listeners started
 * by `start()` with the official `openai` client, on both the dedicated
 * OpenAI port and the inference port.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApps, type Apps } from '../../server/apps/index.ts';
import { loadConfig } from '../../server/config.ts';
import { start, type Running } from '../../server/main.ts';
import { parseSse, post } from './helpers.ts';

const KEY = 'test-key';
let run: Running;
let apps: Apps;
const portOf = (name: string): number => run.servers.find((s) => s.name === name)!.port;

beforeAll(async () => {
  const config = loadConfig({
    env: {},
    overrides: {
      embeddingModel: '',
      host: '127.0.0.1',
      port: 0,
      managementPort: 0,
      openaiPort: 0,
      sagemakerPort: 0,
      vertexPort: 0,
      apiKeys: [KEY],
      maxPromptStringBytes: 2000,
      backend: process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles',
      logDisableTimestamps: true,
    },
  });
  run = await start(config, { ephemeral: true });
  await run.service.readers.waitSettled(60_000);
  for (const r of run.service.readers.all()) if (!r.ready) throw new Error(`reader ${r.readerId} did not load: ${JSON.stringify(r.error)}`);
  apps = buildApps(run.service);
});
afterAll(async () => {
  await run?.close();
});

const auth = { authorization: `Bearer ${KEY}` };
const v1 = (path: string, body?: unknown): Promise<Response> =>
  Promise.resolve(apps.openai.request(`/v1${path}`, body === undefined ? { headers: auth } : post(body, auth)));
type OaiError = { error: { message: string; type: string; param: string | null; code: string | null } };
type Chat = { id: string; object: string; created: number; model: string; choices: { index: number; message: { role: string; content: string }; finish_reason: string }[]; usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } };
const user = (content: string): { role: string; content: string }[] => [{ role: 'user', content }];
const CHATML = (content: string): string => `<|im_start|>user\n${content}<|im_end|>\n<|im_start|>assistant\n`;

describe('OpenAI layer in-process', () => {
  it('lists consumer groups and reader ids as models, behind the API key', async () => {
    const list = (await (await v1('/models')).json()) as { object: string; data: { id: string; object: string; kind: string; ready: boolean }[] };
    expect(list.object).toBe('list');
    expect(list.data.map((m) => [m.id, m.kind, m.ready])).toEqual([['primary', 'consumer_group', true], ['primary-0', 'reader', true]]);
    expect((await (await v1('/models/primary-0')).json()) as object).toMatchObject({ id: 'primary-0', object: 'model', consumer_group: 'primary' });
    const unauth = await apps.openai.request('/v1/models');
    expect(unauth.status).toBe(401);
    expect(((await unauth.json()) as OaiError).error).toEqual({ message: 'missing or invalid API key', type: 'authentication_error', param: null, code: 'unauthorized' });
  });

  it('renders chat with the ChatML fallback for a template-less model, greedy at temperature 0', async () => {
    const res = await v1('/chat/completions', { model: 'primary', messages: user('Tell me a story'), max_tokens: 12, temperature: 0 });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const chat = (await res.json()) as Chat;
    expect(chat.id).toMatch(/^chatcmpl-[0-9a-f]{32}$/);
    expect(chat).toMatchObject({ object: 'chat.completion', model: 'primary', choices: [{ index: 0, message: { role: 'assistant' }, finish_reason: 'length' }] });
    expect(Math.abs(chat.created - Date.now() / 1000)).toBeLessThan(60);
    // Same prompt through the native API: the ChatML text, BOS added by the tokenizer.
    const ref = (await (await apps.inference.request('/generate', post({ text: CHATML('Tell me a story'), max_new_tokens: 12, stop: ['<|im_end|>'] }, auth))).json()) as { text: string; usage: { prompt_tokens: number } };
    expect(chat.choices[0]!.message.content).toBe(ref.text);
    expect(chat.usage).toEqual({ prompt_tokens: ref.usage.prompt_tokens, completion_tokens: 12, total_tokens: ref.usage.prompt_tokens + 12, prompt_tokens_details: { cached_tokens: expect.any(Number) }, tokens_per_second: expect.any(Number) });
    // A reader id selects its group; max_completion_tokens wins over max_tokens.
    const byReader = (await (await v1('/chat/completions', { model: 'primary-0', messages: user('Tell me a story'), max_tokens: 30, max_completion_tokens: 12, temperature: 0 })).json()) as Chat;
    expect(byReader.choices[0]!.message.content).toBe(ref.text);
    expect(byReader.model).toBe('primary-0');
  });

  it('completes text with stop strings (string or list), defaulting model to the primary group', async () => {
    const res = await v1('/completions', { prompt: 'Once upon a time', max_tokens: 40, temperature: 0, stop: 'Lily' });
    const c = (await res.json()) as { id: string; object: string; model: string; choices: { text: string; finish_reason: string }[] };
    expect(c).toMatchObject({ object: 'text_completion', model: 'primary', choices: [{ text: ', there was a little girl named ', finish_reason: 'stop' }] });
    expect(c.id).toMatch(/^cmpl-/);
    const many = (await (await v1('/completions', { prompt: ['Once upon a time', 'Once upon a time'], max_tokens: 40, temperature: 0, stop: ['girl', 'xyz'] })).json()) as typeof c & { usage: { completion_tokens: number } };
    expect(many.choices.map((x) => [x.text, x.finish_reason])).toEqual([[', there was a little ', 'stop'], [', there was a little ', 'stop']]);
  });

  it('samples at temperature 1 by default, reproducibly by seed', async () => {
    const req = { prompt: 'Once upon a time', max_tokens: 20, seed: 7 };
    const a = (await (await v1('/completions', req)).json()) as { choices: { text: string }[] };
    const b = (await (await v1('/completions', { ...req, top_p: 1, presence_penalty: 0 })).json()) as typeof a;
    const greedy = (await (await v1('/completions', { ...req, temperature: 0 })).json()) as typeof a;
    expect(a.choices[0]!.text).toBe(b.choices[0]!.text);
    expect(a.choices[0]!.text).not.toBe(greedy.choices[0]!.text);
  });

  it('streams chat as SSE data chunks ending in [DONE], with a usage chunk on request', async () => {
    const body = { messages: user('Hi'), max_tokens: 8, temperature: 0 };
    const res = await v1('/chat/completions', { ...body, stream: true, stream_options: { include_usage: true } });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const raw = await res.text();
    expect(raw.endsWith('data: [DONE]\n\n')).toBe(true);
    const events = parseSse(raw);
    expect(events.every((e) => e.event === 'message')).toBe(true);
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data) as { id: string; object: string; choices: { delta: { role?: string; content?: string }; finish_reason: string | null }[]; usage: unknown });
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk')).toBe(true);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    const usage = chunks.at(-1)!;
    expect(usage.choices).toEqual([]);
    expect(usage.usage).toMatchObject({ completion_tokens: 8 });
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe('length');
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    const text = chunks.flatMap((c) => c.choices.map((x) => x.delta.content ?? '')).join('');
    const full = (await (await v1('/chat/completions', body)).json()) as Chat;
    expect(text).toBe(full.choices[0]!.message.content);
    // Without include_usage there is no usage field and no usage chunk.
    const plain = parseSse(await (await v1('/completions', { prompt: 'Once', max_tokens: 3, stream: true })).text());
    expect(plain.at(-1)!.data).toBe('[DONE]');
    expect(plain.slice(0, -1).map((e) => JSON.parse(e.data) as object).every((c) => !('usage' in c))).toBe(true);
  });

  it('applies response_format json_object / json_schema as constraints (or refuses them with a clear 400)', async () => {
    const ask = (response_format: unknown, max_tokens: number): Promise<Response> => v1('/chat/completions', { messages: user('Give me JSON'), max_tokens, temperature: 0, response_format });
    const res = await ask({ type: 'json_object' }, 32);
    if (res.status === 400) {
      // Readers without a constraint compiler refuse constraints rather than ignore them.
      expect(((await res.json()) as OaiError).error).toMatchObject({ type: 'invalid_request_error', code: 'constraints_unsupported' });
      return;
    }
    expect(res.status).toBe(200);
    const obj = ((await res.json()) as Chat).choices[0]!;
    // A 260K-parameter model rarely closes a free-form object within budget: complete -> parse, else a valid start.
    if (obj.finish_reason === 'stop') expect(JSON.parse(obj.message.content)).toBeTypeOf('object');
    else expect(obj.message.content.startsWith('{"')).toBe(true);
    const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false };
    const s = ((await (await ask({ type: 'json_schema', json_schema: { name: 'flag', schema } }, 32)).json()) as Chat).choices[0]!;
    expect(s.finish_reason).toBe('stop');
    const parsed = JSON.parse(s.message.content) as Record<string, unknown>;
    expect(Object.keys(parsed)).toEqual(['ok']);
    expect(parsed.ok).toBeTypeOf('boolean');
    // strict: true (OpenAI semantics) closes the object and requires its property: nothing else can be generated.
    const open = { type: 'object', properties: { ok: { type: 'boolean' } } };
    const st = ((await (await ask({ type: 'json_schema', json_schema: { name: 'flag', schema: open, strict: true } }, 32)).json()) as Chat).choices[0]!;
    expect(st.finish_reason).toBe('stop');
    expect(st.message.content).toMatch(/^\{"ok":(true|false)\}$/);
  });

  it.each([
    ['n over the maximum', '/chat/completions', { messages: user('a'), n: 17 }, 400, 'invalid_n', 'n'],
    ['best_of below n', '/completions', { prompt: 'a', n: 3, best_of: 2 }, 400, 'invalid_best_of', 'best_of'],
    ['best_of over the maximum', '/completions', { prompt: 'a', best_of: 17 }, 400, 'invalid_best_of', 'best_of'],
    ['best_of streamed', '/completions', { prompt: 'a', best_of: 2, stream: true }, 400, 'unsupported_parameter', 'best_of'],
    ['best_of over several prompts', '/completions', { prompt: ['a', 'b'], best_of: 2 }, 400, 'unsupported_parameter', 'best_of'],
    ['top_logprobs > 20', '/chat/completions', { messages: user('a'), logprobs: true, top_logprobs: 21 }, 400, 'invalid_request', 'top_logprobs'],
    ['a malformed tool', '/chat/completions', { messages: user('a'), tools: [{ type: 'function' }] }, 400, 'invalid_tool', 'tools.0'],
    ['tools for a template without tool support', '/chat/completions', { messages: user('a'), tools: [{ type: 'function', function: { name: 'f' } }] }, 400, 'tools_not_supported', 'tools'],
    ['audio content', '/chat/completions', { messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'x' } }] }] }, 400, 'unsupported_content', 'messages.0.content.0'],
    ['bad image URL', '/chat/completions', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }, 400, 'invalid_image_url', 'messages.0.content'],
    ['image for a text model', '/chat/completions', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }] }] }, 400, 'images_not_supported', null],
    ['temperature > 2', '/chat/completions', { messages: user('a'), temperature: 3 }, 400, 'invalid_request', 'temperature'],
    ['empty messages', '/chat/completions', { messages: [] }, 400, 'invalid_request', 'messages'],
    ['bad role', '/chat/completions', { messages: [{ role: 'robot', content: 'a' }] }, 400, 'invalid_request', 'messages.0.role'],
    ['empty stop', '/completions', { prompt: 'a', stop: '' }, 400, 'invalid_request', 'stop'],
    ['unknown model', '/chat/completions', { model: 'gpt-4o', messages: user('a') }, 404, 'model_not_found', 'model'],
    ['stream of a list', '/completions', { prompt: ['a', 'b'], stream: true }, 400, 'unsupported_parameter', 'prompt'],
    ['oversize prompt', '/completions', { prompt: 'x'.repeat(2001) }, 413, 'prompt_too_large', 'prompt'],
    ['embeddings from a generative group', '/embeddings', { model: 'primary', input: 'hello' }, 400, 'wrong_reader_type', 'model'],
    ['embeddings from an unknown model', '/embeddings', { model: 'nope', input: 'hello' }, 404, 'model_not_found', 'model'],
  ])('rejects %s in OpenAI error shape', async (_name, path, body, status, code, param) => {
    const res = await v1(path as string, body);
    expect(res.status).toBe(status);
    const e = ((await res.json()) as OaiError).error;
    expect(e).toMatchObject({ type: 'invalid_request_error', code, param });
    expect(e.message.length).toBeGreaterThan(10);
  });

  it('answers malformed JSON, unknown /v1 routes and missing models in OpenAI shape; docs are open', async () => {
    const bad = await apps.openai.request('/v1/chat/completions', post('{"messages": ', auth));
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as OaiError).error.code).toBe('invalid_json');
    const nf = await v1('/nope');
    expect(nf.status).toBe(404);
    expect(((await nf.json()) as OaiError).error).toMatchObject({ code: 'route_not_found', type: 'invalid_request_error' });
    expect((await v1('/models/nope')).status).toBe(404);
    const emb = ((await (await v1('/embeddings', { model: 'primary', input: 'x' })).json()) as OaiError).error;
    expect(emb.message).toContain('serves generate readers'); // embedding readers: test/server/encoders.test.ts
    for (const path of ['/openapi.json', '/v1/openapi.json']) {
      const spec = (await (await apps.openai.request(path)).json()) as { paths: Record<string, unknown> };
      expect(Object.keys(spec.paths)).toEqual(expect.arrayContaining(['/v1/chat/completions', '/v1/completions', '/v1/models', '/v1/embeddings']));
    }
    expect(await (await apps.inference.request('/v1/docs')).text()).toContain('swagger-ui-bundle.js');
    expect((await apps.openai.request('/healthz')).status).toBe(200);
  });
});

describe('OpenAI layer over HTTP with the official client', () => {
  const client = (port: number): OpenAI => new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: KEY, maxRetries: 0 });

  it('binds every app on an ephemeral port', () => {
    expect(run.servers.map((s) => s.name).sort()).toEqual(['inference', 'management', 'openai', 'sagemaker', 'vertex']);
    for (const s of run.servers) expect(s.port).toBeGreaterThan(0);
  });

  it('completes, streams and lists models on the OpenAI port', async () => {
    const oai = client(portOf('openai'));
    const models = await oai.models.list();
    expect(models.data.map((m) => m.id)).toContain('primary');
    const chat = await oai.chat.completions.create({ model: 'primary', messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 10, temperature: 0 });
    expect(chat.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(chat.usage!.completion_tokens).toBe(10);
    const stream = await oai.chat.completions.create({ model: 'primary', messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 10, temperature: 0, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe(chat.choices[0]!.message.content);
    expect(finish).toBe('length');
    expect(usage).toMatchObject({ completion_tokens: 10, total_tokens: chat.usage!.total_tokens });
    const done = await oai.completions.create({ model: 'primary', prompt: 'Once upon a time', max_tokens: 40, temperature: 0, stop: ['Lily'] });
    expect(done.choices[0]).toMatchObject({ text: ', there was a little girl named ', finish_reason: 'stop' });
  });

  it('serves /v1 on the inference port too, and surfaces errors as typed client errors', async () => {
    const oai = client(portOf('inference'));
    const done = await oai.completions.create({ model: 'primary-0', prompt: 'Once upon a time', max_tokens: 5, temperature: 0 });
    expect(done.choices[0]!.finish_reason).toBe('length');
    const emb = await oai.embeddings.create({ model: 'primary', input: 'hello' }).catch((e: unknown) => e);
    expect(emb).toBeInstanceOf(OpenAI.BadRequestError);
    expect((emb as InstanceType<typeof OpenAI.BadRequestError>).code).toBe('wrong_reader_type');
    const bad = await oai.chat.completions.create({ model: 'primary', messages: [{ role: 'user', content: 'a' }], n: 99 }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect((bad as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('n');
    const wrongKey = new OpenAI({ baseURL: `http://127.0.0.1:${portOf('openai')}/v1`, apiKey: 'wrong', maxRetries: 0 });
    expect(await wrongKey.models.list().catch((e: unknown) => e)).toBeInstanceOf(OpenAI.AuthenticationError);
  });
});
