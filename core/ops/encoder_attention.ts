/**
 * Bidirectional (non-causal) multi-head attention over a padded batch, for BERT-style
 * encoders. The batch is B rows of S token slots; row b has lengths[b] real tokens
 * first, then padding. Each real query attends to every real key of its own row (the
 * padding mask); padding query rows come out as zeros and padding tokens' q/k/v are
 * never read, so whatever the padding rows hold cannot leak into real ones.
 *
 * Shapes: qkv [B*S, rowStride] f32 (q heads at column 0, k heads at kOffset, v heads at
 * vOffset: the fused decoder layout by default), lengths [B] u32, out [B*S, heads*headDim]
 * f32. headDim, rowStride and the offsets must be multiples of 4 (vec4 loads).
 * Kernel: shaders/encoder_attention.wgsl. Reference: encoder_attention.ref.ts.
 */
import { InvalidRequestError } from '../errors.ts';
import { isLlvmpipe } from '../gpu/device.ts';
import type { Recorder } from '../gpu/recorder.ts';
import { numel, type Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { ceilDiv, grid1d } from './grid.ts';
import { dispatchInPasses, encoderAttentionTilesPerPass, LLVMPIPE_LOOP_PLAN, passCount } from './loop_budget.ts';
import type { Variant } from './variant.ts';

export interface EncoderAttentionOptions {
  /** Batch rows B. */
  batch: number;
  /** Token slots per row S (the padded length). */
  seqLen: number;
  heads: number;
  /** Per-head width, in elements. */
  headDim: number;
  /** Elements between consecutive token rows of qkv (3 * heads * headDim when fused). */
  rowStride: number;
  /** Column of k head 0, in elements (default heads * headDim). */
  kOffset?: number;
  /** Column of v head 0, in elements (default 2 * heads * headDim). */
  vOffset?: number;
  /** Multiplier of q.k; default 1 / sqrt(headDim). */
  scale?: number;
  variant?: Variant;
  /** cpu variant: key tiles (8 tokens) per dispatch; default unbounded, on llvmpipe encoderAttentionTilesPerPass (tests set it to run any row in passes). */
  tilesPerPass?: number;
}

const layout = uniformLayout([
  ['B', 'u32'], // batch rows
  ['S', 'u32'], // token slots per row
  ['heads', 'u32'],
  ['hd4', 'u32'], // headDim / 4
  ['rowStride4', 'u32'], // qkv row stride, in vec4s
  ['kOff4', 'u32'], // k column offset, in vec4s
  ['vOff4', 'u32'], // v column offset, in vec4s
  ['scale', 'f32'], // multiplier of q.k
  ['tileFrom', 'u32'], // cpu PASSES: this dispatch's key tiles, tileFrom .. tileTo - 1
  ['tileTo', 'u32'],
] as const);

/** cpu variant: invocations per workgroup (one SwiftShader SIMD group) and queries per invocation. */
const CPU_WG = 4;
const GQ = 4;

/** gpu variant tile sizes: QB queries (QB * hd/4 <= 256 threads), KT keys, within workgroup memory. */
function sharedTiles(hd4: number, limitBytes: number, maxThreads: number): { QB: number; KT: number } | null {
  const threads = Math.min(256, maxThreads);
  if (hd4 > threads) return null;
  const QB = Math.min(32, 2 ** Math.floor(Math.log2(threads / hd4)));
  for (let KT = 16; KT >= 1; KT /= 2) {
    const bytes = (QB + 2 * KT) * hd4 * 16 + QB * KT * 4 + QB * 8;
    if (bytes <= limitBytes) return { QB, KT };
  }
  return null;
}

/** Loop iterations one invocation of the gpu variant runs for a row of n real tokens (an upper estimate). */
function sharedLoopIterations(n: number, hd4: number, t: { QB: number; KT: number }): number {
  return ceilDiv(n, t.KT) * (ceilDiv(t.KT, t.QB) + ceilDiv(t.KT, hd4) * (hd4 + 1) + 3 * t.KT + 1);
}

export async function encoderAttention(rec: Recorder, qkv: Tensor, lengths: Tensor, out: Tensor, opts: EncoderAttentionOptions): Promise<void> {
  const { batch: B, seqLen: S, heads, headDim, rowStride } = opts;
  const kOffset = opts.kOffset ?? heads * headDim;
  const vOffset = opts.vOffset ?? 2 * heads * headDim;
  for (const [name, v] of [['headDim', headDim], ['rowStride', rowStride], ['kOffset', kOffset], ['vOffset', vOffset]] as const) {
    if (v % 4 !== 0) throw new Error(`encoderAttention: ${name} (${v}) must be a multiple of 4`);
  }
  if (Math.max(heads * headDim, kOffset + heads * headDim, vOffset + heads * headDim) > rowStride) {
    throw new Error(`encoderAttention: q/k/v columns exceed rowStride ${rowStride}`);
  }
  if (numel(qkv.shape) !== B * S * rowStride) throw new Error(`encoderAttention: qkv ${qkv.shape} is not [${B * S}, ${rowStride}]`);
  if (numel(lengths.shape) !== B) throw new Error(`encoderAttention: lengths ${lengths.shape} is not [${B}]`);
  if (numel(out.shape) !== B * S * heads * headDim) throw new Error(`encoderAttention: out ${out.shape} is not [${B * S}, ${heads * headDim}]`);
  if (out.buffer === qkv.buffer || out.buffer === lengths.buffer) throw new Error('encoderAttention: out may not share an input buffer');
  if (B === 0 || S === 0) return;

  const hd4 = headDim / 4;
  const shared = (opts.variant ?? rec.ctx.variant) === 'gpu';
  const lim = rec.ctx.gpu.limits;
  const tiles = shared ? sharedTiles(hd4, lim.maxComputeWorkgroupStorageSize, Math.min(lim.maxComputeInvocationsPerWorkgroup, lim.maxComputeWorkgroupSizeX)) : null;
  if (shared && !tiles) throw new Error(`encoderAttention: headDim ${headDim} too large for the gpu variant's workgroup limits`);
  // Only llvmpipe has the loop budget (SwiftShader runs any loop count), where a longer row
  // would come back silently wrong: the cpu variant walks it in passes (bit-identical to one),
  // the gpu variant (forced onto llvmpipe: tests) refuses it.
  const llvmpipe = isLlvmpipe(rec.ctx.gpu.info);
  if (tiles && llvmpipe && sharedLoopIterations(S, hd4, tiles) > LLVMPIPE_LOOP_PLAN) {
    throw new InvalidRequestError('input_too_long', `encoderAttention: ${S} tokens x headDim ${headDim} exceed llvmpipe's per-invocation loop budget for the gpu variant (core/ops/loop_budget.ts)`, { seqLen: S, headDim });
  }
  const perPass = tiles ? Infinity : (opts.tilesPerPass ?? (llvmpipe ? encoderAttentionTilesPerPass(GQ, hd4) : Infinity));
  const passes = passCount(ceilDiv(S, 8), perPass);
  const kernel = await rec.ctx.pipelines.get({
    shader: 'encoder_attention',
    defines: tiles ? { SHARED: true, WG: tiles.QB * hd4, HD4: hd4, QB: tiles.QB, KT: tiles.KT } : { SHARED: false, WG: CPU_WG, GQ, PASSES: passes > 1 },
    layout,
  });
  const params = {
    B,
    S,
    heads,
    hd4,
    rowStride4: rowStride / 4,
    kOff4: kOffset / 4,
    vOff4: vOffset / 4,
    scale: opts.scale ?? 1 / Math.sqrt(headDim),
    tileFrom: 0,
    tileTo: 0,
  };
  const invocations = B * heads * ceilDiv(S, GQ);
  const groups = tiles ? grid1d(B * heads * ceilDiv(S, tiles.QB)) : grid1d(ceilDiv(invocations, CPU_WG));
  // State between passes: (m, l) f32 per invocation and query.
  dispatchInPasses(rec, kernel, params, [qkv, lengths, out], groups, { passes, perPass, stateBytes: invocations * GQ * 8 });
}
