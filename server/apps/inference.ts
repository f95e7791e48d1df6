/**
 * The inference app (port 3000): generate, generate_stream (SSE), tokenize,
 * detokenize, chat_template, cancel, status and healthz; embed, classify and
 * rerank for encoder readers (encoders.ts); image_generate and
 * image_generate_stream for image-to-text readers (images.ts).
 *
 * Every response carries `x-request-id`; `POST /cancel/{request_id}` stops
 * that request at the engine's next step, and so does a client that
 * disconnects. Streams start only after the reader accepted the request, so
 * validation errors are JSON errors with a status, never a broken stream.
 */
import { Hono, type Context } from 'hono';
import { InvalidRequestError, PayloadTooLargeError } from '../../core/errors.ts';
import type { ConstraintRequest, GenerateRequest } from '../../core/engine/reader_api.ts';
import { parseWhitespace } from '../../core/structured/index.ts';
import { ApiSpec, parseBody } from '../http/api_spec.ts';
import { sseGeneration, TAKEOFF_FRAMING, tokensPerSecondHeader, usageOf } from '../http/sse.ts';
import * as S from '../http/schemas.ts';
import { type ManagedReader, PROBE_MS } from '../readers/managed_reader.ts';
import type { Service } from '../service.ts';
import { encoderRoutes } from './encoders.ts';
import { imageRoutes } from './images.ts';

const DEFAULT_MAX_NEW_TOKENS = 128;

/** Validates `json_whitespace` here (the reader checks again) so a bad value fails before any work; absent → undefined. */
export function jsonWhitespace(v: string | null | undefined, regex: boolean): string | undefined {
  if (v === undefined || v === null) return undefined;
  const ws = parseWhitespace(v);
  if (regex && ws !== 'none') throw new InvalidRequestError('conflicting_constraints', 'json_whitespace applies to JSON output (json_schema), not to regex_string', { field: 'json_whitespace' });
  return ws;
}

/** Maps Takeoff-style parameters onto a reader request. */
export function toGenerateRequest(p: S.GenerationParamsT, prompt: string, maxPromptBytes: number): GenerateRequest {
  const bytes = new TextEncoder().encode(prompt).length;
  if (bytes > maxPromptBytes) {
    throw new PayloadTooLargeError('prompt_too_large', `the prompt is ${bytes} bytes; the limit is ${maxPromptBytes} (WEFT_MAX_PROMPT_STRING_BYTES)`, { limit: maxPromptBytes, bytes });
  }
  if (p.json_schema !== undefined && p.regex_string !== undefined) {
    throw new InvalidRequestError('conflicting_constraints', 'give json_schema or regex_string, not both', { field: 'json_schema' });
  }
  let constraint: ConstraintRequest | undefined;
  const backend = p.constrained_decoding_backend;
  const whitespace = jsonWhitespace(p.json_whitespace, p.regex_string !== undefined);
  if (p.json_schema !== undefined) {
    let schema: unknown = p.json_schema;
    if (typeof schema === 'string') {
      try {
        schema = JSON.parse(schema);
      } catch {
        throw new InvalidRequestError('invalid_schema', 'json_schema is a string that is not valid JSON', { field: 'json_schema', path: '' });
      }
    }
    constraint = { kind: 'json_schema', schema, ...(backend ? { backend } : {}), ...(whitespace ? { whitespace } : {}) };
  } else if (p.regex_string !== undefined) {
    constraint = { kind: 'regex', pattern: p.regex_string, ...(backend ? { backend } : {}) };
  } else if (backend !== undefined && backend !== 'native' && backend !== 'outlines') {
    throw new InvalidRequestError('invalid_constrained_decoding_backend', `constrained_decoding_backend must be one of native, outlines`, { field: 'constrained_decoding_backend', valid: ['native', 'outlines'] });
  }
  const sampling = {
    temperature: p.sampling_temperature ?? 0,
    ...(p.sampling_topk !== undefined ? { topK: p.sampling_topk } : {}),
    ...(p.sampling_topp !== undefined ? { topP: p.sampling_topp } : {}),
    ...(p.repetition_penalty !== undefined ? { repetitionPenalty: p.repetition_penalty } : {}),
    ...(p.seed !== undefined ? { seed: p.seed } : {}),
  };
  return {
    prompt,
    maxNewTokens: p.max_new_tokens ?? DEFAULT_MAX_NEW_TOKENS,
    sampling,
    ...(p.min_new_tokens !== undefined ? { minNewTokens: p.min_new_tokens } : {}),
    ...(p.no_repeat_ngram_size ? { noRepeatNgramSize: p.no_repeat_ngram_size } : {}),
    ...(p.speculative === false ? { speculative: false } : {}),
    ...(p.stop ? { stop: p.stop } : {}),
    ...(p.prompt_max_tokens !== undefined ? { promptMaxTokens: p.prompt_max_tokens } : {}),
    ...(constraint ? { constraint } : {}),
  };
}


