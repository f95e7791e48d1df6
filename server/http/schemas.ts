/**
 * Request and response schemas of the inference API (Takeoff-style field
 * names). One source for validation and for the OpenAPI documents.
 */
import { z } from 'zod';

const int = (min: number, max: number): z.ZodNumber => z.number().int().min(min).max(max);

// Strict (every body below): an unknown field is `400 unknown_field` (server/http/unknown_fields.ts),
// never silently dropped.
export const GenerationParams = z.strictObject({
  consumer_group: z.string().min(1).max(64).optional().describe('Reader group to serve the request (default "primary").'),
  sampling_temperature: z.number().min(0).max(100).optional().describe('0 = greedy. Default 0 (greedy).'),
  sampling_topp: z.number().gt(0).max(1).optional(),
  sampling_topk: int(0, 1 << 20).optional().describe('0 = off.'),
  repetition_penalty: z.number().gt(0).max(100).optional(),
  no_repeat_ngram_size: int(0, 1024).optional(),
  speculative: z.boolean().optional().describe('false: no speculative decoding for this request (default: on where the reader has a draft model).'),
  seed: int(0, 2 ** 32 - 1).optional(),
  max_new_tokens: int(1, 1 << 20).optional().describe('Default: until the model stops or the context is full.'),
  min_new_tokens: int(0, 1 << 20).optional(),
  stop: z.array(z.string().min(1)).max(16).optional().describe('Stop strings; not included in the output.'),
  json_schema: z.union([z.record(z.string(), z.unknown()), z.string()]).optional().describe('JSON Schema the output must satisfy; {} = any JSON object.'),
  regex_string: z.string().min(1).optional().describe('Regular expression the whole output must match.'),
  prompt_max_tokens: int(1, 1 << 24).optional().describe('Keep only the last N prompt tokens (a leading BOS is kept).'),
  constrained_decoding_backend: z.string().optional().describe('"native" (default) or "outlines".'),
  json_whitespace: z.string().optional().describe('Whitespace of JSON output (json_schema): "none" (default) = none at all; "compact" = one space after every ":" and ","; "flexible" = any JSON whitespace, runs of at most 16 characters; "flexible:N" = runs of at most N (1-64).'),
  constrained_decoding_budget: z
    .string()
    .optional()
    .describe('With json_schema / regex_string: "complete" (default) = near max_new_tokens the output is steered to close, so it always parses (finish_reason length when the budget closed it); "truncate" = cut wherever the budget ends.'),
});

export const GenerateBody = GenerationParams.extend({
  text: z.union([z.string(), z.array(z.string()).min(1).max(64)]).describe('Prompt, or a list of prompts served concurrently.'),
});

export const GenerateStreamBody = GenerationParams.extend({ text: z.string() });

const IMAGE_TEXT = 'Prompt with inline images as <image:URL> tags: data:image/png;base64,... / data:image/jpeg;base64,... or http(s) URLs (fetched by the server); several per prompt.';
export const ImageGenerateBody = GenerationParams.extend({
  text: z.union([z.string(), z.array(z.string()).min(1).max(64)]).describe(`${IMAGE_TEXT} A list of prompts is served concurrently.`),
});
export const ImageGenerateStreamBody = GenerationParams.extend({ text: z.string().describe(IMAGE_TEXT) });

export const Usage = z.object({
  prompt_tokens: z.number(),
  completion_tokens: z.number(),
  cached_tokens: z.number(),
  tokens_per_second: z.number().describe('Decode speed: tokens after the first / seconds from the first token to the last; 0 under two tokens.'),
});

export const GenerateResponse = z.object({
  text: z.union([z.string(), z.array(z.string())]),
  finish_reason: z.union([z.string(), z.array(z.string())]),
  usage: z.union([Usage, z.array(Usage)]),
});

export const TokenizeBody = z.strictObject({ text: z.string(), add_special_tokens: z.boolean().optional() });
export const TokenizeResponse = z.object({ tokens: z.array(z.number()), token_strings: z.array(z.string()) });
export const DetokenizeBody = z.strictObject({ tokens: z.array(z.number().int()).max(1 << 20), skip_special_tokens: z.boolean().optional() });
export const DetokenizeResponse = z.object({ text: z.string() });

export const ChatMessage = z.object({ role: z.string().min(1), content: z.union([z.string(), z.null(), z.array(z.unknown())]) }).passthrough();
export const ChatTemplateBody = z.strictObject({
  messages: z.array(ChatMessage).min(1),
  add_generation_prompt: z.boolean().optional(),
  tools: z.array(z.unknown()).optional(),
});
export const ChatTemplateResponse = z.object({ text: z.string() });
export const CancelResponse = z.object({ request_id: z.string(), cancelled: z.boolean() });

/** Scaling policy fields of a consumer group (docs/scaling.md); on a reader entry they set its group's policy. */
export const ScalingFields = z
  .object({
    min_replicas: z.number().int().optional().describe('Fewest replicas (default 1); 0 lets the group scale to zero when idle.'),
    max_replicas: z.number().int().optional().describe('Most replicas the scaler starts (default 1).'),
    scale_down_after_seconds: z.number().optional().describe('Idle seconds before a replica beyond min_replicas is drained and stopped (default 300).'),
    scale_up_queue_depth: z.number().int().optional().describe('Waiting requests per ready replica that start another one (default 4).'),
    cold_start_timeout_seconds: z.number().optional().describe('Longest a request waits for a cold start before 503 reader_starting (default 60).'),
  })
  .strict();

export const ReaderSpecBody = z
  .object({
    model: z.string().min(1).optional().describe('Model directory or .gguf path (default: the server default model).'),
    consumer_group: z.string().optional(),
    reader_id: z.string().optional(),
    backend: z.string().optional(),
    dtype: z.enum(['auto', 'f32', 'f16', 'q8_0', 'q4_0']).optional(),
    max_batch_size: z.number().int().optional(),
    max_tokens_per_step: z.number().int().optional(),
    max_context: z.number().int().optional(),
    page_cache_size: z.union([z.string(), z.number()]).optional(),
    prefix_caching: z.boolean().optional(),
    kv_cache_dtype: z.enum(['auto', 'f32', 'f16', 'q8']).optional(),
    type: z.enum(['generate', 'embed', 'classify']).optional().describe('What the reader serves; absent = detected from config.json.'),
    batch_duration_millis: z.number().int().optional().describe('Encoders: longest wait of a partial batch, ms (default 5).'),
    constraint_compile_millis: z.number().int().optional().describe('Longest one constraint may take to compile on this reader, ms (default: constraint_compile_millis).'),
    tokenize_worker: z.boolean().optional().describe('Tokenize long texts on a worker thread, not the thread that steps the batch (default: tokenize_worker, true).'),
    assistant_model: z.string().min(1).optional().describe('Draft model (directory or .gguf) for speculative decoding; must share the model\'s vocabulary.'),
    speculative_tokens: z.number().int().optional().describe('Draft tokens verified per step (1-16, default 4); needs assistant_model.'),
    assistant_required: z.boolean().optional().describe('Fail the reader when the draft is unusable (default false: start without speculation and log why).'),
    ...ScalingFields.shape,
  })
  .strict();

export type GenerationParamsT = z.output<typeof GenerationParams>;
