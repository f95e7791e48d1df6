/**
 * The OpenAI-compatible layer: POST /v1/chat/completions (tools:
 * openai_tools.ts; logprobs: openai_logprobs.ts; n choices, whole or
 * streamed: openai_choices.ts), POST /v1/completions (also best_of and echo),
 * POST /v1/responses (openai_responses.ts), GET /v1/models(/{id}) and POST /v1/embeddings (served by embedding readers;
 * a generative group is 400 wrong_reader_type, as chat on an embedding group
 * is). Mounted on the inference app and served alone on `openai_port` (3003),
 * so OpenAI clients work with baseURL `.../v1`.
 *
 * `model` names a consumer group or a reader id (which selects that reader's
 * group). Chat messages are rendered by the reader with the model's own chat
 * template; models without one fall back to DEFAULT_CHATML_TEMPLATE (with
 * `<|im_end|>` as an extra stop string), chosen here and passed explicitly
 * via GenerateRequest.chatTemplateFallback. Every /v1 error, 401 included, is
 * in OpenAI's shape `{error: {message, type, param, code}}`, which is why this
 * app carries its own auth and error handler and is mounted before the
 * service-wide ones.
 */
import { Hono, type Context } from 'hono';
import type { SSEStreamingApi } from 'hono/streaming';
import { InvalidRequestError, NotFoundError, PayloadTooLargeError, UnavailableError } from '../../core/errors.ts';
import type { GenerationEvent, TokenLogprobs } from '../../core/engine/engine.ts';
import { chatLogprobs, completionLogprobs } from './openai_logprobs.ts';
import { responsesRoutes } from './openai_responses.ts';
import type { ConstraintRequest, GenerateRequest } from '../../core/engine/reader_api.ts';
import type { ChatMessage } from '../../core/tokenizer/chat_template.ts';
import { ApiSpec, parseBody } from '../http/api_spec.ts';
import { bearerAuth } from '../http/auth.ts';
import { statusOf } from '../http/errors.ts';
import { checkTextBytes } from './encoders.ts';
import { tokensPerSecondHeader } from '../http/sse.ts';
import { runChoices, streamChoices } from './openai_choices.ts';
import * as O from '../http/openai_schemas.ts';
import type { Service } from '../service.ts';
import { budgetMode, jsonWhitespace } from './generation.ts';
import { healthz } from './health.ts';
import { imageBodyLimit, imageFetchConfig } from './images.ts';
import { resolvePromptImages } from '../http/image_urls.ts';
import { mapImageTags } from '../../core/images/prompt.ts';
import { ToolStreamSplitter } from '../../core/tools/index.ts';
import { newCallId, planTools, readCalls, templateToolHistory, type ToolPlan, wireCalls } from './openai_tools.ts';
import { CHAT_FALLBACK, modelNotFound, openaiError, resolveModel } from './openai_common.ts';

export { CHAT_FALLBACK, openaiError, resolveModel };

type Done = Extract<GenerationEvent, { type: 'done' }>;

const unsupported = (param: string, message: string): InvalidRequestError => new InvalidRequestError('unsupported_parameter', message, { field: param });

const finishReason = (r: Done['finishReason']): string => (r === 'eos' || r === 'stop' || r === 'constraint' ? 'stop' : r);

const usageOf = (ds: Done[]): O.UsageT => {
  const p = ds.reduce((a, d) => a + d.usage.promptTokens, 0);
  const g = ds.reduce((a, d) => a + d.usage.completionTokens, 0);
  const tps = Math.round((ds.reduce((a, d) => a + (d.usage.tokensPerSecond ?? 0), 0) / Math.max(1, ds.length)) * 100) / 100;
  return { prompt_tokens: p, completion_tokens: g, total_tokens: p + g, prompt_tokens_details: { cached_tokens: ds.reduce((a, d) => a + d.usage.cachedTokens, 0) }, tokens_per_second: tps };
};

