/**
 * Request and response schemas of the OpenAI-compatible /v1 API. One source
 * for validation (server/apps/openai.ts) and for the OpenAPI document. Unknown
 * fields (user, metadata, store, ...) are accepted and ignored, as clients
 * send them freely; fields we cannot honour are accepted here and refused
 * with a clear 400 by the handler (suffix, some echo and best_of forms), so the error
 * names the feature rather than a schema path. Tools are checked by
 * server/apps/openai_tools.ts, with param paths such as `tools.0.function.parameters`.
 */
import { z } from 'zod';

const nul = <T extends z.ZodType>(t: T) => t.nullable().optional();

const Stop = nul(z.union([z.string().min(1), z.array(z.string().min(1)).max(16)])).describe('Stop string or list (max 16); not included in the output.');

/** Fields shared by /v1/chat/completions and /v1/completions. */
const Common = {
  model: z.string().min(1).max(128).optional().describe('A consumer group or reader id from GET /v1/models; default: the primary group.'),
  max_tokens: nul(z.number().int().min(1).max(1 << 20)).describe("Default: until the model stops or the context is full."),
  temperature: nul(z.number().min(0).max(2)).describe('Default 1 (as OpenAI); 0 = greedy.'),
  top_p: nul(z.number().min(0).max(1)).describe('Default 1; 0 = greedy.'),
  seed: nul(z.number().int()).describe('Reproducible sampling; taken modulo 2^32. Default: random.'),
  stop: Stop,
  n: nul(z.number().int()).describe('Choices, 1-16 (streamed: interleaved, each chunk naming its index); they share the prompt\'s KV blocks through the prefix cache; choice i samples with seed + i.'),
  presence_penalty: nul(z.number().min(-2).max(2)),
  frequency_penalty: nul(z.number().min(-2).max(2)),
  logit_bias: nul(z.record(z.string(), z.number())).describe('Token id -> bias in [-100, 100], added to the logits on the GPU before sampling.'),
  stream: nul(z.boolean()),
  stream_options: nul(z.object({ include_usage: nul(z.boolean()) })),
  user: nul(z.string()),
  // Extensions (vLLM names).
  top_k: nul(z.number().int().min(0).max(1 << 20)).describe('Extension: top-k sampling, 0 = off.'),
  min_p: nul(z.number().min(0).max(1)).describe('Extension: min-p sampling, 0 = off.'),
  repetition_penalty: nul(z.number().gt(0).max(100)).describe('Extension: HF repetition penalty, 1 = off.'),
  json_whitespace: nul(z.string()).describe('Extension: whitespace of response_format JSON output: "none" (default) = none at all; "compact" = one space after every ":" and ","; "flexible" = any JSON whitespace, runs of at most 16 characters; "flexible:N" = runs of at most N (1-64).'),
  constrained_decoding_budget: nul(z.string()).describe(
    'Extension: with response_format JSON, "complete" (default) = near max_tokens the output is steered to close, so it always parses (finish_reason length when the budget closed it); "truncate" = cut wherever the budget ends.',
  ),
};

export const ResponseFormat = z
  .discriminatedUnion('type', [
    z.object({ type: z.literal('text') }),
    z.object({ type: z.literal('json_object') }),
    z.object({
      type: z.literal('json_schema'),
      json_schema: z.object({
        name: z.string().optional(),
        description: z.string().optional(),
        schema: z.record(z.string(), z.unknown()).optional().describe('JSON Schema; absent = any JSON object.'),
        strict: nul(z.boolean()),
      }),
    }),
  ])
  .describe('json_object: output is one JSON object; json_schema: output satisfies json_schema.schema.');

const ContentPart = z.object({ type: z.string(), text: z.string().optional() }).passthrough();

export const ChatMessage = z
  .object({
    role: z.enum(['system', 'developer', 'user', 'assistant', 'tool', 'function']),
    content: nul(z.union([z.string(), z.array(ContentPart)])).describe('A string, or a list of {type:"text", text} and {type:"image_url", image_url:{url}} parts (images: data: or http(s) URLs, for image-to-text models).'),
    name: z.string().optional(),
  })
  .passthrough();

export const ChatCompletionBody = z.object({
  messages: z.array(ChatMessage).min(1).max(4096),
  ...Common,
  max_completion_tokens: nul(z.number().int().min(1).max(1 << 20)).describe('Takes precedence over max_tokens.'),
  response_format: nul(ResponseFormat),
  logprobs: nul(z.boolean()).describe('Raw log-probabilities of the output tokens (log-softmax of the model\'s logits before temperature, penalties and masks).'),
  top_logprobs: nul(z.number().int().min(0).max(20)).describe('0-20 most likely alternatives per token; needs logprobs: true.'),
  tools: nul(z.array(z.unknown())).describe('Function tools [{type: "function", function: {name, description?, parameters?}}], rendered by the model\'s chat template; 400 tools_not_supported when the template takes none.'),
  tool_choice: nul(z.unknown()).describe('"auto" (default: the model\'s own call syntax is parsed), "none" (tools hidden), "required" or {type: "function", function: {name}} (the call is generated under the function\'s JSON Schema).'),
  parallel_tool_calls: nul(z.boolean()).describe('Default true: a required call may be a list of calls.'),
});

