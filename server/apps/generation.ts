/**
 * Generation helpers every generation-shaped route shares (the native
 * /generate routes, images, SageMaker/TGI, Vertex, the OpenAI layer's
 * json_whitespace): Takeoff-style parameters -> a reader request with its
 * defaults, and running a call's requests to completion with their ids in
 * `x-request-id`.
 */
import type { Context } from 'hono';
import { InvalidRequestError, PayloadTooLargeError } from '../../core/errors.ts';
import type { ConstraintRequest, GenerateRequest } from '../../core/engine/reader_api.ts';
import { parseBudgetMode, parseWhitespace } from '../../core/structured/index.ts';
import { tokensPerSecondHeader, usageOf } from '../http/sse.ts';
import type * as S from '../http/schemas.ts';
import type { Service } from '../service.ts';

/** Validates `json_whitespace` here (the reader checks again) so a bad value fails before any work; absent → undefined. */
export function jsonWhitespace(v: string | null | undefined, regex: boolean): string | undefined {
  if (v === undefined || v === null) return undefined;
  const ws = parseWhitespace(v);
  if (regex && ws !== 'none') throw new InvalidRequestError('conflicting_constraints', 'json_whitespace applies to JSON output (json_schema), not to regex_string', { field: 'json_whitespace' });
  return ws;
}

/** Validates `constrained_decoding_budget` here (the reader checks again); absent → undefined (the reader's default, 'complete'). */
export function budgetMode(v: string | null | undefined): string | undefined {
  return v === undefined || v === null ? undefined : parseBudgetMode(v);
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
  const mode = budgetMode(p.constrained_decoding_budget);
  const budget = mode ? { budget: mode } : {};
  if (p.json_schema !== undefined) {
    let schema: unknown = p.json_schema;
    if (typeof schema === 'string') {
      try {
        schema = JSON.parse(schema);
      } catch {
        throw new InvalidRequestError('invalid_schema', 'json_schema is a string that is not valid JSON', { field: 'json_schema', path: '' });
      }
    }
    constraint = { kind: 'json_schema', schema, ...(backend ? { backend } : {}), ...(whitespace ? { whitespace } : {}), ...budget };
  } else if (p.regex_string !== undefined) {
    constraint = { kind: 'regex', pattern: p.regex_string, ...(backend ? { backend } : {}), ...budget };
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
    ...(p.max_new_tokens !== undefined ? { maxNewTokens: p.max_new_tokens } : {}),
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