function constraintOf(rf: O.ResponseFormatT | null | undefined, whitespace: string | undefined, budget: string | undefined): ConstraintRequest | undefined {
  if (!rf || rf.type === 'text') return undefined;
  const ws = { ...(whitespace ? { whitespace } : {}), ...(budget ? { budget } : {}) };
  if (rf.type === 'json_object') return { kind: 'json_object', ...ws };
  return { kind: 'json_schema', schema: rf.json_schema.schema ?? {}, ...(rf.json_schema.strict === true ? { strict: true } : {}), ...ws };
}

function checkBytes(svc: Service, texts: string[]): void {
  const limit = svc.config.maxPromptStringBytes;
  const bytes = texts.reduce((a, t) => a + Buffer.byteLength(t), 0);
  if (bytes > limit) throw new PayloadTooLargeError('prompt_too_large', `the prompt is ${bytes} bytes; the limit is ${limit} (WEFT_MAX_PROMPT_STRING_BYTES)`, { limit, bytes, field: 'prompt' });
}

/** The most choices one request may ask for (`n`, `best_of`). */
export const MAX_N = 16;

/** A candidate's mean token log-probability; one without tokens ranks last. */
function meanLogprob(d: Done): number {
  const lps = d.logprobs ?? [];
  return lps.length ? lps.reduce((a, t) => a + t.logprob, 0) / lps.length : -Infinity;
}

/** best_of: the `n` candidates with the highest mean token log-probability, best first (ties: lower candidate first). */
function bestCandidates(ds: Done[], n: number): Done[] {
  return ds
    .map((d, i) => ({ d, i, score: meanLogprob(d) }))
    .sort((a, b) => b.score - a.score || a.i - b.i)
    .slice(0, n)
    .map((x) => x.d);
}

/** Everything but the prompt, from the fields chat and completions share. */
function baseRequest(svc: Service, b: O.CommonT, group: string, maxTokens: number | null | undefined, rf: O.ResponseFormatT | null | undefined): Omit<GenerateRequest, 'prompt'> {
  if (b.n != null && (b.n < 1 || b.n > MAX_N)) throw new InvalidRequestError('invalid_n', `n must be an integer in [1, ${MAX_N}]`, { field: 'n' });
  const bias = b.logit_bias && Object.keys(b.logit_bias).length ? checkLogitBias(svc, group, b.logit_bias) : undefined;
  const seed = b.seed ?? undefined;
  const sampling = {
    temperature: b.top_p === 0 ? 0 : (b.temperature ?? 1),
    ...(b.top_p ? { topP: b.top_p } : {}),
    ...(b.top_k != null ? { topK: b.top_k } : {}),
    ...(b.min_p != null ? { minP: b.min_p } : {}),
    ...(b.repetition_penalty != null ? { repetitionPenalty: b.repetition_penalty } : {}),
    ...(b.presence_penalty != null ? { presencePenalty: b.presence_penalty } : {}),
    ...(b.frequency_penalty != null ? { frequencyPenalty: b.frequency_penalty } : {}),
    ...(seed !== undefined ? { seed: ((seed % 2 ** 32) + 2 ** 32) % 2 ** 32 } : {}),
  };
  const stop = typeof b.stop === 'string' ? [b.stop] : (b.stop ?? undefined);
  const constraint = constraintOf(rf, jsonWhitespace(b.json_whitespace, false), budgetMode(b.constrained_decoding_budget));
  return {
    ...(maxTokens != null ? { maxNewTokens: maxTokens } : {}),
    sampling,
    ...(stop?.length ? { stop } : {}),
    ...(constraint ? { constraint } : {}),
    ...(bias ? { logitBias: bias } : {}),
  };
}

