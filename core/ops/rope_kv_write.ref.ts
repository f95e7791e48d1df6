/**
 * CPU reference for rope_kv_write.ts: the composition it fuses. Returns the
 * rotated copy of `qkv` (ropeRef) and writes the caches IN PLACE from it
 * (kvWriteRef; Float32Array for f32, Uint32Array for q8).
 */
import { kvWriteRef } from './kv_write.ref.ts';
import type { RopeKvWriteOptions } from './rope_kv_write.ts';
import { ropeRef, type RopeRefOptions } from './rope.ref.ts';

export type RopeKvWriteRefOptions = Omit<RopeKvWriteOptions, 'qkNorm' | 'variant'> & Pick<RopeRefOptions, 'qkNorm'>;

export function ropeKvWriteRef(
  qkv: Float32Array,
  positions: Uint32Array,
  slots: Uint32Array,
  cacheK: Float32Array | Uint32Array,
  cacheV: Float32Array | Uint32Array,
  o: RopeKvWriteRefOptions,
): Float32Array {
  const { kvHeads, kvDtype, ...ro } = o;
  const y = ropeRef(qkv, positions, { ...ro, kHeads: kvHeads });
  kvWriteRef(y, slots, cacheK, cacheV, { tokens: o.tokens, qHeads: o.qHeads, kvHeads, headDim: o.headDim, rowStride: o.rowStride, ...(kvDtype ? { kvDtype } : {}) });
  return y;
}
