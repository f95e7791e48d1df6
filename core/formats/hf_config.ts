/**
 * Hugging Face `config.json` / `generation_config.json` -> normalized, typed configs.
 *
 * Decoder LMs (Llama, Mistral, Qwen2, Qwen3) become one `DecoderConfig` the
 * model code can use without caring where it came from (GGUF metadata maps to
 * the same type, see gguf.ts). Missing fields get the defaults transformers'
 * config classes apply for that architecture, so a sparse config means the
 * same thing here as in PyTorch. Encoders (BERT, RoBERTa, XLM-R) get a
 * separate `EncoderConfig`. Wrong types raise ModelFormatError; features we do
 * not implement (unknown rope scaling, mixed sliding-window layers) raise
 * UnsupportedModelError rather than silently computing something else.
 */
import { ModelFormatError, UnsupportedModelError } from '../errors.ts';

export type RopeScaling =
  | null
  | { type: 'linear'; factor: number }
  | { type: 'llama3'; factor: number; lowFreqFactor: number; highFreqFactor: number; originalMaxPositionEmbeddings: number };

export interface DecoderConfig {
  /** HF class name, e.g. "LlamaForCausalLM". */
  architecture: string;
  hiddenSize: number;
  layers: number;
  heads: number;
  kvHeads: number;
  /** Per-head width in elements; q is [heads * headDim], k/v are [kvHeads * headDim]. */
  headDim: number;
  intermediateSize: number;
  vocabSize: number;
  maxPositions: number;
  rmsEps: number;
  ropeTheta: number;
  ropeScaling: RopeScaling;
  /** lm_head shares the embedding matrix. */
  tieEmbeddings: boolean;
  /** q/k/v projections have biases (Qwen2 always; Llama when attention_bias). */
  attentionBias: boolean;
  /** Per-head RMSNorm on q and k before rope (Qwen3). */
  qkNorm: boolean;
  /** Attention window in tokens for every layer, or null for full attention. */
  slidingWindow: number | null;
  hiddenAct: string;
  bosTokenId: number | null;
  eosTokenIds: number[];
  /** "float32", "bfloat16", ... as saved; null when unknown. */
  torchDtype: string | null;
}

export const SUPPORTED_DECODERS = [
  'LlamaForCausalLM',
  'MistralForCausalLM',
  'Qwen2ForCausalLM',
  'Qwen3ForCausalLM',
] as const;
export type DecoderArchitecture = (typeof SUPPORTED_DECODERS)[number];

type Json = Record<string, unknown>;

/** transformers' per-class defaults for fields a config may omit. */
interface ArchDefaults {
  vocab: number;
  hidden: number;
  inter: number;
  layers: number;
  heads: number;
  /** undefined: same as heads. */
  kvHeads?: number;
  /** undefined: hidden / heads. */
  headDim?: number;
  maxPos: number;
  bos: number | null;
  eos: number | null;
  qkvBias: 'config' | true;
  qkNorm: boolean;
  window: 'mistral' | 'qwen' | 'none';
}

const DEFAULTS: Record<DecoderArchitecture, ArchDefaults> = {
  LlamaForCausalLM: { vocab: 32000, hidden: 4096, inter: 11008, layers: 32, heads: 32, maxPos: 2048, bos: 1, eos: 2, qkvBias: 'config', qkNorm: false, window: 'none' },
  MistralForCausalLM: { vocab: 32000, hidden: 4096, inter: 14336, layers: 32, heads: 32, kvHeads: 8, maxPos: 131072, bos: 1, eos: 2, qkvBias: 'config', qkNorm: false, window: 'mistral' },
  Qwen2ForCausalLM: { vocab: 151936, hidden: 4096, inter: 22016, layers: 32, heads: 32, kvHeads: 32, maxPos: 32768, bos: null, eos: null, qkvBias: true, qkNorm: false, window: 'qwen' },
  Qwen3ForCausalLM: { vocab: 151936, hidden: 4096, inter: 22016, layers: 32, heads: 32, kvHeads: 32, headDim: 128, maxPos: 32768, bos: null, eos: null, qkvBias: 'config', qkNorm: true, window: 'qwen' },
};