/** logit_bias keys must be token ids of the group's vocabulary, values in [-100, 100] (the reader checks again). */
function checkLogitBias(svc: Service, group: string, bias: Record<string, number>): Record<string, number> {
  const V = Math.min(...svc.readers.all().flatMap((r) => (r.spec.consumerGroup === group && r.info ? [r.info.vocabSize] : [])));
  for (const [k, v] of Object.entries(bias)) {
    if (!/^\d+$/.test(k) || (Number.isFinite(V) && Number(k) >= V)) {
      throw new InvalidRequestError('invalid_logit_bias', `logit_bias key "${k}" is not a token id of model '${group}' (0..${V - 1})`, { field: 'logit_bias' });
    }
    if (v < -100 || v > 100) throw new InvalidRequestError('invalid_logit_bias', `logit_bias values must be in [-100, 100] (token ${k})`, { field: 'logit_bias' });
  }
  return bias;
}

/** The URL of an `image_url` content part ({url} or, leniently, a bare string); null when malformed. */
function imagePartUrl(p: { image_url?: unknown }): string | null {
  const v = p.image_url;
  const url = typeof v === 'string' ? v : v && typeof v === 'object' ? (v as { url?: unknown }).url : undefined;
  return typeof url === 'string' && url.length > 0 && !/[\s<>]/.test(url) ? url : null;
}

/**
 * Chat messages as the template expects them: text content, `developer` as
 * `system`; `image_url` parts become inline `<image:URL>` tags (the image-to-text
 * path), and `images` says whether there were any.
 */
function chatMessages(ms: O.ChatCompletionBodyT['messages']): { messages: ChatMessage[]; images: boolean } {
  let images = false;
  const messages = ms.map((m, i) => {
    let content = m.content ?? '';
    if (Array.isArray(content)) {
      const parts = content;
      content = parts
        .map((p, k) => {
          if (p.type === 'text' && typeof p.text === 'string') return p.text;
          if (p.type === 'image_url') {
            const url = imagePartUrl(p as { image_url?: unknown });
            if (!url) throw new InvalidRequestError('invalid_image_url', 'an image_url part needs image_url.url (a data: or http(s) URL)', { field: `messages.${i}.content.${k}` });
            images = true;
            return `<image:${url}>`;
          }
          throw new InvalidRequestError('unsupported_content', `only text and image_url content parts are supported (got "${p.type}")`, { field: `messages.${i}.content.${k}` });
        })
        .join('');
    }
    return { ...m, role: m.role === 'developer' ? 'system' : m.role, content };
  });
  return { messages, images };
}

/** Resolves the `<image:URL>` tags of all messages, numbered across messages in order. */
async function resolveChatImages(svc: Service, messages: ChatMessage[]): Promise<Uint8Array[]> {
  const all: Uint8Array[] = [];
  for (const [i, m] of messages.entries()) {
    if (typeof m.content !== 'string') continue;
    const r = await resolvePromptImages(m.content, imageFetchConfig(svc)).catch((e: unknown) => {
      throw e instanceof InvalidRequestError ? new InvalidRequestError(e.code, e.message, { ...e.details, field: `messages.${i}.content` }) : e;
    });
    const offset = all.length;
    m.content = mapImageTags(r.prompt, (u) => `<image:#${offset + Number(u.slice(1))}>`);
    all.push(...r.images);
  }
  return all;
}

/** A vector as OpenAI's base64 encoding: little-endian float32 bytes. */
function float32Base64(v: readonly number[]): string {
  const dv = new DataView(new ArrayBuffer(v.length * 4));
  v.forEach((x, i) => dv.setFloat32(i * 4, x, true));
  return Buffer.from(dv.buffer).toString('base64');
}

const utf8 = new TextDecoder('utf-8', { fatal: false });
const newId = (prefix: string, requestId: string): string => `${prefix}-${requestId.replace(/-/g, '')}`;
const now = (): number => Math.floor(Date.now() / 1000);

interface Framing {
  /** Chunks sent once the request is accepted (the chat role chunk). */
  opening(): object[];
  /** Chunks for one token's text (none while text is held back, e.g. a possible tool call). */
  token(text: string, lp?: TokenLogprobs): object[];
  /** The last chunks (held-back content, tool calls, finish_reason). */
  finish(d: Done): object[];
}

