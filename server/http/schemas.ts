/**
 * Request and response schemas of the inference API (Takeoff-style field
 * names). One source for validation and for the OpenAPI documents.
 */
import { z } from 'zod';

const int = (min: number, max: number): z.ZodNumber => z.number().int().min(min).max(max);

export const GenerationParams = z.object({
  consumer_group: z.string().min(1).max(64).optional().describe('Reader group to serve the request (default "primary").'),
  sampling_temperature: z.number().min(0).max(100).optional().describe('0 = greedy. Default 0 (greedy).'),
  sampling_topp: z.number().gt(0).max(1).optional(),
  sampling_topk: int(0, 1 << 20).optional().describe('0 = off.'),
  repetition_penalty: z.number().gt(0).max(100).optional(),
  no_repeat_ngram_size: int(0, 1024).optional(),
  seed: int(0, 2 ** 32 - 1).optional(),
  max_new_tokens: int(1, 1 << 20).optional().describe('Default 128.'),
  min_new_tokens: int(0, 1 << 20).optional(),
  stop: z.array(z.string().min(1)).max(16).optional().describe('Stop strings; not included in the output.'),
  json_schema: z.union([z.record(z.string(), z.unknown()), z.string()]).optional().describe('JSON Schema the output must satisfy; {} = any JSON object.'),
  regex_string: z.string().min(1).optional().describe('Regular expression the whole output must match.'),
  prompt_max_tokens: int(1, 1 << 24).optional().describe('Keep only the last N prompt tokens (a leading BOS is kept).'),
  constrained_decoding_backend: z.string().optional().describe('"native" (default) or "outlines".'),
});

export const GenerateBody = GenerationParams.extend({
  text: z.union([z.string(), z.array(z.string()).min(1).max(64)]).describe('Prompt, or a list of prompts served concurrently.'),
});

export const GenerateStreamBody = GenerationParams.extend({ text: z.string() });

export const Usage = z.object({ prompt_tokens: z.number(), completion_tokens: z.number(), cached_tokens: z.number() });

export const GenerateResponse = z.object({
  text: z.union([z.string(), z.array(z.string())]),
  finish_reason: z.union([z.string(), z.array(z.string())]),
  usage: z.union([Usage, z.array(Usage)]),
});

export const TokenizeBody = z.object({ text: z.string(), add_special_tokens: z.boolean().optional() });
export const TokenizeResponse = z.object({ tokens: z.array(z.number()), token_strings: z.array(z.string()) });
export const DetokenizeBody = z.object({ tokens: z.array(z.number().int()).max(1 << 20), skip_special_tokens: z.boolean().optional() });
export const DetokenizeResponse = z.object({ text: z.string() });

export const ChatMessage = z.object({ role: z.string().min(1), content: z.union([z.string(), z.null(), z.array(z.unknown())]) }).passthrough();
export const ChatTemplateBody = z.object({
  messages: z.array(ChatMessage).min(1),
  add_generation_prompt: z.boolean().optional(),
  tools: z.array(z.unknown()).optional(),
});
export const ChatTemplateResponse = z.object({ text: z.string() });
export const CancelResponse = z.object({ request_id: z.string(), cancelled: z.boolean() });

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
    kv_cache_dtype: z.enum(['f32', 'q8']).optional(),
    type: z.enum(['generate', 'embed', 'classify']).optional().describe('What the reader serves; absent = detected from config.json.'),
    batch_duration_millis: z.number().int().optional().describe('Encoders: longest wait of a partial batch, ms (default 5).'),
  })
  .strict();

export type GenerationParamsT = z.output<typeof GenerationParams>;
