/**
 * Tiled flash attention for prompt chunks: the same causal, paged, ragged GQA attention as
 * attention.ts, with queries in tiles of up to 8 consecutive tokens of one sequence so each
 * K/V tile (16 keys) staged in workgroup memory serves every row (shaders/attention_prefill.wgsl).
 * The tiles are built here from the step's host-side token → sequence map (`tokenSeqHost`):
 * a new tile starts at every change of sequence and every 8 tokens, so any ragged step works
 * (interleaved sequences only make smaller tiles). Shapes as attention.ts: qkv [tokens,
 * rowStride] (q heads at column 0), caches [numSlots, kvHeads, headDim] f32 or f16 (halves two
 * per u32 word; native f16 reads with shader-f16), out [tokens, qHeads * headDim] f32;
 * headDim % 4 == 0 and <= 128, rowStride % 4 == 0. Reference: attention.ref.ts.
 */
import type { Recorder } from '../gpu/recorder.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import type { SplitAttentionOptions } from './attention_splitk.ts';
import { grid1d } from './grid.ts';

/** Query rows per tile (BQ in the shader). */
export const PREFILL_TILE_ROWS = 8;
/** Largest head dim the tiled kernel takes (its workgroup tiles hold 32 vec4s per row). */
export const PREFILL_MAX_HEAD_DIM = 128;

export interface PrefillAttentionOptions extends Omit<SplitAttentionOptions, 'splitKeys' | 'maxPosition'> {
  /** [tokens] sequence index of each token, as uploaded in `tokenSeq`. */
  tokenSeqHost: ArrayLike<number>;
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
  ['window', 'u32'], // positions; 0 = unlimited
  ['qScale', 'f32'], // scale, or scale / softcap with SOFTCAP
  ['softcap', 'f32'],
  ['tiles', 'u32'], // query tiles
] as const);

/** Query tiles of a step: (first token, tokens) pairs, each within one sequence and at most PREFILL_TILE_ROWS long. */
export function prefillTiles(tokenSeq: ArrayLike<number>): Uint32Array {
  const out: number[] = [];
  for (let t = 0; t < tokenSeq.length; ) {
    let n = 1;
    while (n < PREFILL_TILE_ROWS && t + n < tokenSeq.length && tokenSeq[t + n] === tokenSeq[t]) n++;
    out.push(t, n);
    t += n;
  }
  return new Uint32Array(out);
}

export async function attentionPrefill(
  rec: Recorder,
  qkv: Tensor,
  cacheK: Tensor,
  cacheV: Tensor,
  positions: Tensor,
  tokenSeq: Tensor,
  blockTables: Tensor,
  out: Tensor,
  opts: PrefillAttentionOptions,
): Promise<void> {
  const { tokens, qHeads, kvHeads, headDim, rowStride, blockSize, maxBlocksPerSeq } = opts;
  if (headDim % 4 !== 0 || rowStride % 4 !== 0) throw new Error(`attentionPrefill: headDim (${headDim}) and rowStride (${rowStride}) must be multiples of 4`);
  if (headDim > PREFILL_MAX_HEAD_DIM) throw new Error(`attentionPrefill: headDim <= ${PREFILL_MAX_HEAD_DIM} (got ${headDim})`);
  if (qHeads % kvHeads !== 0) throw new Error(`attentionPrefill: qHeads ${qHeads} not a multiple of kvHeads ${kvHeads}`);
  if (opts.tokenSeqHost.length !== tokens) throw new Error(`attentionPrefill: tokenSeqHost has ${opts.tokenSeqHost.length} entries for ${tokens} tokens`);
  if (tokens === 0) return;
  const ctx = rec.ctx;
  const kvDtype = opts.kvDtype ?? 'f32';
  const native = kvDtype === 'f16' && (opts.nativeF16 ?? ctx.gpu.caps.f16);
  if (native && !ctx.gpu.caps.f16) throw new Error('attentionPrefill: native f16 reads need the shader-f16 feature');
  const tiles = prefillTiles(opts.tokenSeqHost);
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
    tiles: tiles.length / 2,
  };
  const kv = kvDtype === 'f32' ? 'f32' : native ? 'f16n' : 'f16';
  const kernel = await ctx.pipelines.get({ shader: 'attention_prefill', defines: { KV: kv, SOFTCAP: softcap > 0 }, layout });
  rec.dispatch(kernel, params, [qkv, cacheK, cacheV, positions, tokenSeq, blockTables, rec.upload(tiles), out], grid1d((tiles.length / 2) * qHeads));
}
