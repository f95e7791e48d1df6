/**
 * Hugging Face TGI's request body on SageMaker's /invocations, so clients
 * written for the HF LLM containers (`{inputs, parameters, stream}`) work
 * unchanged. The body is translated into the native generation parameters and
 * served by the same engine path; answers take TGI's shapes:
 * `[{generated_text, details?}]`, and for `stream: true` one
 * `data: {index, token, generated_text, details}` event per token whose last
 * carries the whole text (TGI's stream framing). Fields TGI has and Weft does
 * not serve (best_of, watermark, typical_p, top_n_tokens, decoder_input_details)
 * are `400 unknown_field`, never silently dropped.
 */
import type { SSEStreamingApi } from 'hono/streaming';
import { z } from 'zod';
import type { FinishReason, GenerationEvent } from '../../core/engine/engine.ts';
import { errorBody } from '../http/errors.ts';
import type { SseFraming } from '../http/sse.ts';
import type { GenerationParamsT } from '../http/schemas.ts';

const int = (min: number, max: number): z.ZodNumber => z.number().int().min(min).max(max);

export const TgiParameters = z.strictObject({
  max_new_tokens: int(1, 1 << 20).optional().describe('Default: until the model stops or the context is full (Weft\'s default on every route).'),
  do_sample: z.boolean().optional().describe('Sample instead of greedy; also implied by temperature, top_p or top_k, as in TGI.'),
  temperature: z.number().gt(0).max(100).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  top_k: int(0, 1 << 20).optional(),
  repetition_penalty: z.number().gt(0).max(100).optional(),
  seed: int(0, 2 ** 32 - 1).optional(),
  stop: z.array(z.string().min(1)).max(16).optional().describe('Stop sequences; not included in the output.'),
  truncate: int(1, 1 << 24).optional().describe('Keep only the last N prompt tokens.'),
  return_full_text: z.boolean().optional().describe('Prefix the prompt to generated_text (default false).'),
  details: z.boolean().optional().describe('Add details: finish_reason, generated_tokens, prompt_tokens, seed.'),
  grammar: z
    .discriminatedUnion('type', [
      z.strictObject({ type: z.literal('json'), value: z.union([z.record(z.string(), z.unknown()), z.string()]) }),
      z.strictObject({ type: z.literal('regex'), value: z.string().min(1) }),
    ])
    .optional()
    .describe('Constrained output: {type: "json", value: JSON Schema} or {type: "regex", value: pattern}.'),
});

export const TgiBody = z.strictObject({
  inputs: z.union([z.string(), z.array(z.string()).min(1).max(64)]).describe('Prompt, or a list of prompts served concurrently.'),
  parameters: TgiParameters.optional(),
  stream: z.boolean().optional().describe('Stream server-sent events in TGI\'s framing (single prompt only).'),
});
export type TgiBodyT = z.output<typeof TgiBody>;

export const TgiDetails = z.object({ finish_reason: z.string(), generated_tokens: z.number(), prompt_tokens: z.number(), seed: z.number().nullable(), tokens_per_second: z.number() });
export const TgiResponse = z.array(z.object({ generated_text: z.string(), details: TgiDetails.optional() }));

/** A body in TGI's shape: an object with `inputs` (Weft's own body has `text`). */
export function isTgiBody(json: unknown): boolean {
  return typeof json === 'object' && json !== null && !Array.isArray(json) && Object.hasOwn(json, 'inputs');
}

/** TGI parameters as the native generation parameters (greedy unless sampling is asked for, as TGI decides). */
export function tgiToNative(p: z.output<typeof TgiParameters> = {}): GenerationParamsT {
  const sample = p.do_sample === true || p.temperature !== undefined || p.top_p !== undefined || (p.top_k ?? 0) > 0;
  const grammar = p.grammar;
  return {
    sampling_temperature: sample ? (p.temperature ?? 1) : 0,
    ...(sample && p.top_p !== undefined ? { sampling_topp: p.top_p } : {}),
    ...(sample && p.top_k !== undefined ? { sampling_topk: p.top_k } : {}),
    ...(p.repetition_penalty !== undefined ? { repetition_penalty: p.repetition_penalty } : {}),
    ...(p.seed !== undefined ? { seed: p.seed } : {}),
    ...(p.max_new_tokens !== undefined ? { max_new_tokens: p.max_new_tokens } : {}),
    ...(p.stop ? { stop: p.stop } : {}),
    ...(p.truncate !== undefined ? { prompt_max_tokens: p.truncate } : {}),
    ...(grammar?.type === 'json' ? { json_schema: grammar.value } : {}),
    ...(grammar?.type === 'regex' ? { regex_string: grammar.value } : {}),
  };
}

/** TGI's finish reasons: length, eos_token, stop_sequence; Weft's others (constraint, cancelled, error) as they are. */
export function tgiFinishReason(r: FinishReason): string {
  return r === 'eos' ? 'eos_token' : r === 'stop' ? 'stop_sequence' : r;
}

type Done = Extract<GenerationEvent, { type: 'done' }>;

export function tgiDetails(d: Pick<Done, 'finishReason' | 'usage'>, seed: number | undefined): z.output<typeof TgiDetails> {
  return { finish_reason: tgiFinishReason(d.finishReason), generated_tokens: d.usage.completionTokens, prompt_tokens: d.usage.promptTokens, seed: seed ?? null, tokens_per_second: d.usage.tokensPerSecond ?? 0 };
}

/**
 * TGI's stream framing. TGI puts generated_text (and details) on the LAST token's event, so
 * each token event is held until the next event shows whether it was the last one.
 * A generation that ends without a token (a stop at once) still ends with one event, whose
 * token text is empty.
 */
export function tgiFraming(prefix: string, seed: number | undefined, details: boolean): SseFraming {
  let held: Extract<GenerationEvent, { type: 'token' }> | undefined;
  let index = 0;
  const write = (stream: SSEStreamingApi, tok: { id: number; text: string }, last: Done | undefined): Promise<void> =>
    stream.writeSSE({
      data: JSON.stringify({
        index: index++,
        token: { id: tok.id, text: tok.text, logprob: null, special: false },
        generated_text: last ? prefix + last.text : null,
        details: last && details ? tgiDetails(last, seed) : null,
      }),
    });
  return {
    async event(stream, ev) {
      if (ev.type === 'token') {
        if (held) await write(stream, held, undefined);
        held = ev;
        return;
      }
      await write(stream, held ?? { id: -1, text: '' }, ev);
      held = undefined;
    },
    async error(stream, e) {
      // TGI's error event ({error: message, error_type}), with Weft's stable code and details.
      const { error } = errorBody(e);
      await stream.writeSSE({ data: JSON.stringify({ error: error.message, error_type: error.code, ...(error.details ? { details: error.details } : {}) }) });
    },
  };
}