/**
 * Runs the requests of one call to completion, concurrently, in request order. Their ids go
 * out in `x-request-id` (comma-separated) before any runs, so a client can cancel meanwhile.
 */
export async function runGenerations(c: Context, svc: Service, group: string | undefined, reqs: GenerateRequest[]): Promise<Awaited<ReturnType<Service['runToCompletion']>>[]> {
  const ids = reqs.map(() => svc.newRequestId());
  c.header('x-request-id', ids.join(','));
  const ds = await Promise.all(reqs.map((r, i) => svc.runToCompletion(group, { ...r, id: ids[i]! }, c.req.raw.signal)));
  tokensPerSecondHeader(c, ds);
  return ds;
}

/**
 * Runs the requests of one /generate-shaped call to completion and answers with
 * the Takeoff shape: one object for a single prompt (`single`), else lists in
 * prompt order. Request ids go out in `x-request-id` (comma-separated) first, so
 * a client can cancel while the call is running.
 */
export async function answerGenerations(c: Context, svc: Service, group: string | undefined, reqs: GenerateRequest[], single: boolean): Promise<Response> {
  const results = await runGenerations(c, svc, group, reqs);
  if (single) {
    const d = results[0]!;
    return c.json({ text: d.text, finish_reason: d.finishReason, usage: usageOf(d) });
  }
  return c.json({ text: results.map((d) => d.text), finish_reason: results.map((d) => d.finishReason), usage: results.map(usageOf) });
}

