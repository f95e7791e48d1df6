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
  | { type: 'llama3'; factor: number; lowFreqFactor: number; highFreqFactor: number; originalMaxPositionEmbeddings: number }
  /** Per-frequency divisors [headDim / 2] (llama.cpp's `rope_freqs` tensor: llama3 scaling stored in a GGUF). */
  | { type: 'factors'; factors: number[] }
  /**
   * Phi-3 "longrope" (legacy "su"): per-frequency divisors, `short` for contexts up to
   * originalMaxPositionEmbeddings and `long` beyond, and cos/sin multiplied by
   * attentionFactor (so q.k by its square). Which set a model runs with is decided once,
   * by its context limit (core/models/llama/variant.ts).
   */
  | { type: 'longrope'; shortFactor: number[]; longFactor: number[]; originalMaxPositionEmbeddings: number; attentionFactor: number };

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
  // ---- Gemma 2 / Gemma 3 / Phi-3 (absent: the Llama behaviour) ----
  /** Gemma: every RMSNorm weight is stored as (w - 1) and applied as (1 + w) (the loader adds the 1). */
  normAddOne?: boolean;
  /**
   * Gemma 2/3: post_attention_layernorm and post_feedforward_layernorm norm the attention and
   * MLP outputs before each residual add; pre_feedforward_layernorm is the MLP's input norm.
   */
  sandwichNorms?: boolean;
  /** Multiplier of the token embeddings (Gemma: sqrt(hidden_size), rounded to the checkpoint dtype). */
  embedScale?: number;
  /** Multiplier of q.k (Gemma: query_pre_attn_scalar^-0.5); default 1 / sqrt(headDim). */
  attnScale?: number;
  /** Gemma 2 attention-logit soft-capping: score = cap * tanh(score / cap). */
  attnSoftcap?: number;
  /** Gemma 2 final-logit soft-capping: logit = cap * tanh(logit / cap). */
  finalSoftcap?: number;
  /** Per layer: whether it uses `slidingWindow` (Gemma's alternating local/global layers); absent: all layers. */
  slidingLayers?: boolean[];
  /** Gemma 3: the rope of the sliding (local) layers; the full layers use ropeTheta / ropeScaling. */
  localRope?: { theta: number; scaling: RopeScaling };
  /** Phi-3: q/k/v stored as one qkv_proj and gate/up as one gate_up_proj. */
  fusedProjections?: boolean;
}

export const SUPPORTED_DECODERS = [
  'LlamaForCausalLM',
  'MistralForCausalLM',
  'Qwen2ForCausalLM',
  'Qwen3ForCausalLM',
  'Gemma2ForCausalLM',
  'Gemma3ForCausalLM',
  'Phi3ForCausalLM',
] as const;
export type DecoderArchitecture = (typeof SUPPORTED_DECODERS)[number];

type Json = Record<string, unknown>;

/** Gated-MLP activations the decoder implements (HF hidden_act names). */
const DECODER_ACTS = ['silu', 'swish', 'gelu_pytorch_tanh', 'gelu_tanh', 'gelu_new', 'gelu_fast', 'gelu'];

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
  window: 'mistral' | 'qwen' | 'gemma' | 'none';
  /** rope_theta when absent (10000 unless listed). */
  theta?: number;
  act?: string;
  tie?: boolean;
}