export const CompletionBody = z.object({
  prompt: z
    .union([z.string(), z.array(z.string()).min(1).max(64), z.array(z.number().int()).min(1), z.array(z.array(z.number().int()).min(1)).min(1).max(64)])
    .describe('A string, a list of strings, token ids, or a list of token-id lists (lists: not with stream).'),
  ...Common,
  response_format: nul(ResponseFormat).describe('Extension (as vLLM): constrain the completion like chat response_format.'),
  logprobs: nul(z.number().int().min(0).max(20)).describe('Raw log-probabilities of the output tokens and this many alternatives (0-20).'),
  echo: nul(z.boolean()).describe('Prepend the prompt to each choice; with logprobs, the prompt tokens\' logprobs lead the lists (the first null).'),
  suffix: nul(z.string()).describe('Unsupported.'),
  best_of: nul(z.number().int()).describe('Candidates generated server-side (n..16, default n); the n with the highest mean token log-probability are returned. Not with stream.'),
});

export const EmbeddingBody = z.object({
  input: z
    .union([z.string(), z.array(z.string()).min(1).max(2048), z.array(z.number()).min(1), z.array(z.array(z.number())).min(1)])
    .describe('A text or a list of up to 2048 texts. Token-id inputs are refused (400 unsupported_parameter): the ids of another tokenizer mean nothing to this model.'),
  model: z.string().min(1).describe('A consumer group (or reader id) of embedding readers.'),
  encoding_format: nul(z.enum(['float', 'base64'])).describe('float (default): number lists; base64: little-endian float32 bytes.'),
  dimensions: nul(z.number().int().min(1)).describe('Unsupported: a value is a 400 (vectors have the model\'s width).'),
  user: nul(z.string()),
});

export const EmbeddingList = z.object({
  object: z.literal('list'),
  data: z.array(z.object({ object: z.literal('embedding'), index: z.number(), embedding: z.union([z.array(z.number()), z.string()]) })),
  model: z.string(),
  usage: z.object({ prompt_tokens: z.number(), total_tokens: z.number() }),
});

export const Usage = z.object({
  prompt_tokens: z.number(),
  completion_tokens: z.number(),
  total_tokens: z.number(),
  prompt_tokens_details: z.object({ cached_tokens: z.number() }),
  tokens_per_second: z.number().optional().describe('Weft: decode speed of the request, tokens/s (the mean over the choices of a multi-prompt call).'),
});

export const ToolCall = z.object({ id: z.string(), type: z.literal('function'), function: z.object({ name: z.string(), arguments: z.string().describe('JSON text') }) });

const FinishReason = z.string().nullable().describe('stop | length | tool_calls (| cancelled after POST /cancel/{id}); null until the last chunk.');

export const ChatCompletion = z.object({
  id: z.string().describe('chatcmpl-...'),
  object: z.literal('chat.completion'),
  created: z.number(),
  model: z.string(),
  choices: z.array(
    z.object({
      index: z.number(),
      message: z.object({
        role: z.literal('assistant'),
        content: z.string().nullable(),
        refusal: z.null(),
        tool_calls: z.array(ToolCall).optional(),
      }),
      logprobs: z.unknown().nullable().describe('With logprobs: {content: [{token, logprob, bytes, top_logprobs}], refusal: null}.'),
      finish_reason: FinishReason,
    }),
  ),
  usage: Usage,
});

export const Completion = z.object({
  id: z.string().describe('cmpl-...'),
  object: z.literal('text_completion'),
  created: z.number(),
  model: z.string(),
  choices: z.array(z.object({ index: z.number(), text: z.string(), logprobs: z.unknown().nullable().describe('With logprobs: {tokens, token_logprobs, top_logprobs, text_offset}.'), finish_reason: FinishReason })),
  usage: Usage,
});

export const Model = z.object({
  id: z.string(),
  object: z.literal('model'),
  created: z.number(),
  owned_by: z.string(),
  kind: z.enum(['consumer_group', 'reader']).describe('Extension.'),
  consumer_group: z.string().describe('Extension: the group requests naming this id are served by.'),
  ready: z.boolean().describe('Extension: a reader of the group is ready.'),
});

export const ModelList = z.object({ object: z.literal('list'), data: z.array(Model) });

export const OpenAIError = z.object({
  error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.string().nullable() }),
});

export type ChatCompletionBodyT = z.output<typeof ChatCompletionBody>;
export type CompletionBodyT = z.output<typeof CompletionBody>;
export type CommonT = Pick<ChatCompletionBodyT, keyof typeof Common>;
export type ResponseFormatT = z.output<typeof ResponseFormat>;
export type UsageT = z.output<typeof Usage>;
export type ModelT = z.output<typeof Model>;
