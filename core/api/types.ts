/**
 * The request and response shapes of the engine library (core/api), in
 * OpenAI's wire shape (snake_case fields, `object` tags, `choices`) so code
 * written for OpenAI's SDK or WebLLM's engine reads the same here. Only the
 * fields Weft honours are typed; the mapping onto the reader API is in
 * openai_map.ts. All are plain data, so they cross a Web Worker boundary as-is.
 */
import type { ChatMessage } from '../tokenizer/chat_template.ts';

/** Progress of createEngine: bytes of weights read (`loaded` of `total`) per stage. */
export interface LoadProgress {
  stage: 'fetch' | 'device' | 'weights' | 'ready';
  loaded: number;
  total: number;
  /** The GPU adapter once the device is open; the file being fetched while fetching. */
  detail?: string;
}

export type ResponseFormat = { type: 'text' } | { type: 'json_object' } | { type: 'json_schema'; json_schema: { name?: string; schema?: unknown; strict?: boolean } };

/** Fields chat and text completions share. */
export interface SamplingFields {
  model?: string;
  /** Tokens to generate at most; default: up to the context length. */
  max_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  top_k?: number | null;
  min_p?: number | null;
  repetition_penalty?: number | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  /** Makes sampling reproducible: the same seed and request give the same tokens. */
  seed?: number | null;
  stop?: string | string[] | null;
  /** Only 1 is supported. */
  n?: number | null;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean } | null;
  response_format?: ResponseFormat | null;
}

/** OpenAI content parts: text only here (image parts are answered `unsupported_content`). */
export type ContentPart = { type: 'text'; text: string } | { type: string; [k: string]: unknown };

export interface ChatCompletionMessageParam {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  content: string | ContentPart[] | null;
  name?: string;
}

export interface ChatCompletionCreateParams extends SamplingFields {
  messages: ChatCompletionMessageParam[];
}

export interface CompletionCreateParams extends SamplingFields {
  prompt: string;
}

export interface EmbeddingCreateParams {
  input: string | string[];
  model?: string;
  /** `float` (default) or `base64` (little-endian float32 bytes). */
  encoding_format?: 'float' | 'base64';
}

/** Per-call options (second argument of every create). */
export interface RequestOptions {
  /** Aborting stops this request: a stream ends with finish_reason `abort`, a promise rejects with CancelledError. */
  signal?: AbortSignal;
}

export interface CompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
}

/** `stop`: a stop string or the model's end of text; `length`: max_tokens or the context; `abort`: aborted. */
export type FinishReason = 'stop' | 'length' | 'abort';

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: { index: number; message: { role: 'assistant'; content: string }; finish_reason: FinishReason; logprobs: null }[];
  usage: CompletionUsage;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: { index: number; delta: { role?: 'assistant'; content?: string }; finish_reason: FinishReason | null; logprobs: null }[];
  /** Only with stream_options.include_usage: null on every chunk but a last one with empty choices. */
  usage?: CompletionUsage | null;
}

export interface Completion {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: { index: number; text: string; finish_reason: FinishReason | null; logprobs: null }[];
  usage?: CompletionUsage | null;
}

export interface CreateEmbeddingResponse {
  object: 'list';
  model: string;
  data: { object: 'embedding'; index: number; embedding: number[] | string }[];
  usage: { prompt_tokens: number; total_tokens: number };
}

export type { ChatMessage };
