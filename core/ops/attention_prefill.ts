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
import { FLASH_ATTENTION_FIELDS, flashAttentionParams, type SplitAttentionOptions } from './attention_splitk.ts';
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
  ...FLASH_ATTENTION_FIELDS,
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
  const { tokens, qHeads, kvHeads, headDim, rowStride } = opts;
  if (headDim % 4 !== 0 || rowStride % 4 !== 0) throw new Error(`attentionPrefill: headDim (${headDim}) and rowStride (${rowStride}) must be multiples of 4`);
  if (headDim > PREFILL_MAX_HEAD_DIM) throw new Error(`attentionPrefill: headDim <= ${PREFILL_MAX_HEAD_DIM} (got ${headDim})`);
  if (qHeads % kvHeads !== 0) throw new Error(`attentionPrefill: qHeads ${qHeads} not a multiple of kvHeads ${kvHeads}`);
  if (opts.tokenSeqHost.length !== tokens) throw new Error(`attentionPrefill: tokenSeqHost has ${opts.tokenSeqHost.length} entries for ${tokens} tokens`);
  if (tokens === 0) return;
  const ctx = rec.ctx;
  const tiles = prefillTiles(opts.tokenSeqHost);
  const shared = flashAttentionParams(rec, opts, 'attentionPrefill');
  const { kv, softcap } = shared;
  const params = shared.params;
  params.tiles = tiles.length / 2;
  const kernel = await ctx.pipelines.get({ shader: 'attention_prefill', defines: { KV: kv, SOFTCAP: softcap > 0 }, layout });
  rec.dispatch(kernel, params, [qkv, cacheK, cacheV, positions, tokenSeq, blockTables, rec.upload(tiles), out], grid1d((tiles.length / 2) * qHeads));
}
