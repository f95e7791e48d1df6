/**
 * Paged KV-cache write: stores each token's k and v heads out of the fused
 * `qkv [tokens, rowStride]` f32 rows into `cacheK` / `cacheV` at `slots[t]` (u32,
 * computed by the scheduler as blockTables[seq][pos / blockSize] * blockSize +
 * pos % blockSize).
 * Why a separate op: attention then reads every key, the step's own included,
 * from one paged layout, so prefill chunks and decode tokens share one kernel.
 * Slot 0xffffffff skips the token (padding). headDim and rowStride must be
 * multiples of 4 (vec4 copies). Reference: kv_write.ref.ts.
 *
 * Cache layouts (`kvDtype`), per layer, one buffer for K and one for V:
 *   f32 — `[numSlots, kvHeads, headDim]` f32.
 *   q8  — `[numSlots, kvHeads, headDim/4 + 1]` u32 (a "row" per (slot, kv head)):
 *         words 0..headDim/4-1 hold the int8 codes, four per word, element 4i+b
 *         in byte b (two's complement, as WGSL pack4xI8); the last word is the
 *         row's f32 scale (bit pattern). Symmetric absmax quantization per row:
 *         scale = absmax * f32(1/127) (0 for an all-zero row),
 *         code = round_half_even(x / scale) in [-127, 127], x ≈ code * scale.
 *         hd + 4 bytes per (token, kv head) instead of 4 hd: 3.9x smaller at hd 128.
 *   f16 — `[numSlots, kvHeads, headDim/2]` u32: the row's elements as IEEE halves, two per
 *         word, element 2i in the low 16 bits of word i (WGSL pack2x16float; the bytes of a
 *         native f16 array), rounded to nearest and clamped to ±65504. Packed words rather
 *         than `array<f16>` so adapters without `shader-f16` read and write the same cache;
 *         the flash kernels read it natively where the adapter has the feature.
 */
import type { GpuContext } from '../gpu/context.ts';
import type { Recorder, TextureBinding } from '../gpu/recorder.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { ceilDiv, grid1d } from './grid.ts';
import type { Variant } from './variant.ts';

/**
 * KV storage in a read-write storage texture instead of a buffer (llvmpipe: Mesa 22 runs
 * storage-buffer loads lane by lane at ~11 ns per f32, texel loads at ~3.5 ns). One texture
 * holds every layer; 4-byte element f of the buffer layout above (layer l's region first) is
 * texel (f % KV_TEXTURE_WIDTH, f / KV_TEXTURE_WIDTH) (the shaders hard-code 4096): r32float
 * for f32 caches, r32uint for q8 caches (one word of 4 codes, or a row's scale, per texel).
 */
export const KV_TEXTURE_WIDTH = 4096;

/** One layer's K or V cache in a KV texture: the texture and the index of the layer's region in 16-byte units (4 texels). */
export interface KvTexture extends TextureBinding {
  base4: number;
}

/** Where a layer's K or V cache lives: a buffer tensor (f32 or q8 layout) or a KV texture region. */
export type KvStore = Tensor | KvTexture;

export function isKvTexture(s: KvStore): s is KvTexture {
  return 'view' in s;
}

/** Throws unless K and V textures have the format a `dtype` cache needs (r32float for f32, r32uint for q8; f16 caches live in buffers only). */
export function checkKvTextureFormat(k: TextureBinding, v: TextureBinding, dtype: KvDtype, op: string): void {
  if (dtype === 'f16') throw new Error(`${op}: f16 caches live in storage buffers, not KV textures`);
  const want = dtype === 'q8' ? 'r32uint' : 'r32float';
  if (k.texture.format !== want || v.texture.format !== want) throw new Error(`${op}: a ${dtype} cache needs ${want} KV textures (got ${k.texture.format}, ${v.texture.format})`);
}

/**
 * A zeroed r32float (or r32uint) read-write storage texture for `floats` 4-byte elements in the
 * KV-texture layout (KV_TEXTURE_WIDTH wide; also the megakernel's activation scratch), or null
 * when it exceeds the adapter's 2D texture size.
 */
export function createR32Texture(ctx: Pick<GpuContext, 'device' | 'gpu'>, floats: number, label: string, format: 'r32float' | 'r32uint' = 'r32float'): TextureBinding | null {
  const rows = Math.max(1, Math.ceil(floats / KV_TEXTURE_WIDTH));
  const lim = ctx.gpu.limits.maxTextureDimension2D;
  if (rows > lim || KV_TEXTURE_WIDTH > lim) return null;
  const texture = ctx.device.createTexture({ label, size: [KV_TEXTURE_WIDTH, rows], format, usage: GPUTextureUsage.STORAGE_BINDING | GPUTextureUsage.COPY_SRC | GPUTextureUsage.COPY_DST });
  return { texture, view: texture.createView() };
}

/** Slot value that makes kvWrite skip a token. */
export const NO_SLOT = 0xffffffff;

/** KV-cache storage: f32, f16 (packed halves), or int8 with one f32 scale per (slot, kv head) row. */
export type KvDtype = 'f32' | 'f16' | 'q8';
export const KV_DTYPES: readonly KvDtype[] = ['f32', 'f16', 'q8'];

/** u32 words per (slot, kv head) row of a cache of this dtype. */
export function kvRowWords(headDim: number, dtype: KvDtype): number {
  return dtype === 'q8' ? headDim / 4 + 1 : dtype === 'f16' ? headDim / 2 : headDim;
}

/** The element type of a cache tensor of this dtype: f32 rows, or u32 words (q8 codes and scales, packed halves). */
export function kvTensorDtype(dtype: KvDtype): 'f32' | 'u32' {
  return dtype === 'f32' ? 'f32' : 'u32';
}

/** Bytes of K plus V per token per layer. */
export function kvBytesPerTokenLayer(kvHeads: number, headDim: number, dtype: KvDtype): number {
  return 2 * kvHeads * kvRowWords(headDim, dtype) * 4;
}

export interface KvWriteOptions {
  tokens: number;
  qHeads: number;
  kvHeads: number;
  headDim: number;
  /** Elements between consecutive token rows of qkv. */
  rowStride: number;
  /** Cache storage (default f32); see the layouts above. */
  kvDtype?: KvDtype;
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
  const q8 = opts.kvDtype === 'q8';
  const shared = (opts.variant ?? rec.ctx.variant) === 'gpu';
  const WG = shared ? 64 : 8;
  const kernel = await rec.ctx.pipelines.get({ shader: 'kv_write', defines: { WG, SHARED: shared, Q8: q8, F16: opts.kvDtype === 'f16' }, layout });
  const hd4 = headDim / 4;
  // f32 and f16: gpu = one thread per vec4, cpu = one invocation per (token, kv head).
  // q8: gpu = one workgroup per (token, kv head) (the absmax is a reduction), cpu as f32.
  const groups = shared ? (q8 ? tokens * kvHeads : ceilDiv(tokens * kvHeads * hd4, WG)) : ceilDiv(tokens * kvHeads, WG);
  rec.dispatch(
    kernel,
    { tokens, kvHeads, hd4, rowStride4: rowStride / 4, kOff4: qHeads * hd4, vOff4: (qHeads + kvHeads) * hd4 },
    [qkv, slots, cacheK, cacheV],
    grid1d(groups),
  );
}
