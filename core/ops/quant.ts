/**
 * CPU-side weight packing for the matmul kernels (pure TypeScript, no GPU calls):
 * f16/bf16 bit conversions, f16 packing two per u32 with rows padded to even length,
 * GGUF Q8_0 / Q4_0 quantizers (bit-exact with ggml's reference quantizers) and
 * repacking of raw GGUF blocks into the 4-byte aligned layout of core/gpu/tensor.ts:
 *   q8_0: data = int8 quants, row-major [rows, cols] (1 byte each), scales [rows, cols/32]: f16
 *         values held in f32 here (the device stores them as halves: GpuContext.tensor).
 *   q4_0: data = 16 bytes per block (byte j: low nibble = element j, high = element j+16,
 *         quant = nibble - 8), scales as q8_0's.
 * `dequantize` inverts all of these for references and tests.
 */
import type { GpuContext } from '../gpu/context.ts';
import { QK, type DType, type Tensor } from '../gpu/tensor.ts';
import { dequantizeKQuant, isKQuant } from './quant_k.ts';

/** Quantized weight on the CPU: quants plus one f32 scale per 32-element block. */
export interface QuantBlocks {
  data: Uint8Array;
  scales: Float32Array;
}

// Half and bfloat16 conversions live with the file formats; re-exported for op callers.
export { bf16ToF32, f16ToF32, f32ToF16 } from '../formats/gguf_quants.ts';
import { f16ToF32, f32ToF16 } from '../formats/gguf_quants.ts';

/** Packs [rows, cols] f32 into [rows, ceil(cols/2)] u32 of halves (element 2i low), zero padded. */
export function packF16(src: Float32Array, rows: number, cols: number): Uint32Array {
  const words = Math.ceil(cols / 2);
  const out = new Uint32Array(rows * words);
  for (let r = 0; r < rows; r++) {
    for (let i = 0; i < words; i++) {
      const k = 2 * i;
      const lo = f32ToF16(src[r * cols + k]!);
      const hi = k + 1 < cols ? f32ToF16(src[r * cols + k + 1]!) : 0;
      out[r * words + i] = (lo | (hi << 16)) >>> 0;
    }
  }
  return out;
}

function checkBlocks(cols: number, what: string): void {
  if (cols % QK !== 0) throw new Error(`${what}: row length ${cols} is not a multiple of ${QK}`);
}

/** C roundf: half away from zero. */
function roundf(v: number): number {
  return v < 0 ? -Math.round(-v) : Math.round(v);
}

/** ggml quantize_row_q8_0_ref: d = amax/127 (stored as f16), q = roundf(x / d). */
export function quantizeQ8_0(src: Float32Array, rows: number, cols: number): QuantBlocks {
  checkBlocks(cols, 'quantizeQ8_0');
  const nb = (rows * cols) / QK;
  const data = new Uint8Array(rows * cols);
  const scales = new Float32Array(nb);
  const q = new Int8Array(data.buffer);
  for (let b = 0; b < nb; b++) {
    let amax = 0;
    for (let j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(src[b * QK + j]!));
    const d = Math.fround(amax / 127);
    const id = d ? Math.fround(1 / d) : 0;
    scales[b] = f16ToF32(f32ToF16(d));
    for (let j = 0; j < QK; j++) q[b * QK + j] = roundf(Math.fround(src[b * QK + j]! * id));
  }
  return { data, scales };
}

/** ggml quantize_row_q4_0_ref: d = (signed max-abs value) / -8 (f16), q = min(15, trunc(x/d + 8.5)). */
export function quantizeQ4_0(src: Float32Array, rows: number, cols: number): QuantBlocks {
  checkBlocks(cols, 'quantizeQ4_0');
  const nb = (rows * cols) / QK;
  const data = new Uint8Array(nb * (QK / 2));
  const scales = new Float32Array(nb);
  for (let b = 0; b < nb; b++) {
    let amax = 0;
    let max = 0;
    for (let j = 0; j < QK; j++) {
      const v = src[b * QK + j]!;
      if (amax < Math.abs(v)) {
        amax = Math.abs(v);
        max = v;
      }
    }
    const d = Math.fround(max / -8);
    const id = d ? Math.fround(1 / d) : 0;
    scales[b] = f16ToF32(f32ToF16(d));
    const qi = (v: number): number => Math.min(15, Math.trunc(Math.fround(Math.fround(v * id) + 8.5)));
    for (let j = 0; j < QK / 2; j++) {
      data[b * 16 + j] = qi(src[b * QK + j]!) | (qi(src[b * QK + j + 16]!) << 4);
    }
  }
  return { data, scales };
}

