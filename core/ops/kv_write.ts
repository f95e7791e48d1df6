/**
 * Paged KV-cache write: copies each token's k and v heads out of the fused
 * `qkv [tokens, rowStride]` f32 rows into `cacheK` / `cacheV`
 * `[numBlocks * blockSize, kvHeads, headDim]` f32 at `slots[t]` (u32, computed by
 * the scheduler as blockTables[seq][pos / blockSize] * blockSize + pos % blockSize).
 * Why a separate op: attention then reads every key, the step's own included,
 * from one paged layout, so prefill chunks and decode tokens share one kernel.
 * Slot 0xffffffff skips the token (padding). headDim and rowStride must be
 * multiples of 4 (vec4 copies). Reference: kv_write.ref.ts.
 */
import type { Recorder } from '../gpu/recorder.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { ceilDiv, grid1d } from './grid.ts';
import type { Variant } from './variant.ts';

/** Slot value that makes kvWrite skip a token. */
export const NO_SLOT = 0xffffffff;

export interface KvWriteOptions {
  tokens: number;
  qHeads: number;
  kvHeads: number;
  headDim: number;
  /** Elements between consecutive token rows of qkv. */
  rowStride: number;
  variant?: Variant;
}

const layout = uniformLayout([
  ['tokens', 'u32'],
  ['kvHeads', 'u32'],
  ['hd4', 'u32'], // headDim / 4
  ['rowStride4', 'u32'], // rowStride / 4
  ['kOff4', 'u32'], // column of the first k head / 4
  ['vOff4', 'u32'], // column of the first v head / 4
] as const);

export async function kvWrite(rec: Recorder, qkv: Tensor, slots: Tensor, cacheK: Tensor, cacheV: Tensor, opts: KvWriteOptions): Promise<void> {
  const { tokens, qHeads, kvHeads, headDim, rowStride } = opts;
  if (headDim % 4 !== 0 || rowStride % 4 !== 0) throw new Error(`kvWrite: headDim (${headDim}) and rowStride (${rowStride}) must be multiples of 4`);
  if ((qHeads + 2 * kvHeads) * headDim > rowStride) throw new Error('kvWrite: q, k and v heads exceed rowStride');
  if (tokens === 0) return;
  const shared = (opts.variant ?? rec.ctx.variant) === 'gpu';
  const WG = shared ? 64 : 8;
  const kernel = await rec.ctx.pipelines.get({ shader: 'kv_write', defines: { WG, SHARED: shared }, layout });
  const hd4 = headDim / 4;
  const n = tokens * kvHeads * (shared ? hd4 : 1);
  rec.dispatch(
    kernel,
    { tokens, kvHeads, hd4, rowStride4: rowStride / 4, kOff4: qHeads * hd4, vOff4: (qHeads + kvHeads) * hd4 },
    [qkv, slots, cacheK, cacheV],
    grid1d(ceilDiv(n, WG)),
  );
}
