/**
 * Universal Sentence Encoder Lite as a Weft model directory: config.json (written by the
 * converter, convert.ts), model.safetensors (tensor names below) and vocab.json (the
 * package's, verbatim). This file parses and validates config.json; the architecture
 * itself is described in forward.ts.
 *
 * config.json (snake_case on disk):
 *   architectures ["UniversalSentenceEncoderLite"], model_type "use_lite",
 *   vocab_size (tokenizer pieces), embedding_rows, embedding_size (E), hidden_size (D),
 *   intermediate_size, embedding_scale (the token row's multiplier: 2, see forward.ts),
 *   max_tokens (the graph's ClipToMaxLength), layer_norm_eps, l2_eps,
 *   layers: [{ input_size, heads, head_dim, attn_scale, residual_projection }],
 *   source: { package, version }, converter_version.
 *
 * model.safetensors, all f32, linear weights [out, in] (our matmul layout):
 *   embeddings.word.weight [rows, E], embeddings.timing.inv_timescales [E/2],
 *   layers.L.{attn_norm, ffn_norm}.{weight, bias}, layers.L.attn.qkv.{weight, bias} [3A, in],
 *   layers.L.attn.out [D, A], layers.L.residual [D, in] (when residual_projection),
 *   layers.L.ffn.in [I, D], layers.L.ffn.out [D, I], head.{weight, bias} [D_out, D].
 */
import { ModelFormatError, UnsupportedModelError } from '../../errors.ts';

export const USE_LITE_ARCHITECTURE = 'UniversalSentenceEncoderLite';
/** Bumped when the converter's output changes; stale directories are converted again. */
export const USE_LITE_CONVERTER_VERSION = 1;

export interface UseLayerConfig {
  /** Width of the layer's input (E for the first layer, D after). */
  inputSize: number;
  heads: number;
  headDim: number;
  /** Multiplier of q before q.k (the graph's constant, 1/sqrt(headDim) as f32). */
  attnScale: number;
  /** The residual path goes through a dense [D, inputSize] (first layer: E != D). */
  residualProjection: boolean;
}

export interface UseLiteConfig {
  architecture: string;
  /** Tokenizer pieces (vocab.json entries); ids are below this. */
  vocabSize: number;
  /** Rows of the embedding table (>= vocabSize). */
  embeddingRows: number;
  embeddingSize: number;
  hiddenSize: number;
  intermediateSize: number;
  embeddingScale: number;
  /** Tokens past this many are dropped (the graph's ClipToMaxLength). */
  maxTokens: number;
  layerNormEps: number;
  /** Output = v * rsqrt(max(|v|^2, l2Eps)). */
  l2Eps: number;
  /** Width of the output vectors (the tanh head). */
  outputSize: number;
  layers: UseLayerConfig[];
  source: { package: string; version: string };
  converterVersion: number;
}

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** True when a parsed config.json names this architecture (used to pick the loader). */
export function isUseLiteConfig(raw: unknown): boolean {
  return isObj(raw) && Array.isArray(raw.architectures) && raw.architectures[0] === USE_LITE_ARCHITECTURE;
}

/** UseLiteConfig -> config.json content. */
export function useLiteConfigJson(c: UseLiteConfig): Json {
  return {
    architectures: [c.architecture],
    model_type: 'use_lite',
    vocab_size: c.vocabSize,
    embedding_rows: c.embeddingRows,
    embedding_size: c.embeddingSize,
    hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize,
    output_size: c.outputSize,
    embedding_scale: c.embeddingScale,
    max_tokens: c.maxTokens,
    layer_norm_eps: c.layerNormEps,
    l2_eps: c.l2Eps,
    hidden_act: 'relu',
    pooling: 'mean',
    head_act: 'tanh',
    layers: c.layers.map((l) => ({
      input_size: l.inputSize,
      heads: l.heads,
      head_dim: l.headDim,
      attn_scale: l.attnScale,
      residual_projection: l.residualProjection,
    })),
    source: c.source,
    converter_version: c.converterVersion,
    license: 'Apache-2.0',
  };
}

function num(o: Json, k: string, what = 'config.json', integer = true): number {
  const v = o[k];
  if (typeof v !== 'number' || !Number.isFinite(v) || (integer && (!Number.isSafeInteger(v) || v <= 0))) {
    throw new ModelFormatError(`${what}: ${k} must be ${integer ? 'a positive integer' : 'a number'}`, { field: k });
  }
  return v;
}

/** config.json content -> UseLiteConfig, with the invariants forward.ts relies on. */
export function parseUseLiteConfig(raw: unknown): UseLiteConfig {
  if (!isUseLiteConfig(raw)) throw new UnsupportedModelError(`config.json does not describe ${USE_LITE_ARCHITECTURE}`);
  const o = raw as Json;
  const layersRaw = o.layers;
  if (!Array.isArray(layersRaw) || layersRaw.length === 0) throw new ModelFormatError('config.json: layers must be a non-empty list');
  const layers = layersRaw.map((l, i): UseLayerConfig => {
    if (!isObj(l)) throw new ModelFormatError(`config.json: layers[${i}] must be an object`);
    const what = `config.json layers[${i}]`;
    return {
      inputSize: num(l, 'input_size', what),
      heads: num(l, 'heads', what),
      headDim: num(l, 'head_dim', what),
      attnScale: num(l, 'attn_scale', what, false),
      residualProjection: l.residual_projection === true,
    };
  });
  const src = isObj(o.source) ? o.source : {};
  const c: UseLiteConfig = {
    architecture: USE_LITE_ARCHITECTURE,
    vocabSize: num(o, 'vocab_size'),
    embeddingRows: num(o, 'embedding_rows'),
    embeddingSize: num(o, 'embedding_size'),
    hiddenSize: num(o, 'hidden_size'),
    intermediateSize: num(o, 'intermediate_size'),
    outputSize: num(o, 'output_size'),
    embeddingScale: num(o, 'embedding_scale', 'config.json', false),
    maxTokens: num(o, 'max_tokens'),
    layerNormEps: num(o, 'layer_norm_eps', 'config.json', false),
    l2Eps: num(o, 'l2_eps', 'config.json', false),
    layers,
    source: { package: String(src.package ?? ''), version: String(src.version ?? '') },
    converterVersion: typeof o.converter_version === 'number' ? o.converter_version : 0,
  };
  if (c.vocabSize > c.embeddingRows) throw new ModelFormatError(`config.json: vocab_size ${c.vocabSize} exceeds embedding_rows ${c.embeddingRows}`);
  if (c.embeddingSize % 2 !== 0) throw new ModelFormatError('config.json: embedding_size must be even (sin | cos timing halves)');
  layers.forEach((l, i) => {
    const want = i === 0 ? c.embeddingSize : c.hiddenSize;
    if (l.inputSize !== want) throw new ModelFormatError(`config.json: layers[${i}].input_size is ${l.inputSize}, expected ${want}`);
    if (i > 0 && l.residualProjection) throw new UnsupportedModelError(`config.json: only the first layer may project its residual (layers[${i}])`);
    if (!l.residualProjection && l.inputSize !== c.hiddenSize) throw new ModelFormatError(`config.json: layers[${i}] changes width without a residual projection`);
    if (l.headDim % 4 !== 0) throw new UnsupportedModelError(`config.json: layers[${i}] head_dim ${l.headDim} is not a multiple of 4`);
  });
  return c;
}