const DEFAULTS: Record<DecoderArchitecture, ArchDefaults> = {
  LlamaForCausalLM: { vocab: 32000, hidden: 4096, inter: 11008, layers: 32, heads: 32, maxPos: 2048, bos: 1, eos: 2, qkvBias: 'config', qkNorm: false, window: 'none' },
  MistralForCausalLM: { vocab: 32000, hidden: 4096, inter: 14336, layers: 32, heads: 32, kvHeads: 8, maxPos: 131072, bos: 1, eos: 2, qkvBias: 'config', qkNorm: false, window: 'mistral' },
  Qwen2ForCausalLM: { vocab: 151936, hidden: 4096, inter: 22016, layers: 32, heads: 32, kvHeads: 32, maxPos: 32768, bos: null, eos: null, qkvBias: true, qkNorm: false, window: 'qwen' },
  Qwen3ForCausalLM: { vocab: 151936, hidden: 4096, inter: 22016, layers: 32, heads: 32, kvHeads: 32, headDim: 128, maxPos: 32768, bos: null, eos: null, qkvBias: 'config', qkNorm: true, window: 'qwen' },
  Gemma2ForCausalLM: { vocab: 256000, hidden: 2304, inter: 9216, layers: 26, heads: 8, kvHeads: 4, headDim: 256, maxPos: 8192, bos: 2, eos: 1, qkvBias: 'config', qkNorm: false, window: 'gemma', act: 'gelu_pytorch_tanh', tie: true },
  Gemma3ForCausalLM: { vocab: 262208, hidden: 2304, inter: 9216, layers: 26, heads: 8, kvHeads: 4, headDim: 256, maxPos: 131072, bos: 2, eos: 1, qkvBias: 'config', qkNorm: true, window: 'gemma', theta: 1000000, act: 'gelu_pytorch_tanh', tie: true },
  Phi3ForCausalLM: { vocab: 32064, hidden: 3072, inter: 8192, layers: 32, heads: 32, maxPos: 4096, bos: 1, eos: 32000, qkvBias: 'config', qkNorm: false, window: 'mistral' },
};