/**
 * Streams the request's `n` choices as OpenAI SSE: `data: {chunk}` ... `data: [DONE]`,
 * chunks of different choices interleaved as they come (each names its `index`), each
 * choice's last chunk carrying its finish_reason, then one usage chunk for all when asked;
 * errors after the start as `data: {error}`.
 */
async function sse(c: Context, svc: Service, group: string, req: GenerateRequest, n: number, id: string, includeUsage: boolean, fs: Framing[], usage: (ds: Done[]) => object): Promise<Response> {
  const withUsage = (o: object): object => (includeUsage ? { ...o, usage: null } : o);
  const send = (stream: SSEStreamingApi, o: object): Promise<void> => stream.writeSSE({ data: JSON.stringify(o) });
  return streamChoices(c, svc, group, req, n, id, {
    async open(stream) {
      for (const f of fs) for (const o of f.opening()) await send(stream, withUsage(o));
    },
    async event(stream, i, ev) {
      const f = fs[i]!;
      if (ev.type === 'token') {
        if (ev.text || ev.logprobs) for (const o of f.token(ev.text, ev.logprobs)) await send(stream, withUsage(o));
      } else {
        for (const o of f.finish(ev)) await send(stream, withUsage(o));
      }
    },
    async close(stream, ds) {
      if (includeUsage) await send(stream, usage(ds));
      await stream.writeSSE({ data: '[DONE]' });
    },
    async error(stream, e) {
      await send(stream, openaiError(e));
    },
  });
}

/**
 * Chat chunk framing, tools included: a named forced call streams its
 * arguments as they are generated; a `required` call is sent whole at the end
 * (its function is known only then); `auto` streams content and holds back
 * text from the first sign of a call, sending parsed calls at the end.
 */
function chatStream(plan: ToolPlan | null, choice: (delta: object, finish: string | null, lp?: TokenLogprobs) => object): Framing {
  const opening = (): object[] => [choice({ role: 'assistant', content: '' }, null)];
  const end = (d: Done, calls: { name: string; arguments: string }[], rest: string): object[] => {
    const out: object[] = rest ? [choice({ content: rest }, null)] : [];
    if (calls.length) {
      const wire = calls.map((x, index) => ({ index, id: newCallId(plan!.format), type: 'function', function: x }));
      out.push(choice({ tool_calls: wire }, null));
    }
    out.push(choice({}, calls.length ? 'tool_calls' : finishReason(d.finishReason)));
    return out;
  };
  if (!plan || plan.mode === 'none') {
    return { opening, token: (text, lp) => [choice({ content: text }, null, lp)], finish: (d) => end(d, [], '') };
  }
  if (plan.named) {
    const name = plan.named;
    return {
      opening: () => [choice({ role: 'assistant', content: null, tool_calls: [{ index: 0, id: newCallId(plan.format), type: 'function', function: { name, arguments: '' } }] }, null)],
      token: (text) => [choice({ tool_calls: [{ index: 0, function: { arguments: text } }] }, null)],
      finish: (d) => [choice({}, d.finishReason === 'length' || d.finishReason === 'cancelled' ? d.finishReason : 'tool_calls')],
    };
  }
  if (plan.mode === 'forced') {
    return { opening, token: () => [], finish: (d) => { const r = readCalls(plan, d.text, d.finishReason); return end(d, r.calls, r.content ?? ''); } };
  }
  const split = new ToolStreamSplitter(plan.parser);
  return {
    opening,
    token: (text) => {
      const t = split.push(text);
      return t ? [choice({ content: t }, null)] : [];
    },
    finish: (d) => {
      const r = split.end();
      return end(d, r.calls, r.rest);
    },
  };
}

export interface OpenAIApps {
  /** The /v1 routes with their own auth and error shape; mount before the service-wide auth. */
  v1: Hono;
  /** What port 3003 serves besides /v1: /docs, /openapi.json, /healthz. */
  extras: Hono;
  spec: ApiSpec;
}