function repack(raw: Uint8Array, rows: number, cols: number, blockBytes: number, quantBytes: number, what: string): QuantBlocks {
  checkBlocks(cols, what);
  const nb = (rows * cols) / QK;
  if (raw.byteLength < nb * blockBytes) throw new Error(`${what}: ${raw.byteLength} bytes, expected ${nb * blockBytes}`);
  const data = new Uint8Array(nb * quantBytes);
  const scales = new Float32Array(nb);
  for (let b = 0; b < nb; b++) {
    const o = b * blockBytes;
    scales[b] = f16ToF32(raw[o]! | (raw[o + 1]! << 8));
    data.set(raw.subarray(o + 2, o + 2 + quantBytes), b * quantBytes);
  }
  return { data, scales };
}

/** Raw GGUF Q8_0 blocks (f16 d + 32 int8 = 34 bytes) -> {data, scales}. */
export function repackGgufQ8_0(raw: Uint8Array, rows: number, cols: number): QuantBlocks {
  return repack(raw, rows, cols, 34, 32, 'repackGgufQ8_0');
}

/** Raw GGUF Q4_0 blocks (f16 d + 16 bytes of nibbles = 18 bytes) -> {data, scales}. */
export function repackGgufQ4_0(raw: Uint8Array, rows: number, cols: number): QuantBlocks {
  return repack(raw, rows, cols, 18, 16, 'repackGgufQ4_0');
}

/** Any weight encoding back to [rows, cols] f32 (each element f32(d * q) for quantized dtypes). */
export function dequantize(dtype: DType, src: QuantBlocks | Uint32Array | Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(rows * cols);
  if (dtype === 'f32') {
    out.set((src as Float32Array).subarray(0, rows * cols));
  } else if (dtype === 'f16') {
    const p = src as Uint32Array;
    const words = Math.ceil(cols / 2);
    for (let r = 0; r < rows; r++) {
      for (let k = 0; k < cols; k++) {
        const word = p[r * words + (k >> 1)]!;
        out[r * cols + k] = f16ToF32(k & 1 ? word >>> 16 : word & 0xffff);
      }
    }
  } else if (dtype === 'q8_0' || dtype === 'q4_0') {
    checkBlocks(cols, 'dequantize');
    const { data, scales } = src as QuantBlocks;
    const q8 = new Int8Array(data.buffer, data.byteOffset, data.byteLength);
    for (let b = 0; b < (rows * cols) / QK; b++) {
      const d = scales[b]!;
      for (let j = 0; j < QK; j++) {
        const q = dtype === 'q8_0' ? q8[b * QK + j]! : j < 16 ? (data[b * 16 + j]! & 15) - 8 : (data[b * 16 + j - 16]! >> 4) - 8;
        out[b * QK + j] = d * q;
      }
    }
  } else if (isKQuant(dtype)) {
    out.set(dequantizeKQuant(dtype, (src as QuantBlocks).data, rows, cols));
  } else {
    throw new Error(`dequantize: unsupported dtype ${dtype}`);
  }
  return out;
}

/** Encodes [rows, cols] f32 on the CPU, returning the packed form `dequantize` accepts. */
export function encodeWeight(src: Float32Array, rows: number, cols: number, dtype: DType): QuantBlocks | Uint32Array | Float32Array {
  switch (dtype) {
    case 'f32':
      return src;
    case 'f16':
      return packF16(src, rows, cols);
    case 'q8_0':
      return quantizeQ8_0(src, rows, cols);
    case 'q4_0':
      return quantizeQ4_0(src, rows, cols);
    default:
      throw new Error(`encodeWeight: unsupported weight dtype ${dtype}`);
  }
}

/** Quantizes/packs on the CPU and uploads a [rows, cols] weight tensor (caller destroys its buffers). */
export function uploadWeight(ctx: GpuContext, src: Float32Array, rows: number, cols: number, dtype: DType): Tensor {
  return uploadEncoded(ctx, encodeWeight(src, rows, cols, dtype), rows, cols, dtype);
}

/** Uploads an already encoded weight (from `encodeWeight` or a GGUF repack). */
export function uploadEncoded(ctx: GpuContext, enc: QuantBlocks | Uint32Array | Float32Array, rows: number, cols: number, dtype: DType): Tensor {
  if ('scales' in enc) return isKQuant(dtype) ? ctx.tensor(enc.data, [rows, cols], dtype) : ctx.tensor(enc.data, [rows, cols], dtype, enc.scales);
  return ctx.tensor(enc, [rows, cols], dtype);
}
