/**
 * Causal grouped-query attention for a ragged batch over a paged KV cache
 * (continuous batching: one step mixes prompt chunks, which may start mid-
 * sequence, with single decode tokens). q comes straight from the fused
 * `qkv [tokens, rowStride]` rows (q heads at column 0, already rotated); keys and
 * values come from `cacheK` / `cacheV` (f32 `[numBlocks * blockSize, kvHeads, headDim]`,
 * or q8 rows of int8 codes + an f32 scale, dequantized on read: layouts in
 * kv_write.ts), where kvWrite has already stored this step's own k/v. Token t attends to
 * positions lo..positions[t] of sequence tokenSeq[t] through its block table,
 * lo = max(0, pos + 1 - window). Online softmax, f32 accumulation; optional
 * Gemma-2 tanh soft-capping and Mistral sliding window. `out [tokens, qHeads * headDim]`
 * f32 must not alias qkv or the caches (the cpu variant accumulates in it).
 * headDim and rowStride must be multiples of 4 (vec4 loads); the gpu variant also
 * needs headDim <= 256. Variants (see shaders/attention.wgsl): cpu = one invocation
 * per (token, kv head) covering up to 8 query heads of its group, keys in tiles of 8;
 * gpu = one 64-thread workgroup per (token, query head), keys in tiles of 64.
 * Reference: attention.ref.ts.
 */
import { isLlvmpipe } from '../gpu/device.ts';
import type { Recorder } from '../gpu/recorder.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { ceilDiv, grid1d } from './grid.ts';
import { checkKvTextureFormat, isKvTexture, kvRowWords, type KvDtype, type KvStore } from './kv_write.ts';
import { attentionTilesPerPass, dispatchInPasses, passCount } from './loop_budget.ts';
import type { Variant } from './variant.ts';

export interface AttentionOptions {
  tokens: number;
  qHeads: number;
  kvHeads: number;
  headDim: number;
  /** Elements between consecutive token rows of qkv. */
  rowStride: number;
  /** Cache slots per block. */
  blockSize: number;
  /** Columns of blockTables. */
  maxBlocksPerSeq: number;
  /** Multiplier of q.k; default 1 / sqrt(headDim). */
  scale?: number;
  /** Gemma-2 logit soft-capping: score = softcap * tanh(score / softcap). */
  softcap?: number;
  /** Sliding window (Mistral): attend only to positions > pos - window. */
  window?: number;
  /** Cache storage (default f32), as written by kvWrite / ropeKvWrite. */
  kvDtype?: KvDtype;
  variant?: Variant;
  /** cpu variant: keep q and the accumulators in registers (QREG); default when GC · headDim/4 <= CPU_QREG_MAX. For tests and tools. */
  registers?: boolean;
  /** Latest position of any token of the step (default: the block tables' capacity), for llvmpipe's loop budget. */
  maxPosition?: number;
  /**
   * cpu variant: key tiles (8 positions) per dispatch. Default on llvmpipe attentionTilesPerPass
   * (its loop budget; core/ops/loop_budget.ts), elsewhere unlimited. For tests and tools.
   */
  tilesPerPass?: number;
}

const layout = uniformLayout([
  ['tokens', 'u32'],
  ['qHeads', 'u32'],
  ['kvHeads', 'u32'],
  ['group', 'u32'], // qHeads / kvHeads
  ['hd4', 'u32'], // headDim / 4
  ['rowStride4', 'u32'], // qkv row stride in vec4s
  ['blockSize', 'u32'], // slots per block
  ['maxBlocks', 'u32'], // blockTables columns
  ['kvStride', 'u32'], // cache row (slot, kv head) stride: vec4s (f32) or u32 words (q8)
  ['window', 'u32'], // positions; 0 = unlimited
  ['qScale', 'f32'], // scale, or scale / softcap with SOFTCAP
  ['softcap', 'f32'],
  ['kvBase4', 'u32'], // KV texture caches: vec4 index of the layer's region (else 0)
  ['tileFrom', 'u32'], // PASSES: this dispatch's key tiles of each token, tileFrom .. tileTo - 1
  ['tileTo', 'u32'],
] as const);

/** Query heads per cpu-variant invocation: at most this many share each K/V load. */
const CPU_MAX_GC = 8;

/**
 * Largest GC · headDim/4 (vec4s) for which the cpu variant keeps q and the accumulators in
 * registers (QREG): bigger private arrays compile slowly on llvmpipe and index slowly on
 * SwiftShader (figures: docs/kernels.md, "Tuning figures").
 */
const CPU_QREG_MAX = 16;

const CPU_WG_NARROW = 4;
const CPU_WG_WIDE = 16;