export function openaiApp(svc: Service): OpenAIApps {
  const app = new Hono();
  const spec = new ApiSpec('Weft OpenAI-compatible API', 'OpenAI-style /v1 routes. Errors: {"error": {"message", "type", "param", "code"}}.', svc.version);
  const maxBody = Math.max(svc.config.maxPromptStringBytes * 64 + 65536, 1 << 20);
  app.onError((err, c) => {
    const status = statusOf(err);
    if (status >= 500) svc.log('request failed', { path: c.req.path, error: err.message, stack: err.stack });
    const res = c.json(openaiError(err), status);
    if (err instanceof UnavailableError) res.headers.set('Retry-After', String(err.retryAfter));
    return res;
  });
  const auth = bearerAuth(svc.config.apiKeys, svc.config.apiKeyOwners);
  app.use('/v1/*', (c, next) => (/^\/v1\/(docs|openapi\.json)(\/|$)/.test(c.req.path) ? next() : auth(c, next)));

  spec.add({ method: 'post', path: '/v1/chat/completions', summary: 'Chat completion (stream: true for SSE chunks ending in data: [DONE])', body: O.ChatCompletionBody, response: O.ChatCompletion });
  app.post('/v1/chat/completions', async (c) => {
    const b = await parseBody(c, O.ChatCompletionBody, Math.max(maxBody, imageBodyLimit(svc, 1)));
    if (b.top_logprobs != null && !b.logprobs) throw new InvalidRequestError('invalid_request', 'top_logprobs needs logprobs: true', { field: 'top_logprobs' });
    const logprobs = b.logprobs ? (b.top_logprobs ?? 0) : undefined;
    const group = resolveModel(svc, b.model);
    const plan = planTools(svc, group, b.tools, b.tool_choice, b.parallel_tool_calls);
    if (plan?.mode === 'forced' && b.response_format && b.response_format.type !== 'text') {
      throw new InvalidRequestError('conflicting_constraints', 'response_format cannot be combined with a required or named tool_choice (the call is the output)', { field: 'response_format' });
    }
    const converted = chatMessages(b.messages);
    const images = converted.images;
    const messages = templateToolHistory(converted.messages, plan?.format) as ChatMessage[];
    const imageBytes = images ? await resolveChatImages(svc, messages) : null;
    checkBytes(svc, messages.map((m) => String(m.content)));
    const base = baseRequest(svc, b, group, b.max_completion_tokens ?? b.max_tokens, b.response_format);
    const req: GenerateRequest = {
      prompt: { messages, ...(plan?.tools.length ? { tools: plan.tools } : {}) },
      chatTemplateFallback: CHAT_FALLBACK,
      ...base,
      ...(plan?.forced ? { constraint: { kind: 'json_schema' as const, schema: plan.forced.schema, ...(plan.strict ? { strict: true } : {}) } } : {}),
      ...(imageBytes ? { images: imageBytes } : {}),
      ...(logprobs !== undefined ? { logprobs } : {}),
    };
    const rid = svc.newRequestId();
    const head = { id: newId('chatcmpl', rid), object: 'chat.completion.chunk', created: now(), model: b.model ?? group };
    if (b.stream) {
      const n = b.n ?? 1;
      const framings = Array.from({ length: n }, (_, index) =>
        chatStream(plan, (delta, finish, lp) => ({ ...head, choices: [{ index, delta, logprobs: lp ? chatLogprobs([lp]) : null, finish_reason: finish }] })),
      );
      return sse(c, svc, group, req, n, rid, !!b.stream_options?.include_usage, framings, (ds) => ({ ...head, choices: [], usage: usageOf(ds) }));
    }
    const ds = await runChoices(c, svc, group, req, b.n ?? 1, rid);
    tokensPerSecondHeader(c, ds);
    return c.json({
      ...head,
      object: 'chat.completion',
      choices: ds.map((d, index) => {
        const out = plan ? readCalls(plan, d.text, d.finishReason) : { content: d.text, calls: [] };
        const calls = plan ? wireCalls(out.calls, plan.format) : [];
        return {
          index,
          message: { role: 'assistant', content: out.content, refusal: null, ...(calls.length ? { tool_calls: calls } : {}) },
          logprobs: d.logprobs ? chatLogprobs(d.logprobs) : null,
          finish_reason: calls.length ? 'tool_calls' : finishReason(d.finishReason),
        };
      }),
      usage: usageOf(ds),
    });
  });

  spec.add({ method: 'post', path: '/v1/completions', summary: 'Text completion (stream: true for SSE chunks ending in data: [DONE])', body: O.CompletionBody, response: O.Completion });
  app.post('/v1/completions', async (c) => {
    const b = await parseBody(c, O.CompletionBody, maxBody);
    if (b.suffix) throw unsupported('suffix', 'suffix (insertion) is not supported by this server');
    const n = b.n ?? 1;
    const bestOf = b.best_of ?? n;
    if (b.best_of != null && (bestOf < n || bestOf > MAX_N)) throw new InvalidRequestError('invalid_best_of', `best_of must be an integer in [n, ${MAX_N}] (n = ${n})`, { field: 'best_of' });
    if (b.best_of != null && b.best_of > 1 && b.stream) throw unsupported('best_of', 'best_of cannot be combined with stream: true');
    const group = resolveModel(svc, b.model);
    const p = b.prompt;
    const prompts: (string | number[])[] = typeof p === 'string' ? [p] : typeof p[0] === 'number' ? [p as number[]] : (p as string[] | number[][]);
    checkBytes(svc, prompts.flatMap((x) => (typeof x === 'string' ? [x] : [])));
    // echo: the prompt's text precedes each choice's; its logprobs (and a token-id prompt's text) come from teacher-forcing the prompt.
    const promptLp = b.echo && (b.logprobs != null || prompts.some((x) => typeof x !== 'string')) ? (b.logprobs ?? 0) : null;
    if (b.echo && b.stream && promptLp !== null) throw unsupported('echo', 'echo with stream: true takes a text prompt and no logprobs');
    // best_of ranks candidates by their tokens' log-probabilities: ask for them even when the client did not.
    const lpCount = b.logprobs ?? (bestOf > n ? 0 : null);
    const base = { ...baseRequest(svc, b, group, b.max_tokens, b.response_format), ...(lpCount != null ? { logprobs: lpCount } : {}), ...(promptLp !== null ? { promptLogprobs: promptLp } : {}) };
    const rid = svc.newRequestId();
    const head = { id: newId('cmpl', rid), object: 'text_completion', created: now(), model: b.model ?? group };
    if (b.stream) {
      if (prompts.length !== 1) throw unsupported('prompt', 'stream: true takes a single prompt');
      const framings = Array.from({ length: n }, (_, index): Framing => {
        let offset = 0;
        const choice = (text: string, finish: string | null, lp?: TokenLogprobs): object => {
          const logprobs = lp ? completionLogprobs([lp], offset) : null;
          offset += text.length;
          return { ...head, choices: [{ index, text, logprobs, finish_reason: finish }] };
        };
        return { opening: () => (b.echo ? [choice(prompts[0] as string, null)] : []), token: (text, lp) => [choice(text, null, lp)], finish: (d) => [choice('', finishReason(d.finishReason))] };
      });
      return sse(c, svc, group, { ...base, prompt: prompts[0]! }, n, rid, !!b.stream_options?.include_usage, framings, (ds) => ({ ...head, choices: [], usage: usageOf(ds) }));
    }
    let ds: Done[];
    if (bestOf === 1) {
      const ids = prompts.map((_, i) => (i === 0 ? rid : svc.newRequestId()));
      c.header('x-request-id', ids.join(','));
      ds = await Promise.all(prompts.map((prompt, i) => svc.runToCompletion(group, { ...base, prompt, id: ids[i]! }, c.req.raw.signal)));
    } else {
      if (prompts.length !== 1) throw unsupported(b.best_of != null && b.best_of > 1 ? 'best_of' : 'n', 'n > 1 and best_of > 1 take a single prompt');
      ds = await runChoices(c, svc, group, { ...base, prompt: prompts[0]! }, bestOf, rid);
    }
    tokensPerSecondHeader(c, ds);
    const chosen = bestOf > n ? bestCandidates(ds, n) : ds;
    const echoed = (d: Done, i: number): string => {
      if (!b.echo) return '';
      const x = prompts[bestOf === 1 ? i : 0]!;
      return typeof x === 'string' ? x : utf8.decode(Uint8Array.from((d.promptLogprobs ?? []).flatMap((t) => t.bytes)));
    };
    return c.json({
      ...head,
      choices: chosen.map((d, i) => {
        const pre = echoed(d, i);
        const logprobs = d.logprobs && b.logprobs != null ? completionLogprobs(d.logprobs, pre.length, b.echo ? (d.promptLogprobs ?? []) : []) : null;
        return { index: i, text: pre + d.text, logprobs, finish_reason: finishReason(d.finishReason) };
      }),
      usage: usageOf(ds), // every candidate's tokens, as OpenAI bills best_of
    });
  });

  responsesRoutes(app, spec, svc, maxBody);

  const modelList = (): O.ModelT[] => {
    const out: O.ModelT[] = [];
    for (const [group, list] of svc.readers.groups()) {
      const created = Math.floor(Math.min(Date.now(), ...list.map((r) => r.startedAt)) / 1000); // a group scaled to zero has no reader
      out.push({ id: group, object: 'model', created, owned_by: 'weft', kind: 'consumer_group', consumer_group: group, ready: list.some((r) => r.ready) });
      for (const r of list) out.push({ id: r.readerId, object: 'model', created: Math.floor(r.startedAt / 1000), owned_by: 'weft', kind: 'reader', consumer_group: group, ready: r.ready });
    }
    return out;
  };
  spec.add({ method: 'get', path: '/v1/models', summary: 'Consumer groups and reader ids, each usable as `model`', response: O.ModelList });
  app.get('/v1/models', (c) => c.json({ object: 'list', data: modelList() }));
  spec.add({ method: 'get', path: '/v1/models/{model}', summary: 'One model id (404 model_not_found if unknown)', response: O.Model });
  app.get('/v1/models/:model', (c) => {
    const id = c.req.param('model');
    const m = modelList().find((x) => x.id === id);
    if (!m) throw modelNotFound(id);
    return c.json(m);
  });

  spec.add({ method: 'post', path: '/v1/embeddings', summary: 'Embeddings from a group of embedding readers (model = the group or a reader id)', body: O.EmbeddingBody, response: O.EmbeddingList });
  app.post('/v1/embeddings', async (c) => {
    const b = await parseBody(c, O.EmbeddingBody, maxBody);
    if (b.dimensions != null) throw unsupported('dimensions', "dimensions is not supported: vectors have the model's own width");
    const input = b.input;
    if (typeof input !== 'string' && input.some((x) => typeof x !== 'string')) throw unsupported('input', 'token-id inputs are not supported; send text');
    const texts = typeof input === 'string' ? [input] : (input as string[]);
    checkTextBytes(svc, texts, 'input');
    const group = resolveModel(svc, b.model);
    const rid = svc.newRequestId();
    c.header('x-request-id', rid);
    const r = await svc.runEncoder(group, { types: ['embed'], what: '/v1/embeddings' }, texts, c.req.raw.signal, (api, signal) => api.embed(texts, { signal }), rid);
    const base64 = b.encoding_format === 'base64';
    const tokens = r.tokens.reduce((a, x) => a + x, 0);
    return c.json({
      object: 'list',
      data: r.vectors.map((v, index) => ({ object: 'embedding', index, embedding: base64 ? float32Base64(v) : v })),
      model: b.model,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    });
  });

  const docs = new Hono();
  spec.mountDocs(docs);
  app.route('/v1', docs);
  app.all('/v1/*', (c) => c.json(openaiError(new NotFoundError('route_not_found', `no route ${c.req.method} ${c.req.path}`)), 404));

  const extras = new Hono();
  spec.mountDocs(extras);
  extras.get('/healthz', (c) => healthz(c, svc));
  return { v1: app, extras, spec };
}