const MODEL_TYPES: Record<string, DecoderArchitecture> = {
  llama: 'LlamaForCausalLM',
  mistral: 'MistralForCausalLM',
  qwen2: 'Qwen2ForCausalLM',
  qwen3: 'Qwen3ForCausalLM',
};

// ---- typed field access ---------------------------------------------------

function bad(key: string, want: string, v: unknown): never {
  throw new ModelFormatError(`config.json: ${key} must be ${want}, got ${JSON.stringify(v)}`, { key });
}
function int(c: Json, key: string, dflt: number, min = 1): number {
  const v = c[key];
  if (v === undefined || v === null) return dflt;
  if (!Number.isSafeInteger(v) || (v as number) < min) bad(key, `an integer >= ${min}`, v);
  return v as number;
}
function num(c: Json, key: string, dflt: number): number {
  const v = c[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !Number.isFinite(v)) bad(key, 'a finite number', v);
  return v;
}
function bool(c: Json, key: string, dflt: boolean): boolean {
  const v = c[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'boolean') bad(key, 'a boolean', v);
  return v;
}
function str(c: Json, key: string, dflt: string | null): string | null {
  const v = c[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'string') bad(key, 'a string', v);
  return v;
}
/** A token id or list of ids -> number[] (null/absent -> the default). */
export function tokenIds(v: unknown, key: string, dflt: number | null): number[] {
  if (v === undefined || v === null) return dflt === null ? [] : [dflt];
  const arr = Array.isArray(v) ? v : [v];
  if (!arr.every((x) => Number.isSafeInteger(x) && x >= 0)) bad(key, 'a token id or a list of token ids', v);
  return arr as number[];
}
function asObject(v: unknown, what: string): Json {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new ModelFormatError(`${what} must be a JSON object`);
  }
  return v as Json;
}

// ---- rope -----------------------------------------------------------------

/** rope_scaling (or v5 rope_parameters), keyed by `rope_type` or legacy `type`. */
export function parseRopeScaling(v: unknown): RopeScaling {
  if (v === undefined || v === null) return null;
  const r = asObject(v, 'rope_scaling');
  const type = r.rope_type ?? r.type;
  if (type === undefined || type === 'default') return null;
  if (type === 'linear') return { type: 'linear', factor: num(r, 'factor', 1) };
  if (type === 'llama3') {
    return {
      type: 'llama3',
      factor: num(r, 'factor', 8),
      lowFreqFactor: num(r, 'low_freq_factor', 1),
      highFreqFactor: num(r, 'high_freq_factor', 4),
      originalMaxPositionEmbeddings: int(r, 'original_max_position_embeddings', 8192),
    };
  }
  throw new UnsupportedModelError(`rope scaling type ${JSON.stringify(type)} is not supported; supported: linear, llama3`, {
    ropeType: type,
  });
}

// ---- decoders -------------------------------------------------------------

/** The HF class a config is for: architectures[0], else the model_type's causal-LM class. */
export function configArchitecture(c: Json): string | undefined {
  const a = c.architectures;
  if (Array.isArray(a) && typeof a[0] === 'string') return a[0];
  return typeof c.model_type === 'string' ? (MODEL_TYPES[c.model_type] ?? c.model_type) : undefined;
}

