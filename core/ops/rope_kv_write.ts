/**
 * Fused rope + kv_write, the decoder step's attention prologue in ONE dispatch
 * (on CPU emulation per-dispatch overhead dominates a decode step): rotates the
 * q and k heads of `qkv [tokens, rowStride]` f32 in place (+ Qwen3 q/k RMSNorm),
 * exactly as rope(), and stores each token's rotated k and its v head into the
 * paged `cacheK` / `cacheV` at `slots[t]`, exactly as kvWrite() (f32 or q8
 * rows; layouts in kv_write.ts). Afterwards qkv holds what rope() leaves there
 * (v untouched) and the caches what kvWrite() would store from it. Slot
 * 0xffffffff skips the cache store of a token (padding).
 * Same shader as rope (shaders/rope.wgsl with KV=1): the invocation(s) of a k
 * head rotate it, then read it back and store it with its v head. headDim must
 * be a multiple of 4. Reference: rope_kv_write.ref.ts (ropeRef then kvWriteRef).
 */
import type { Recorder } from '../gpu/recorder.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { ceilDiv, grid1d } from './grid.ts';
import { checkKvTextureFormat, isKvTexture, type KvDtype, type KvStore } from './kv_write.ts';
import { checkRotaryDim, invFreqTensor, ropeLayout, type RopeOptions } from './rope.ts';

export interface RopeKvWriteOptions extends Omit<RopeOptions, 'kHeads'> {
  /** k heads (rotated and stored) = v heads (stored). */
  kvHeads: number;
  /** Cache storage (default f32). */
  kvDtype?: KvDtype;
}

export async function ropeKvWrite(
  rec: Recorder,
  qkv: Tensor,
  positions: Tensor,
  slots: Tensor,
  cacheK: KvStore,
  cacheV: KvStore,
  opts: RopeKvWriteOptions,
): Promise<void> {
  const { tokens, qHeads, kvHeads, headDim, rowStride } = opts;
  const rot = checkRotaryDim(opts, 'ropeKvWrite');
  if (headDim % 4 !== 0) throw new Error(`ropeKvWrite: headDim (${headDim}) must be a multiple of 4`);
  if ((qHeads + 2 * kvHeads) * headDim > rowStride) throw new Error('ropeKvWrite: q, k and v heads exceed rowStride');
  if (tokens === 0) return;
  const shared = (opts.variant ?? rec.ctx.variant) === 'gpu';
  const WG = shared ? 64 : 16;
  const tex = isKvTexture(cacheK);
  if (tex !== isKvTexture(cacheV)) throw new Error('ropeKvWrite: K and V caches must both be textures or both buffers');
  if (isKvTexture(cacheK) && isKvTexture(cacheV)) checkKvTextureFormat(cacheK, cacheV, opts.kvDtype ?? 'f32', 'ropeKvWrite');
  const kernel = await rec.ctx.pipelines.get({
    shader: 'rope',
    defines: { WG, SHARED: shared, INTERLEAVED: opts.style === 'interleaved', QK_NORM: !!opts.qkNorm, KV: true, Q8: opts.kvDtype === 'q8', F16: opts.kvDtype === 'f16', KV_TEX: tex },
    layout: ropeLayout,
  });
  const heads = qHeads + kvHeads;
  const buffers = [qkv, positions, invFreqTensor(rec.ctx, opts), slots, cacheK, cacheV];
  if (opts.qkNorm) buffers.push(opts.qkNorm.q, opts.qkNorm.k);
  const n = tokens * heads;
  rec.dispatch(
    kernel,
    { tokens, heads, qHeads, headDim, rowStride, rotHalf: rot / 2, eps: opts.qkNorm?.eps ?? 0, kvBase4: isKvTexture(cacheK) ? cacheK.base4 : 0 },
    buffers,
    grid1d(shared ? n : ceilDiv(n, WG)),
  );
}
