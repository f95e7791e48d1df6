/**
 * The reader API: what a loaded model offers, as plain data in and out, so the
 * same interface is served in-process (LocalReader for decoders,
 * LocalEncoderReader for encoders), across a Node worker thread or a browser
 * Web Worker (core/engine/protocol.ts), and by the HTTP layer. Constraints
 * travel as specs and are compiled where the tokenizer lives. Every reader
 * serves the BaseReaderApi; generative readers add `generate` (ReaderApi),
 * encoder readers embed / rerank / classify (EncoderReaderApi); `info().type`
 * says which.
 */
import { InvalidRequestError } from '../errors.ts';
import type { SamplingParams } from '../sampling/params.ts';
import type { ToolFormat } from '../tools/types.ts';
import type { ChatMessage } from '../tokenizer/tokenizer.ts';
import type { FinishReason, GenerationEvent, TokenConstraint, Usage } from './engine.ts';
import type { DecodePathCounts } from '../models/step.ts';

/**
 * A structured-output constraint as requested (compiled by the reader).
 * `backend`: 'native' (default) | 'outlines'; `whitespace`: 'none' (default) |
 * 'compact' | 'flexible' | 'flexible:N', JSON kinds only (core/structured
 * parseBackend / parseWhitespace); `strict`: json_schema only, OpenAI strict
 * semantics (objects that declare properties are closed, all of them required);
 * `budget`: 'complete' (default: near max_new_tokens the output is steered to
 * a complete value) | 'truncate' (no steering: cut where the budget ends).
 */
export type ConstraintRequest = (
  | { kind: 'json_schema'; schema: unknown; strict?: boolean }
  | { kind: 'regex'; pattern: string }
  | { kind: 'json_object' }
) & { backend?: string; whitespace?: string; budget?: string };

/** One generation request as plain, cloneable data. */
export interface GenerateRequest {
  /** A prompt string, token ids, or chat messages (rendered with the model's template). */
  prompt: string | number[] | { messages: ChatMessage[]; tools?: unknown[] };
  maxNewTokens?: number;
  minNewTokens?: number;
  sampling?: Partial<SamplingParams>;
  noRepeatNgramSize?: number;
  /** false opts this request out of speculative decoding (default: speculate where the reader has a draft). */
  speculative?: boolean;
  stop?: string[];
  stopTokenIds?: number[];
  ignoreEos?: boolean;
  promptMaxTokens?: number;
  constraint?: ConstraintRequest;
  /** Raw log-probabilities of each generated token and this many alternatives (0-20); see GenerateOptions.logprobs. */
  logprobs?: number;
  /** Raw log-probabilities of each prompt token after the first and this many alternatives (0-20); see GenerateOptions.promptLogprobs. */
  promptLogprobs?: number;
  /** Token id -> bias in [-100, 100] added to the logits before sampling (OpenAI logit_bias). */
  logitBias?: Record<string, number>;
  /**
   * For the `{messages}` prompt form only: the Jinja template to render with
   * when the model has no chat template of its own (e.g.
   * DEFAULT_CHATML_TEMPLATE), and stop strings that apply only then (e.g.
   * `<|im_end|>`). Models with a template ignore it; without it, such models
   * reject chat prompts (`chat_template_error`).
   */
  chatTemplateFallback?: { template: string; stop?: string[] };
  /** Id for cancellation; assigned by the caller. */
  id?: string;
  /**
   * Image-to-text: the encoded bytes (PNG or JPEG) of each `<image:…>` tag of
   * the prompt, in order (the tags only mark positions). Absent: the prompt is
   * plain text, tags included. Readers of text-only models answer `images_not_supported`.
   */
  images?: Uint8Array[];
}

export interface GenerateResponse {
  text: string;
  tokenIds: number[];
  finishReason: FinishReason;
  usage: Usage;
}

/** What a reader serves: text generation, embeddings (and bi-encoder rerank), or a classifier head (and cross-encoder rerank). */
export type ReaderType = 'generate' | 'embed' | 'classify';

export interface ReaderInfo {
  readerId: string;
  model: string;
  type: ReaderType;
  device: string;
  backend: string;
  architecture: string;
  contextLength: number;
  vocabSize: number;
  hasChatTemplate: boolean;
  /** The tool-call syntax of the chat template (core/tools), or null when it ignores `tools`; absent for encoders. */
  toolFormat?: ToolFormat | null;
  /** Generative readers that take images (`<image:…>` tags with GenerateRequest.images). */
  imageInput?: boolean;
  /** Encoders: width of embedding vectors. */
  dims?: number;
  /** Speculative decoding: the draft model and tokens per step, or why a configured draft is not used. */
  speculative?: { assistantModel: string; tokens: number; active: boolean; reason?: string };
  /** Encoders with a classifier head: class names by index. */
  labels?: string[];
  /** Generative readers: sequences stepped together and tokens the KV pool holds (admission control). */
  capacity?: { maxSeqs: number; kvTokens: number };
}