/** Parses a decoder LM's config.json (object or text). */
export function parseDecoderConfig(json: unknown): DecoderConfig {
  const c = asObject(typeof json === 'string' ? parseJsonText(json, 'config.json') : json, 'config.json');
  const arch = configArchitecture(c);
  if (!arch || !(SUPPORTED_DECODERS as readonly string[]).includes(arch)) {
    throw new UnsupportedModelError(
      `unsupported model architecture ${JSON.stringify(arch ?? null)}; supported decoders: ${SUPPORTED_DECODERS.join(', ')}`,
      { architecture: arch ?? null, supported: [...SUPPORTED_DECODERS] },
    );
  }
  const d = DEFAULTS[arch as DecoderArchitecture];
  const hiddenSize = int(c, 'hidden_size', d.hidden);
  const heads = int(c, 'num_attention_heads', d.heads);
  const kvHeads = int(c, 'num_key_value_heads', d.kvHeads ?? heads);
  if (d.headDim === undefined && c.head_dim == null && hiddenSize % heads !== 0) {
    throw new ModelFormatError(`config.json: hidden_size ${hiddenSize} is not a multiple of num_attention_heads ${heads}`);
  }
  const headDim = int(c, 'head_dim', d.headDim ?? hiddenSize / heads);
  if (heads % kvHeads !== 0) {
    throw new ModelFormatError(`config.json: num_attention_heads ${heads} is not a multiple of num_key_value_heads ${kvHeads}`);
  }
  const layers = int(c, 'num_hidden_layers', d.layers);

  // transformers v5 folds rope_theta into rope_parameters; accept both.
  const rp = c.rope_parameters == null ? undefined : asObject(c.rope_parameters, 'rope_parameters');
  const ropeTheta = num(c, 'rope_theta', rp ? num(rp, 'rope_theta', 10000) : 10000);
  const ropeScaling = parseRopeScaling(c.rope_scaling ?? rp);

  let slidingWindow: number | null = null;
  if (d.window === 'mistral') {
    // transformers would default an absent sliding_window to 4096; real Mistral configs
    // always set it (4096 for v0.1, null from v0.2 on), so absent is read as disabled.
    const w = int(c, 'sliding_window', 0, 0);
    slidingWindow = w > 0 ? w : null;
  } else if (d.window === 'qwen' && bool(c, 'use_sliding_window', false)) {
    const w = int(c, 'sliding_window', 4096);
    const from = int(c, 'max_window_layers', 28, 0);
    if (from < layers && from > 0) {
      throw new UnsupportedModelError(`sliding window on layers ${from}..${layers - 1} only is not supported`, {
        maxWindowLayers: from,
      });
    }
    slidingWindow = from === 0 ? w : null;
  }
  const lt = c.layer_types;
  if (Array.isArray(lt)) {
    const sliding = lt.filter((t) => t === 'sliding_attention').length;
    if (sliding === 0) slidingWindow = null;
    else if (sliding !== lt.length) {
      throw new UnsupportedModelError('configs mixing sliding and full attention layers (layer_types) are not supported');
    } else if (slidingWindow === null) slidingWindow = int(c, 'sliding_window', 4096);
  }

  return {
    architecture: arch,
    hiddenSize,
    layers,
    heads,
    kvHeads,
    headDim,
    intermediateSize: int(c, 'intermediate_size', d.inter),
    vocabSize: int(c, 'vocab_size', d.vocab),
    maxPositions: int(c, 'max_position_embeddings', d.maxPos),
    rmsEps: num(c, 'rms_norm_eps', 1e-6),
    ropeTheta,
    ropeScaling,
    tieEmbeddings: bool(c, 'tie_word_embeddings', false),
    attentionBias: d.qkvBias === true ? true : bool(c, 'attention_bias', false),
    qkNorm: d.qkNorm,
    slidingWindow,
    hiddenAct: str(c, 'hidden_act', 'silu')!,
    bosTokenId: c.bos_token_id === undefined ? d.bos : c.bos_token_id === null ? null : int(c, 'bos_token_id', 0, 0),
    eosTokenIds: tokenIds(c.eos_token_id, 'eos_token_id', c.eos_token_id === null ? null : d.eos),
    torchDtype: str(c, 'torch_dtype', str(c, 'dtype', null)),
  };
}

function parseJsonText(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new ModelFormatError(`${what} is not valid JSON: ${(e as Error).message}`);
  }
}

// ---- generation_config.json -------------------------------------------------

export interface GenerationDefaults {
  bosTokenId?: number;
  eosTokenIds: number[];
  /** false means the model's authors intend greedy decoding (sampling fields then unused by HF). */
  doSample?: boolean;
  temperature?: number;
  topK?: number;
  topP?: number;
  repetitionPenalty?: number;
  maxNewTokens?: number;
  /** Prompt + generated tokens cap (HF `max_length`). */
  maxLength?: number;
}

