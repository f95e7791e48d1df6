/**
 * Flash-decoding attention (split-K over the context): the same causal, paged, ragged GQA
 * attention as attention.ts, computed in two dispatches: `partial` splits each token's
 * context into ranges of `splitKeys` positions and runs one 64-thread workgroup per (token,
 * query head, split) — online softmax over 64-key tiles — writing the split's unnormalised
 * accumulator and (max, sum); `combine` rescales the splits by exp(m_s - max) and
 * normalises. A context that fits one split (up to `splitKeys` positions) takes one dispatch:
 * the partial phase normalises and writes the output itself (DIRECT). A decode step of a few sequences becomes tokens x heads x splits workgroups
 * instead of tokens x heads, so long contexts fill a GPU. Shapes as attention.ts:
 * qkv [tokens, rowStride] (q heads at column 0), caches [numSlots, kvHeads, headDim]
 * f32, or f16 (halves, two per u32 word: the same bytes a native f16 array has), out
 * [tokens, qHeads * headDim] f32; headDim % 4 == 0 and <= 256, rowStride % 4 == 0.
 * f16 caches are read natively where the adapter has `shader-f16` (KV = f16n), else through
 * unpack2x16float (KV = f16): identical values. Kernel: shaders/attention_splitk.wgsl;
 * reference: attention_splitk.ref.ts (the two phases in float64) and attention.ref.ts.
 */
import type { Recorder } from '../gpu/recorder.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import type { AttentionOptions } from './attention.ts';
import { ceilDiv, grid1d } from './grid.ts';

export type SplitKvDtype = 'f32' | 'f16';

export interface SplitAttentionOptions extends Pick<AttentionOptions, 'tokens' | 'qHeads' | 'kvHeads' | 'headDim' | 'rowStride' | 'blockSize' | 'maxBlocksPerSeq' | 'scale' | 'softcap' | 'window'> {
  /** Cache element type (default f32). */
  kvDtype?: SplitKvDtype;
  /** Latest position of any token of the step (default: the block tables' capacity): sizes the splits. */
  maxPosition?: number;
  /** Positions per split (a multiple of 64); default splitKeysFor(). For tests and tools. */
  splitKeys?: number;
  /** Read f16 caches as native f16 (default: the adapter has shader-f16). */
  nativeF16?: boolean;
  /**
   * Where the partial phase writes (at least splitKPartialBytes of the step's shape); default a
   * step scratch buffer from the pool. A model passes one buffer for every layer (each layer's
   * combine reads it before the next layer's partial phase writes it: queue order), which a
   * step graph can name (step scratch ends a graph capture).
   */
  partials?: { buffer: GPUBuffer; size: number };
}

/** The split shape of a step: positions per split and splits per (token, head). */
export interface SplitShape {
  splitKeys: number;
  splits: number;
}

/**
 * The split shape attentionSplitK uses for a step (pure; LlamaModel keys its step graphs on it):
 * the context span from the latest position, capped by the block tables' capacity and the window.
 */
export function splitShape(opts: Pick<SplitAttentionOptions, 'tokens' | 'qHeads' | 'blockSize' | 'maxBlocksPerSeq' | 'window' | 'maxPosition' | 'splitKeys'>): SplitShape {
  const capacity = opts.maxBlocksPerSeq * opts.blockSize;
  const span0 = Math.min(opts.maxPosition ?? capacity - 1, capacity - 1) + 1;
  const span = opts.window ? Math.min(span0, opts.window) : span0;
  const splitKeys = opts.splitKeys ?? splitKeysFor(span, opts.tokens, opts.qHeads);
  return { splitKeys, splits: ceilDiv(span, splitKeys) };
}

/** Bytes of the partial phase's output for `splits` splits: per (token, head, split) hd/4 + 1 vec4s. */
export function splitKPartialBytes(tokens: number, qHeads: number, headDim: number, splits: number): number {
  return tokens * qHeads * splits * (headDim / 4 + 1) * 16;
}

/** The uniform fields the flash kernels (split-K decode here, tiled prefill) share, first and in this order. */
export const FLASH_ATTENTION_FIELDS = [
  ['tokens', 'u32'],
  ['qHeads', 'u32'],
  ['kvHeads', 'u32'],
  ['group', 'u32'], // qHeads / kvHeads
  ['hd4', 'u32'], // headDim / 4
  ['rowStride4', 'u32'], // qkv row stride in vec4s
  ['blockSize', 'u32'], // slots per block
  ['maxBlocks', 'u32'], // blockTables columns
  ['window', 'u32'], // positions; 0 = unlimited
  ['qScale', 'f32'], // scale, or scale / softcap with SOFTCAP
  ['softcap', 'f32'],
] as const;

const layout = uniformLayout([
  ...FLASH_ATTENTION_FIELDS,
  ['splitKeys', 'u32'], // positions per split
  ['splits', 'u32'], // splits per (token, head)
] as const);

/**
 * The shared fields' values for `opts`, the cache read mode (the KV define: f32, packed f16 or
 * native f16) and the soft-cap. Throws when native f16 reads are asked of an adapter without them.
 */
/** The shared fields, then each kernel's own (set by the caller on the one object: no copy per dispatch). */
export type FlashParams = Record<(typeof FLASH_ATTENTION_FIELDS)[number][0] | 'splitKeys' | 'splits' | 'tiles', number>;

