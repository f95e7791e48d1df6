/**
 * CPU reference for kv_write.ts: writes each token's k and v heads from
 * `qkv [tokens, rowStride]` into `cacheK` / `cacheV` `[slots, kvHeads, headDim]`
 * IN PLACE (the caller passes copies when it needs the originals).
 * Slot 0xffffffff (NO_SLOT) skips the token.
 */
import { NO_SLOT, type KvWriteOptions } from './kv_write.ts';

export function kvWriteRef(qkv: Float32Array, slots: Uint32Array, cacheK: Float32Array, cacheV: Float32Array, o: Omit<KvWriteOptions, 'variant'>): void {
  const hd = o.headDim;
  for (let t = 0; t < o.tokens; t++) {
    const slot = slots[t]!;
    if (slot === NO_SLOT) continue;
    for (let h = 0; h < o.kvHeads; h++) {
      const k = t * o.rowStride + (o.qHeads + h) * hd;
      const v = t * o.rowStride + (o.qHeads + o.kvHeads + h) * hd;
      const dst = (slot * o.kvHeads + h) * hd;
      cacheK.set(qkv.subarray(k, k + hd), dst);
      cacheV.set(qkv.subarray(v, v + hd), dst);
    }
  }
}