export function inferenceApp(svc: Service): { app: Hono; spec: ApiSpec } {
  const app = new Hono();
  const spec = new ApiSpec('Weft inference API', 'Text generation, embeddings, classification, reranking, tokenization and request control.', svc.version);
  const maxBody = Math.max(svc.config.maxPromptStringBytes * 64 + 65536, 1 << 20);

  spec.add({ method: 'post', path: '/generate', summary: 'Generate text for one prompt or a list of prompts', body: S.GenerateBody, response: S.GenerateResponse });
  app.post('/generate', async (c) => {
    const body = await parseBody(c, S.GenerateBody, maxBody);
    const prompts = typeof body.text === 'string' ? [body.text] : body.text;
    const reqs = prompts.map((t) => toGenerateRequest(body, t, svc.config.maxPromptStringBytes));
    return answerGenerations(c, svc, body.consumer_group, reqs, typeof body.text === 'string');
  });

  spec.add({ method: 'post', path: '/generate_stream', summary: 'Stream generated text as server-sent events', body: S.GenerateStreamBody, stream: true });
  app.post('/generate_stream', async (c) => {
    const body = await parseBody(c, S.GenerateStreamBody, maxBody);
    const req = toGenerateRequest(body, body.text, svc.config.maxPromptStringBytes);
    return sseGeneration(c, svc, body.consumer_group, { ...req, id: svc.newRequestId() }, TAKEOFF_FRAMING);
  });

  spec.add({ method: 'post', path: '/tokenize/{reader_id}', summary: 'Tokenize text with a live reader', body: S.TokenizeBody, response: S.TokenizeResponse });
  app.post('/tokenize/:reader_id', async (c) => {
    const body = await parseBody(c, S.TokenizeBody, maxBody);
    const bytes = Buffer.byteLength(body.text, 'utf8');
    if (bytes > svc.config.maxTokenizeBytes) {
      // Tokenizing runs on the reader's thread, between generation steps: a bounded input keeps the stall bounded.
      throw new PayloadTooLargeError('input_too_large', `the text is ${bytes} bytes; the limit is ${svc.config.maxTokenizeBytes} (WEFT_MAX_TOKENIZE_BYTES)`, { limit: svc.config.maxTokenizeBytes, bytes });
    }
    const r = await svc.readers.api(c.req.param('reader_id')).tokenize(body.text, { addSpecialTokens: body.add_special_tokens ?? true });
    return c.json({ tokens: r.ids, token_strings: r.tokens });
  });

  spec.add({ method: 'post', path: '/detokenize/{reader_id}', summary: 'Turn token ids back into text', body: S.DetokenizeBody, response: S.DetokenizeResponse });
  app.post('/detokenize/:reader_id', async (c) => {
    const body = await parseBody(c, S.DetokenizeBody, maxBody);
    const text = await svc.readers.api(c.req.param('reader_id')).detokenize(body.tokens, { skipSpecialTokens: body.skip_special_tokens ?? false });
    return c.json({ text });
  });

  spec.add({ method: 'post', path: '/chat_template/{reader_id}', summary: "Render chat messages with the reader's chat template", body: S.ChatTemplateBody, response: S.ChatTemplateResponse });
  app.post('/chat_template/:reader_id', async (c) => {
    const body = await parseBody(c, S.ChatTemplateBody, maxBody);
    const text = await svc.readers.api(c.req.param('reader_id')).chatTemplate(body.messages as never, {
      addGenerationPrompt: body.add_generation_prompt ?? true,
      ...(body.tools ? { tools: body.tools } : {}),
    });
    return c.json({ text });
  });

  encoderRoutes(app, spec, svc, maxBody);
  imageRoutes(app, spec, svc);

  spec.add({ method: 'post', path: '/cancel/{request_id}', summary: 'Cancel a request by the id from its x-request-id header', response: S.CancelResponse });
  app.post('/cancel/:request_id', async (c) => {
    const id = c.req.param('request_id');
    return c.json({ request_id: id, cancelled: await svc.cancel(id) });
  });

  spec.add({ method: 'get', path: '/status', summary: 'Readers, groups and engine statistics' });
  app.get('/status', async (c) => c.json(await svc.status()));

  spec.add({ method: 'get', path: '/healthz', summary: '200 when every reader is ready, else 503', query: { wait: 'seconds to wait for readiness (max health_wait_max)' } });
  app.get('/healthz', (c) => healthz(c, svc));

  spec.mountDocs(app);
  return { app, spec };
}

export async function healthz(c: Context, svc: Service): Promise<Response> {
  const wait = Math.min(Number(c.req.query('wait') ?? '0') || 0, svc.config.healthWaitMax);
  if (wait > 0 && !svc.readers.allReady) await svc.readers.waitSettled(wait * 1000);
  // Probe every ready reader (bounded wait): a reader whose work has not advanced for reader_stall_millis is unhealthy.
  await Promise.all(svc.readers.all().map((r) => r.statsWithin(PROBE_MS)));
  const stalled = (r: ManagedReader): boolean => r.ready && r.stalledMs() > svc.config.readerStallMillis;
  const readers = svc.readers.all().map((r) => ({ reader_id: r.readerId, ready: r.ready, state: r.state, ...(stalled(r) ? { stalled_ms: r.stalledMs() } : {}) }));
  const unhealthy = svc.readers.all().some(stalled);
  const ok = svc.readers.allReady && !unhealthy && svc.license.ok;
  const lic = svc.license.state();
  const license = { state: lic.state, required: lic.required, licensee: lic.licensee, expires: lic.expires, reason: lic.reason };
  const status = !svc.license.ok ? 'unlicensed' : unhealthy ? 'unhealthy' : ok ? 'ok' : 'loading';
  return c.json({ status, readers, license }, ok ? 200 : 503);
}