export function flashAttentionParams(rec: Recorder, opts: SplitAttentionOptions, who: string): { params: FlashParams; kv: 'f32' | 'f16' | 'f16n'; softcap: number } {
  const { tokens, qHeads, kvHeads, headDim, rowStride, blockSize, maxBlocksPerSeq } = opts;
  const kvDtype = opts.kvDtype ?? 'f32';
  const native = kvDtype === 'f16' && (opts.nativeF16 ?? rec.ctx.gpu.caps.f16);
  if (native && !rec.ctx.gpu.caps.f16) throw new Error(`${who}: native f16 reads need the shader-f16 feature`);
  const scale = opts.scale ?? 1 / Math.sqrt(headDim);
  const softcap = opts.softcap ?? 0;
  const params = {
    tokens,
    qHeads,
    kvHeads,
    group: qHeads / kvHeads,
    hd4: headDim / 4,
    rowStride4: rowStride / 4,
    blockSize,
    maxBlocks: maxBlocksPerSeq,
    window: opts.window ?? 0,
    qScale: softcap > 0 ? scale / softcap : scale,
    softcap,
    splitKeys: 0,
    splits: 0,
    tiles: 0,
  };
  return { params, kv: kvDtype === 'f32' ? 'f32' : native ? 'f16n' : 'f16', softcap };
}

/** Keys per tile of the partial phase (its workgroup size). */
const TILE = 64;
/** Fewest positions per split: 4 tiles, so a split's fixed cost (q load, partial store) stays small. */
export const MIN_SPLIT_KEYS = 256;
/** Workgroups the partial phase aims for: enough to fill a large GPU (132 SMs x ~16 resident). */
export const SPLIT_TARGET_WORKGROUPS = 2048;

/**
 * Positions per split for a step of `tokens` x `qHeads` over contexts of up to `span` positions:
 * at least MIN_SPLIT_KEYS, and no more splits than keep the partial phase near
 * SPLIT_TARGET_WORKGROUPS (so the partials buffer stays small at large batch). Multiple of 64.
 */
export function splitKeysFor(span: number, tokens: number, qHeads: number): number {
  const maxSplits = Math.max(1, Math.floor(SPLIT_TARGET_WORKGROUPS / Math.max(1, tokens * qHeads)));
  const splits = Math.max(1, Math.min(ceilDiv(span, MIN_SPLIT_KEYS), maxSplits));
  return ceilDiv(ceilDiv(span, splits), TILE) * TILE;
}

export async function attentionSplitK(
  rec: Recorder,
  qkv: Tensor,
  cacheK: Tensor,
  cacheV: Tensor,
  positions: Tensor,
  tokenSeq: Tensor,
  blockTables: Tensor,
  out: Tensor,
  opts: SplitAttentionOptions,
): Promise<void> {
  const { tokens, qHeads, kvHeads, headDim, rowStride } = opts;
  if (headDim % 4 !== 0 || rowStride % 4 !== 0) throw new Error(`attentionSplitK: headDim (${headDim}) and rowStride (${rowStride}) must be multiples of 4`);
  if (headDim > 256) throw new Error(`attentionSplitK: headDim <= 256 (got ${headDim})`);
  if (qHeads % kvHeads !== 0) throw new Error(`attentionSplitK: qHeads ${qHeads} not a multiple of kvHeads ${kvHeads}`);
  if (tokens === 0) return;
  const ctx = rec.ctx;
  const { splitKeys, splits } = splitShape(opts);
  if (splitKeys % TILE !== 0 || splitKeys <= 0) throw new Error(`attentionSplitK: splitKeys ${splitKeys} is not a positive multiple of ${TILE}`);
  const shared = flashAttentionParams(rec, opts, 'attentionSplitK');
  const { kv, softcap } = shared;
  const params = shared.params;
  params.splitKeys = splitKeys;
  params.splits = splits;
  if (splits === 1) {
    // One split (contexts up to splitKeys): the partial phase normalises and writes `out` itself.
    const direct = await ctx.pipelines.get({ shader: 'attention_splitk', defines: { PHASE: 'partial', KV: kv, SOFTCAP: softcap > 0, DIRECT: true }, layout });
    rec.dispatch(direct, params, [qkv, cacheK, cacheV, positions, tokenSeq, blockTables, out], grid1d(tokens * qHeads));
    return;
  }
  const partBytes = splitKPartialBytes(tokens, qHeads, headDim, splits);
  const given = opts.partials;
  const part = given && given.size >= partBytes ? { buffer: given.buffer, size: partBytes } : { buffer: rec.temp(partBytes), size: partBytes };
  const partial = await ctx.pipelines.get({ shader: 'attention_splitk', defines: { PHASE: 'partial', KV: kv, SOFTCAP: softcap > 0 }, layout });
  rec.dispatch(partial, params, [qkv, cacheK, cacheV, positions, tokenSeq, blockTables, part], grid1d(tokens * qHeads * splits));
  const combine = await ctx.pipelines.get({ shader: 'attention_splitk', defines: { PHASE: 'combine' }, layout });
  rec.dispatch(combine, params, [part, out], grid1d(tokens * qHeads));
}