const MODEL_TYPES: Record<string, DecoderArchitecture> = {
  llama: 'LlamaForCausalLM',
  mistral: 'MistralForCausalLM',
  qwen2: 'Qwen2ForCausalLM',
  qwen3: 'Qwen3ForCausalLM',
  gemma2: 'Gemma2ForCausalLM',
  gemma3_text: 'Gemma3ForCausalLM',
  phi3: 'Phi3ForCausalLM',
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

/** The config fields longrope reads besides rope_scaling itself. */
export interface RopeContext {
  maxPositions: number;
  /** Top-level original_max_position_embeddings (Phi-3), if any. */
  originalMaxPositions?: number;
  headDim: number;
}

/** A list of `n` positive finite numbers under rope_scaling[key]. */
function factorList(r: Json, key: string, n: number): number[] {
  const v = r[key];
  if (!Array.isArray(v) || v.length !== n || !v.every((x) => typeof x === 'number' && Number.isFinite(x) && x > 0)) {
    bad(`rope_scaling.${key}`, `a list of ${n} positive numbers (head_dim / 2)`, v);
  }
  return v as number[];
}

/** rope_scaling (or v5 rope_parameters), keyed by `rope_type` or legacy `type`. */
export function parseRopeScaling(v: unknown, ctx?: RopeContext): RopeScaling {
  if (v === undefined || v === null) return null;
  const r = asObject(v, 'rope_scaling');
  const type = r.rope_type ?? r.type;
  if (type === undefined || type === 'default') return null;
  if (type === 'linear') return { type: 'linear', factor: num(r, 'factor', 1) };
  if ((type === 'longrope' || type === 'su') && ctx) {
    // transformers' _compute_longrope_parameters: with a top-level original_max_position_embeddings
    // (Phi-3) the scale is max_position_embeddings / original, else rope_scaling.factor.
    const original = ctx.originalMaxPositions ?? int(r, 'original_max_position_embeddings', ctx.maxPositions);
    const factor = ctx.originalMaxPositions !== undefined ? ctx.maxPositions / ctx.originalMaxPositions : num(r, 'factor', 1);
    const given = r.attention_factor == null ? undefined : num(r, 'attention_factor', 1);
    const attentionFactor = given ?? (factor <= 1 ? 1 : Math.sqrt(1 + Math.log(factor) / Math.log(original)));
    const half = ctx.headDim / 2;
    return { type: 'longrope', shortFactor: factorList(r, 'short_factor', half), longFactor: factorList(r, 'long_factor', half), originalMaxPositionEmbeddings: original, attentionFactor };
  }
  if (type === 'llama3') {
    return {
      type: 'llama3',
      factor: num(r, 'factor', 8),
      lowFreqFactor: num(r, 'low_freq_factor', 1),
      highFreqFactor: num(r, 'high_freq_factor', 4),
      originalMaxPositionEmbeddings: int(r, 'original_max_position_embeddings', 8192),
    };
  }
  throw new UnsupportedModelError(`rope scaling type ${JSON.stringify(type)} is not supported; supported: linear, llama3, longrope (Phi-3)`, {
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

  const maxPositions = int(c, 'max_position_embeddings', d.maxPos);
  // transformers v5 folds rope_theta into rope_parameters; accept both.
  const rp = c.rope_parameters == null ? undefined : asObject(c.rope_parameters, 'rope_parameters');
  const ropeTheta = num(c, 'rope_theta', rp ? num(rp, 'rope_theta', d.theta ?? 10000) : (d.theta ?? 10000));
  const ropeCtx: RopeContext = { maxPositions, headDim, ...(c.original_max_position_embeddings != null ? { originalMaxPositions: int(c, 'original_max_position_embeddings', maxPositions) } : {}) };
  const ropeScaling = parseRopeScaling(c.rope_scaling ?? rp, ropeCtx);
  if (c.partial_rotary_factor != null && num(c, 'partial_rotary_factor', 1) !== 1) {
    throw new UnsupportedModelError(`partial rotary (partial_rotary_factor ${String(c.partial_rotary_factor)}) is not supported`);
  }

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
  const extras: Partial<DecoderConfig> = {};
  if (d.window === 'gemma') {
    Object.assign(extras, gemmaExtras(c, arch as DecoderArchitecture, hiddenSize, layers));
    slidingWindow = extras.slidingLayers?.some((x) => x) ? int(c, 'sliding_window', 4096) : null;
  } else if (Array.isArray(lt)) {
    const sliding = lt.filter((t) => t === 'sliding_attention').length;
    if (sliding === 0) slidingWindow = null;
    else if (sliding !== lt.length) {
      throw new UnsupportedModelError('configs mixing sliding and full attention layers (layer_types) are not supported');
    } else if (slidingWindow === null) slidingWindow = int(c, 'sliding_window', 4096);
  }

  const act = d.act ? str(c, 'hidden_activation', d.act)! : str(c, 'hidden_act', 'silu')!;
  if (!DECODER_ACTS.includes(act)) {
    throw new UnsupportedModelError(`MLP activation ${JSON.stringify(act)} is not supported; supported: ${DECODER_ACTS.join(', ')}`, { hiddenAct: act });
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
    maxPositions,
    rmsEps: num(c, 'rms_norm_eps', 1e-6),
    ropeTheta,
    ropeScaling,
    tieEmbeddings: bool(c, 'tie_word_embeddings', d.tie ?? false),
    attentionBias: d.qkvBias === true ? true : bool(c, 'attention_bias', false),
    qkNorm: d.qkNorm,
    slidingWindow,
    // Gemma names it hidden_activation (its hidden_act, if present, is ignored by transformers).
    hiddenAct: act,
    bosTokenId: c.bos_token_id === undefined ? d.bos : c.bos_token_id === null ? null : int(c, 'bos_token_id', 0, 0),
    eosTokenIds: tokenIds(c.eos_token_id, 'eos_token_id', c.eos_token_id === null ? null : d.eos),
    torchDtype: str(c, 'torch_dtype', str(c, 'dtype', null)),
    ...extras,
    ...(arch === 'Phi3ForCausalLM' ? { fusedProjections: true } : {}),
  };
}

/** Round to the nearest bfloat16 (ties to even), as a scalar tensor of that dtype holds it. */
function toBf16(v: number): number {
  const f = new Float32Array([v]);
  const u = new Uint32Array(f.buffer);
  u[0] = ((u[0]! + 0x7fff + ((u[0]! >>> 16) & 1)) >>> 16) << 16;
  return f[0]!;
}

/** Round a positive normal number to the nearest float16 (11 significant bits). */
function toF16(v: number): number {
  const q = 2 ** (Math.floor(Math.log2(v)) - 10);
  return Math.round(v / q) * q;
}

/**
 * Gemma 2 / Gemma 3 specifics, as transformers' Gemma2Config / Gemma3TextConfig read them:
 * (1 + w) norms, sandwich norms, the embedding scale sqrt(hidden) (a tensor of the
 * checkpoint's dtype in transformers, so rounded to bf16 / f16 when the weights are), the
 * attention scale query_pre_attn_scalar^-0.5, soft-capping, and which layers slide: from
 * layer_types when given, else Gemma 2 alternates (even layers slide) and Gemma 3 has a full
 * layer every sliding_window_pattern (6) layers. Gemma 3's local layers use
 * rope_local_base_freq (10000) without scaling.
 */
function gemmaExtras(c: Json, arch: DecoderArchitecture, hidden: number, layers: number): Partial<DecoderConfig> {
  const gemma3 = arch === 'Gemma3ForCausalLM';
  const dtype = str(c, 'torch_dtype', str(c, 'dtype', null));
  const root = Math.sqrt(hidden);
  const embedScale = dtype === 'bfloat16' ? toBf16(root) : dtype === 'float16' ? toF16(root) : Math.fround(root);
  const lt = c.layer_types;
  let slidingLayers: boolean[];
  if (Array.isArray(lt)) {
    if (lt.length !== layers || !lt.every((t) => t === 'sliding_attention' || t === 'full_attention')) bad('layer_types', `${layers} entries of "sliding_attention" / "full_attention"`, lt);
    slidingLayers = lt.map((t) => t === 'sliding_attention');
  } else {
    const pattern = gemma3 ? int(c, 'sliding_window_pattern', 6) : 2;
    slidingLayers = Array.from({ length: layers }, (_, i) => (i + 1) % pattern !== 0);
  }
  if (c.sliding_window === null) slidingLayers = slidingLayers.map(() => false);
  const softcap = (key: string, dflt: number | null): number | undefined => {
    const v = c[key] === undefined ? dflt : c[key] === null ? null : num(c, key, 0);
    return v !== null && v > 0 ? v : undefined;
  };
  const attnSoftcap = softcap('attn_logit_softcapping', gemma3 ? null : 50);
  const finalSoftcap = softcap('final_logit_softcapping', gemma3 ? null : 30);
  return {
    normAddOne: true,
    sandwichNorms: true,
    embedScale,
    attnScale: 1 / Math.sqrt(num(c, 'query_pre_attn_scalar', 256)),
    ...(attnSoftcap !== undefined ? { attnSoftcap } : {}),
    ...(finalSoftcap !== undefined ? { finalSoftcap } : {}),
    slidingLayers,
    ...(gemma3 ? { localRope: { theta: num(c, 'rope_local_base_freq', 10000), scaling: null } } : {}),
  };
}

/**
 * What of a config the decode megakernel does not implement (null: plain Llama-family
 * features only); such models take the per-op path.
 */
export function decoderExtras(c: DecoderConfig): string | null {
  const f: string[] = [];
  if (c.normAddOne || c.sandwichNorms) f.push('Gemma norms');
  if (c.embedScale !== undefined) f.push('embedding scale');
  if (c.attnScale !== undefined || c.attnSoftcap !== undefined || c.finalSoftcap !== undefined) f.push('attention scale / soft-capping');
  if (c.slidingLayers || c.localRope) f.push('per-layer attention');
  if (c.ropeScaling?.type === 'longrope') f.push('longrope');
  return f.length ? f.join(', ') : null;
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
