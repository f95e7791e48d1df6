/**
 * CPU reference for kv_write.ts: writes each token's k and v heads from
 * `qkv [tokens, rowStride]` into `cacheK` / `cacheV` IN PLACE (the caller
 * passes copies when it needs the originals). f32 caches are Float32Array
 * `[slots, kvHeads, headDim]`; q8 caches are Uint32Array in the GPU layout
 * `[slots, kvHeads, headDim/4 + 1]` (see kv_write.ts), quantized here exactly
 * as specified there (scale in f32, codes from x / scale in float64); f16
 * caches are Uint32Array `[slots, kvHeads, headDim/2]`, halves rounded to nearest
 * even after clamping to ±65504.
 * Slot 0xffffffff (NO_SLOT) skips the token.
 */
import { f16ToF32, f32ToF16 } from '../formats/gguf_quants.ts';
import { kvRowWords, NO_SLOT, type KvWriteOptions } from './kv_write.ts';

/** f16's largest finite value: the shaders clamp to it before packing (_kv_half.wgsl). */
export const HALF_MAX = 65504;

/** Packs `x` (one row of headDim) into `out` at word `at`: element 2i in the low half of word i. */
export function packRowF16(x: ArrayLike<number>, out: Uint32Array, at: number): void {
  const half = (v: number): number => f32ToF16(Math.max(-HALF_MAX, Math.min(HALF_MAX, v)));
  for (let w = 0; w < x.length / 2; w++) out[at + w] = (half(x[2 * w]!) | (half(x[2 * w + 1]!) << 16)) >>> 0;
}

/** An f16 cache `[rows, headDim/2]` u32 as f32 `[rows, headDim]`. */
export function unpackKvF16Ref(cache: Uint32Array): Float32Array<ArrayBuffer> {
  const out = new Float32Array(cache.length * 2);
  for (let w = 0; w < cache.length; w++) {
    out[2 * w] = f16ToF32(cache[w]! & 0xffff);
    out[2 * w + 1] = f16ToF32(cache[w]! >>> 16);
  }
  return out;
}

/** f32(1/127): scale = absmax * INV127 is one correctly rounded f32 product, on the GPU too. */
export const INV127 = Math.fround(1 / 127);

/** Round half to even (WGSL `round`). */
export function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** Quantizes `x` (one row of headDim) into `out` at word `at`: headDim/4 packed words, then the scale bits. */
export function quantizeRowQ8(x: ArrayLike<number>, out: Uint32Array, at: number): void {
  const n = x.length;
  let amax = 0;
  for (let i = 0; i < n; i++) amax = Math.max(amax, Math.abs(x[i]!));
  const scale = Math.fround(amax * INV127);
  for (let w = 0; w < n / 4; w++) {
    let word = 0;
    for (let b = 0; b < 4; b++) {
      const q = scale > 0 ? Math.max(-127, Math.min(127, roundHalfEven(x[4 * w + b]! / scale))) : 0;
      word |= (q & 0xff) << (8 * b);
    }
    out[at + w] = word >>> 0;
  }
  out[at + n / 4] = new Uint32Array(Float32Array.of(scale).buffer)[0]!;
}

/** Dequantizes a q8 cache `[rows, headDim/4 + 1]` u32 to f32 `[rows, headDim]` (code * scale, in f32). */
export function dequantKvRef(cache: Uint32Array, headDim: number): Float32Array<ArrayBuffer> {
  const R = kvRowWords(headDim, 'q8');
  const rows = cache.length / R;
  const out = new Float32Array(rows * headDim);
  const bytes = new Int8Array(cache.buffer, cache.byteOffset, cache.byteLength);
  const f = new Float32Array(cache.buffer, cache.byteOffset, cache.length);
  for (let r = 0; r < rows; r++) {
    const scale = f[r * R + R - 1]!;
    for (let d = 0; d < headDim; d++) out[r * headDim + d] = Math.fround(bytes[(r * R) * 4 + d]! * scale);
  }
  return out;
}

export function kvWriteRef(
  qkv: Float32Array,
  slots: Uint32Array,
  cacheK: Float32Array | Uint32Array,
  cacheV: Float32Array | Uint32Array,
  o: Omit<KvWriteOptions, 'variant'>,
): void {
  const hd = o.headDim;
  const q8 = o.kvDtype === 'q8';
  const f16 = o.kvDtype === 'f16';
  if (q8 || f16 ? !(cacheK instanceof Uint32Array && cacheV instanceof Uint32Array) : !(cacheK instanceof Float32Array && cacheV instanceof Float32Array)) {
    throw new Error('kvWriteRef: q8 and f16 caches are Uint32Array, f32 caches Float32Array');
  }
  const R = kvRowWords(hd, o.kvDtype ?? 'f32');
  for (let t = 0; t < o.tokens; t++) {
    const slot = slots[t]!;
    if (slot === NO_SLOT) continue;
    for (let h = 0; h < o.kvHeads; h++) {
      const k = t * o.rowStride + (o.qHeads + h) * hd;
      const v = t * o.rowStride + (o.qHeads + o.kvHeads + h) * hd;
      const dst = (slot * o.kvHeads + h) * R;
      if (q8) {
        quantizeRowQ8(qkv.subarray(k, k + hd), cacheK as Uint32Array, dst);
        quantizeRowQ8(qkv.subarray(v, v + hd), cacheV as Uint32Array, dst);
      } else if (f16) {
        packRowF16(qkv.subarray(k, k + hd), cacheK as Uint32Array, dst);
        packRowF16(qkv.subarray(v, v + hd), cacheV as Uint32Array, dst);
      } else {
        (cacheK as Float32Array).set(qkv.subarray(k, k + hd), dst);
        (cacheV as Float32Array).set(qkv.subarray(v, v + hd), dst);
      }
    }
  }
}