export interface ReaderStats {
  running: number;
  waiting: number;
  kvBlocksTotal: number;
  kvBlocksFree: number;
  /** Speculative decoding (readers with a draft): draft tokens verified, accepted, and accepted / proposed. */
  draftTokensProposed?: number;
  draftTokensAccepted?: number;
  draftAcceptanceRate?: number | null;
  prefixHitTokens: number;
  /**
   * Generative readers: prompts admitted with nothing cached (a full
   * prefill), prompts that started from prefix-cached KV blocks, and prompt
   * tokens computed over both (first admissions only).
   */
  prefills?: number;
  prefixReuses?: number;
  prefillTokens?: number;
  computedTokens: number;
  /** Total GPU time of engine steps in ms (timestamp queries), or null where unsupported. */
  gpuBusyMs?: number | null;
  /** Decoder readers whose model counts them: steps per decode path. */
  decodePaths?: DecodePathCounts;
}

/** The operations every reader serves, whatever its type and transport. */
export interface BaseReaderApi {
  info(): ReaderInfo;
  cancel(id: string): Promise<boolean>;
  tokenize(text: string, opts?: { addSpecialTokens?: boolean }): Promise<{ ids: number[]; tokens: string[] }>;
  detokenize(ids: number[], opts?: { skipSpecialTokens?: boolean }): Promise<string>;
  chatTemplate(messages: ChatMessage[], opts?: { addGenerationPrompt?: boolean; tools?: unknown[] }): Promise<string>;
  /** The model's config.json (or the GGUF-derived equivalent). */
  modelConfig(): Promise<unknown>;
  stats(): Promise<ReaderStats>;
}

/** The operations every generative reader serves, whatever the transport. */
export interface ReaderApi extends BaseReaderApi {
  generate(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<GenerationEvent>;
}

/** One encoder input: a text, or a (text, text) pair for cross-encoders. */
export type EncoderInput = string | [string, string];

/** Per call; `signal` stays on its side of a transport (RemoteReader forwards aborts as `cancel`). */
export interface EncoderCallOptions {
  signal?: AbortSignal;
}

export interface EmbedResult {
  /** One vector per text, in input order. */
  vectors: number[][];
  dims: number;
  /** Per text: tokens were dropped to fit the model's limit. */
  truncated: boolean[];
  /** Per text: tokens run through the model, specials included. */
  tokens: number[];
}

export interface RerankResult {
  /** Relevance per document, in input order. */
  scores: number[];
  /** Every document, best first (ties: lower index first). */
  ranking: { index: number; score: number }[];
}

export interface ClassifyResult {
  label: string;
  score: number;
  scores: Record<string, number>;
}

/** The operations an encoder reader serves (embedding models, classifiers, cross-encoders). */
export interface EncoderReaderApi extends BaseReaderApi {
  /** `normalize`: true forces L2 normalization, false skips a Normalize module, absent = the model's own pipeline. */
  embed(texts: string[], opts?: EncoderCallOptions & { normalize?: boolean }): Promise<EmbedResult>;
  rerank(query: string, documents: string[], opts?: EncoderCallOptions): Promise<RerankResult>;
  classify(inputs: EncoderInput[], opts?: EncoderCallOptions): Promise<ClassifyResult[]>;
}

/** Any reader. */
export type AnyReaderApi = ReaderApi | EncoderReaderApi;

/** Compiles a constraint request into a fresh per-request TokenConstraint. */
/** Compiles a constraint for a request: at once, or (compiled off the reader's thread) as a Promise. */
export type ConstraintCompiler = (c: ConstraintRequest, signal?: AbortSignal) => TokenConstraint | Promise<TokenConstraint>;

export function validateRequest(req: GenerateRequest): void {
  const intField = (v: unknown, name: string, min: number, max = 1 << 30): void => {
    if (v === undefined) return;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
      throw new InvalidRequestError(`invalid_${name}`, `${name} must be an integer in [${min}, ${max}]`, { field: name });
    }
  };
  intField(req.maxNewTokens, 'max_new_tokens', 1, 1 << 20);
  intField(req.minNewTokens, 'min_new_tokens', 0, 1 << 20);
  intField(req.noRepeatNgramSize, 'no_repeat_ngram_size', 0, 1024);
  intField(req.promptMaxTokens, 'prompt_max_tokens', 1, 1 << 24);
  intField(req.logprobs, 'logprobs', 0, 20);
  intField(req.promptLogprobs, 'prompt_logprobs', 0, 20);
  if (req.stop !== undefined && (!Array.isArray(req.stop) || req.stop.some((s) => typeof s !== 'string' || s.length === 0))) {
    throw new InvalidRequestError('invalid_stop', 'stop must be a list of non-empty strings', { field: 'stop' });
  }
}