/**
 * Workgroup size of the cpu variant for `items` invocations: 4 (one SwiftShader SIMD group)
 * while that leaves few workgroups, so a short decode step still spreads over the cores; 16
 * from 8 such workgroups up (prefill). Llvmpipe pays a fixed cost per workgroup and runs
 * 8 lanes at a time, so 4-invocation groups wasted half of each pass; SwiftShader is
 * indifferent (figures: docs/kernels.md, "Tuning figures").
 */
export function cpuAttentionWG(items: number): number {
  return items >= 8 * CPU_WG_WIDE ? CPU_WG_WIDE : CPU_WG_NARROW;
}

/** Largest divisor of n that is <= cap (at least 1). */
function divisorAtMost(n: number, cap: number): number {
  for (let d = Math.max(1, Math.min(n, Math.floor(cap))); d > 1; d--) if (n % d === 0) return d;
  return 1;
}

export async function attention(
  rec: Recorder,
  qkv: Tensor,
  cacheK: KvStore,
  cacheV: KvStore,
  positions: Tensor,
  tokenSeq: Tensor,
  blockTables: Tensor,
  out: Tensor,
  opts: AttentionOptions,
): Promise<void> {
  const { tokens, qHeads, kvHeads, headDim, rowStride, blockSize, maxBlocksPerSeq } = opts;
  if (headDim % 4 !== 0 || rowStride % 4 !== 0) throw new Error(`attention: headDim (${headDim}) and rowStride (${rowStride}) must be multiples of 4`);
  if (qHeads % kvHeads !== 0) throw new Error(`attention: qHeads ${qHeads} not a multiple of kvHeads ${kvHeads}`);
  if (tokens === 0) return;
  const hd4 = headDim / 4;
  const group = qHeads / kvHeads;
  const scale = opts.scale ?? 1 / Math.sqrt(headDim);
  const softcap = opts.softcap ?? 0;
  const q8 = opts.kvDtype === 'q8';
  const f16 = opts.kvDtype === 'f16';
  const tex = isKvTexture(cacheK);
  if (tex !== isKvTexture(cacheV)) throw new Error('attention: K and V caches must both be textures or both buffers');
  if (isKvTexture(cacheK) && isKvTexture(cacheV)) checkKvTextureFormat(cacheK, cacheV, opts.kvDtype ?? 'f32', 'attention');
  const shared = (opts.variant ?? rec.ctx.variant) === 'gpu';
  const GC = divisorAtMost(group, CPU_MAX_GC);
  if (shared && headDim > 256) throw new Error(`attention: the gpu variant supports headDim <= 256 (got ${headDim})`);
  const items = tokens * kvHeads * (group / GC); // cpu: one invocation per (token, kv head, chunk of GC query heads)
  // gpu: 64 threads = keys per tile = max vec4s per head; cpu: cpuAttentionWG.
  const WG = shared ? 64 : cpuAttentionWG(items);
  const qreg = opts.registers ?? GC * hd4 <= CPU_QREG_MAX;
  // llvmpipe ends every loop of an invocation past its loop budget: long contexts walk their
  // tiles in several dispatches (bit-identical to one; attention.wgsl PASSES).
  const span = Math.min(opts.maxPosition ?? maxBlocksPerSeq * blockSize - 1, maxBlocksPerSeq * blockSize - 1) + 1;
  const tiles = Math.ceil((opts.window ? Math.min(span, opts.window) : span) / 8) + 1;
  const perPass = shared ? Infinity : (opts.tilesPerPass ?? (isLlvmpipe(rec.ctx.gpu.info) ? attentionTilesPerPass(GC, hd4) : Infinity));
  const passes = passCount(tiles, perPass);
  const kernel = await rec.ctx.pipelines.get({
    shader: 'attention',
    defines: shared
      ? { SHARED: true, WG, SOFTCAP: softcap > 0, Q8: q8, F16: f16, KV_TEX: tex }
      : { SHARED: false, WG, GC, SOFTCAP: softcap > 0, Q8: q8, F16: f16, KV_TEX: tex, QREG: qreg, HD4: hd4, PASSES: passes > 1 },
    layout,
  });
  const params = {
    tokens,
    qHeads,
    kvHeads,
    group,
    hd4,
    rowStride4: rowStride / 4,
    blockSize,
    maxBlocks: maxBlocksPerSeq,
    kvStride: q8 ? kvRowWords(headDim, 'q8') : hd4, // f16: vec2<u32> units, one per 4 elements
    window: opts.window ?? 0,
    qScale: softcap > 0 ? scale / softcap : scale,
    softcap,
    kvBase4: isKvTexture(cacheK) ? cacheK.base4 : 0,
    tileFrom: 0,
    tileTo: 0,
  };
  const groups = shared ? grid1d(tokens * qHeads) : grid1d(ceilDiv(items, WG));
  // State between passes: (m, l) f32 per invocation and head.
  dispatchInPasses(rec, kernel, params, [qkv, cacheK, cacheV, positions, tokenSeq, blockTables, out], groups, { passes, perPass, stateBytes: items * GC * 8 });
}
