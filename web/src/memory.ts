/**
 * The memory calculator's formula (pure, unit-tested): GPU bytes for a
 * Llama-family decoder's weights in a given dtype, plus its paged KV cache
 * for `batch` sequences of `contextLength` tokens.
 *
 * Weights follow core/models/llama/weights.ts: every matrix (embedding,
 * fused q/k/v, o, fused gate/up, down, an untied lm_head) in the chosen
 * dtype — a quantized dtype falls back to f16 for a matrix whose row length
 * is not a multiple of 32 — and norm vectors in f32. Quantized sizes are
 * GGUF's: q8_0 = 34 bytes per 32 weights, q4_0 = 18 per 32. KV per token =
 * 2 (K and V) × layers × kv heads × row bytes, in 16-token blocks, where a
 * row is head_dim f32s, head_dim halves for the f16 cache, or for the 8-bit
 * cache head_dim int8s plus one f32 scale (core/ops/kv_write.ts).
 */

export type WeightDtype = 'f32' | 'f16' | 'q8_0' | 'q4_0';
export type KvDtype = 'f32' | 'f16' | 'q8';

export const BYTES_PER_WEIGHT: Record<WeightDtype, number> = { f32: 4, f16: 2, q8_0: 34 / 32, q4_0: 18 / 32 };
/** Bytes of one (token, kv head) row of K or V. */
export const kvRowBytes = (headDim: number, kv: KvDtype): number => (kv === 'q8' ? headDim + 4 : kv === 'f16' ? 2 * headDim : 4 * headDim);
export const KV_BLOCK_TOKENS = 16;

export interface ModelShape {
  hidden: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
  vocab: number;
  tie: boolean;
}

export interface MemoryOptions {
  dtype: WeightDtype;
  contextLength: number;
  batch: number;
  kv: KvDtype;
}

export interface MemoryEstimate {
  params: number;
  weightBytes: number;
  kvBytesPerToken: number;
  kvBytes: number;
  totalBytes: number;
}

/** The shape fields of an HF config.json (head_dim defaults to hidden / heads). */
export function shapeFromConfig(c: Record<string, unknown>): ModelShape {
  const num = (...keys: string[]): number | undefined => {
    for (const k of keys) if (typeof c[k] === 'number') return c[k];
    return undefined;
  };
  const need = (...keys: string[]): number => {
    const v = num(...keys);
    if (v === undefined || !Number.isFinite(v) || v <= 0) throw new Error(`config.json has no ${keys[0]}`);
    return v;
  };
  const hidden = need('hidden_size', 'n_embd', 'd_model');
  const heads = need('num_attention_heads', 'n_head');
  return {
    hidden,
    layers: need('num_hidden_layers', 'n_layer'),
    heads,
    kvHeads: num('num_key_value_heads') ?? heads,
    headDim: num('head_dim') ?? hidden / heads,
    intermediate: need('intermediate_size', 'n_inner'),
    vocab: need('vocab_size'),
    tie: c.tie_word_embeddings === true,
  };
}

/** Bytes of one [rows, cols] matrix in `dtype` (with the f16 fallback for rows not a multiple of 32). */
export function matrixBytes(rows: number, cols: number, dtype: WeightDtype): number {
  const d = (dtype === 'q8_0' || dtype === 'q4_0') && cols % 32 !== 0 ? 'f16' : dtype;
  return rows * cols * BYTES_PER_WEIGHT[d];
}

export function estimateMemory(s: ModelShape, o: MemoryOptions): MemoryEstimate {
  const q = s.heads * s.headDim;
  const kv = s.kvHeads * s.headDim;
  const mats: [number, number][] = [[s.vocab, s.hidden]]; // embedding
  for (let l = 0; l < s.layers; l++) {
    mats.push([q + 2 * kv, s.hidden], [s.hidden, q], [2 * s.intermediate, s.hidden], [s.hidden, s.intermediate]);
  }
  if (!s.tie) mats.push([s.vocab, s.hidden]);
  const vectors = (2 * s.layers + 1) * s.hidden; // two norms per layer + the final norm, f32
  const params = mats.reduce((a, [r, c]) => a + r * c, 0) + vectors;
  const weightBytes = mats.reduce((a, [r, c]) => a + matrixBytes(r, c, o.dtype), 0) + vectors * 4;
  const kvBytesPerToken = 2 * s.layers * s.kvHeads * kvRowBytes(s.headDim, o.kv);
  const tokens = Math.ceil(Math.max(0, o.contextLength) / KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS;
  const kvBytes = kvBytesPerToken * tokens * Math.max(0, o.batch);
  return { params, weightBytes, kvBytesPerToken, kvBytes, totalBytes: weightBytes + kvBytes };
}