export function parseGenerationConfig(json: unknown): GenerationDefaults {
  const c = asObject(typeof json === 'string' ? parseJsonText(json, 'generation_config.json') : json, 'generation_config.json');
  const out: GenerationDefaults = { eosTokenIds: tokenIds(c.eos_token_id, 'eos_token_id', null) };
  if (c.bos_token_id != null) out.bosTokenId = int(c, 'bos_token_id', 0, 0);
  if (c.do_sample != null) out.doSample = bool(c, 'do_sample', false);
  if (c.temperature != null) out.temperature = num(c, 'temperature', 1);
  if (c.top_k != null) out.topK = int(c, 'top_k', 0, 0);
  if (c.top_p != null) out.topP = num(c, 'top_p', 1);
  if (c.repetition_penalty != null) out.repetitionPenalty = num(c, 'repetition_penalty', 1);
  if (c.max_new_tokens != null) out.maxNewTokens = int(c, 'max_new_tokens', 1);
  if (c.max_length != null) out.maxLength = int(c, 'max_length', 1);
  return out;
}

// ---- encoders (room for embedding models) -----------------------------------

export const SUPPORTED_ENCODERS = ['BertModel', 'RobertaModel', 'XLMRobertaModel'] as const;

export interface EncoderConfig {
  architecture: string;
  hiddenSize: number;
  layers: number;
  heads: number;
  intermediateSize: number;
  vocabSize: number;
  maxPositions: number;
  typeVocabSize: number;
  layerNormEps: number;
  hiddenAct: string;
  positionEmbeddingType: string;
  padTokenId: number | null;
  /** Position ids start at pad_token_id + 1 for (XLM-)RoBERTa, 0 for BERT. */
  positionOffset: number;
}

const ENCODER_TYPES: Record<string, string> = { bert: 'BertModel', roberta: 'RobertaModel', 'xlm-roberta': 'XLMRobertaModel' };

export function parseEncoderConfig(json: unknown): EncoderConfig {
  const c = asObject(typeof json === 'string' ? parseJsonText(json, 'config.json') : json, 'config.json');
  const mt = typeof c.model_type === 'string' ? ENCODER_TYPES[c.model_type] : undefined;
  const listed = Array.isArray(c.architectures) ? (c.architectures[0] as unknown) : undefined;
  // Heads (BertForMaskedLM, XLMRobertaForSequenceClassification...) share the encoder body.
  const arch = SUPPORTED_ENCODERS.find((a) => typeof listed === 'string' && listed.startsWith(a.replace(/Model$/, ''))) ?? mt;
  if (!arch) {
    throw new UnsupportedModelError(
      `unsupported encoder architecture ${JSON.stringify(listed ?? c.model_type ?? null)}; supported encoders: ${SUPPORTED_ENCODERS.join(', ')}`,
      { supported: [...SUPPORTED_ENCODERS] },
    );
  }
  const roberta = arch !== 'BertModel';
  const pad = c.pad_token_id === null ? null : int(c, 'pad_token_id', roberta ? 1 : 0, 0);
  return {
    architecture: arch,
    hiddenSize: int(c, 'hidden_size', 768),
    layers: int(c, 'num_hidden_layers', 12),
    heads: int(c, 'num_attention_heads', 12),
    intermediateSize: int(c, 'intermediate_size', 3072),
    vocabSize: int(c, 'vocab_size', roberta ? 50265 : 30522),
    maxPositions: int(c, 'max_position_embeddings', 512),
    typeVocabSize: int(c, 'type_vocab_size', 2),
    layerNormEps: num(c, 'layer_norm_eps', 1e-12),
    hiddenAct: str(c, 'hidden_act', 'gelu')!,
    positionEmbeddingType: str(c, 'position_embedding_type', 'absolute')!,
    padTokenId: pad,
    positionOffset: roberta && pad !== null ? pad + 1 : 0,
  };
}
