/**
 * GGUF K-quant weights (Q4_K, Q5_K, Q6_K) as the matmul and embedding kernels read them:
 * the file's own 256-element super-blocks, uploaded as they are, so a K-quant model takes
 * on the device the bytes it takes in the file (Q6_K: 212 instead of 210 bytes per block,
 * padded so every block starts on a 32-bit word; +1%). Decoding happens in registers
 * (shaders/_kquant.wgsl). This module sizes, repacks and — for references and tests —
 * dequantizes those blocks on the CPU (through core/formats/gguf_quants.ts).
 */
import { dequantizeGguf, f32ToF16 } from '../formats/gguf_quants.ts';

export type KQuantDType = 'q4_k' | 'q5_k' | 'q6_k';

/** Elements per super-block. */
export const QK_K = 256;

/** Bytes per block in the file and on the device (the device pads Q6_K to whole words). */
export const KQUANT_BLOCK: Record<KQuantDType, { ggml: 'Q4_K' | 'Q5_K' | 'Q6_K'; file: number; device: number }> = {
  q4_k: { ggml: 'Q4_K', file: 144, device: 144 },
  q5_k: { ggml: 'Q5_K', file: 176, device: 176 },
  q6_k: { ggml: 'Q6_K', file: 210, device: 212 },
};

export function isKQuant(d: string): d is KQuantDType {
  return d === 'q4_k' || d === 'q5_k' || d === 'q6_k';
}

/** Our dtype for a ggml type name, or null when that type has no K-quant kernel. */
export function kquantFromGgml(t: string): KQuantDType | null {
  return t === 'Q4_K' ? 'q4_k' : t === 'Q5_K' ? 'q5_k' : t === 'Q6_K' ? 'q6_k' : null;
}

function checkCols(cols: number, what: string): void {
  if (cols % QK_K !== 0) throw new Error(`${what}: row length ${cols} is not a multiple of ${QK_K}`);
}

/** Device bytes of a [rows, cols] K-quant weight. */
export function kquantBytes(dtype: KQuantDType, rows: number, cols: number): number {
  checkCols(cols, 'kquantBytes');
  return rows * (cols / QK_K) * KQUANT_BLOCK[dtype].device;
}

/** The file's blocks of a [rows, cols] tensor -> the device layout (a copy only for Q6_K). */
export function repackKQuant(dtype: KQuantDType, raw: Uint8Array, rows: number, cols: number): Uint8Array {
  checkCols(cols, 'repackKQuant');
  const { file, device } = KQUANT_BLOCK[dtype];
  const nb = (rows * cols) / QK_K;
  if (raw.byteLength < nb * file) throw new Error(`repackKQuant ${dtype}: ${raw.byteLength} bytes, expected ${nb * file}`);
  if (file === device) return raw.byteOffset % 4 === 0 ? raw.subarray(0, nb * file) : raw.slice(0, nb * file);
  const out = new Uint8Array(nb * device);
  for (let b = 0; b < nb; b++) out.set(raw.subarray(b * file, (b + 1) * file), b * device);
  return out;
}

/** Device-layout blocks back to the file's layout (drops Q6_K's padding). */
export function unpadKQuant(dtype: KQuantDType, data: Uint8Array, rows: number, cols: number): Uint8Array {
  const { file, device } = KQUANT_BLOCK[dtype];
  if (file === device) return data;
  const nb = (rows * cols) / QK_K;
  const out = new Uint8Array(nb * file);
  for (let b = 0; b < nb; b++) out.set(data.subarray(b * device, b * device + file), b * file);
  return out;
}

/** Device-layout blocks -> [rows, cols] f32 (ggml's dequantize_row_* as gguf_quants.ts writes it). */
export function dequantizeKQuant(dtype: KQuantDType, data: Uint8Array, rows: number, cols: number): Float32Array {
  checkCols(cols, 'dequantizeKQuant');
  return dequantizeGguf(KQUANT_BLOCK[dtype].ggml, unpadKQuant(dtype, data, rows, cols), rows * cols);
}

/**
 * Random but valid blocks for tests and synthetic checkpoints: quants uniformly random,
 * f16 scales d (and dmin) of magnitude `scale` / 2^k so the dequantized values stay O(scale).
 * `seed` makes it reproducible. File layout (GGUF bytes).
 */
export function randomKQuantBlocks(dtype: KQuantDType, rows: number, cols: number, seed: number, scale = 0.05): Uint8Array {
  checkCols(cols, 'randomKQuantBlocks');
  const { file } = KQUANT_BLOCK[dtype];
  const nb = (rows * cols) / QK_K;
  const out = new Uint8Array(nb * file);
  let s = seed >>> 0 || 1;
  const rnd = (): number => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
  for (let i = 0; i < out.length; i++) out[i] = Math.floor(rnd() * 256);
  const half = (v: number): [number, number] => {
    const h = f32ToF16(v);
    return [h & 0xff, h >>> 8];
  };
  for (let b = 0; b < nb; b++) {
    const o = b * file;
    if (dtype === 'q6_k') {
      // y = d * sc * (q - 32), sc an int8 up to 127, q - 32 up to 32: d ~ scale / 2^10.
      [out[o + 208], out[o + 209]] = half((scale * (0.5 + rnd())) / 1024);
    } else {
      // y = d * sc * q - dmin * m with 6-bit sc, m and q up to 15 (31): d ~ scale / 2^9.
      [out[o], out[o + 1]] = half((scale * (0.5 + rnd())) / 512);
      [out[o + 2], out[o + 3]] = half((scale * (0.5 + rnd())) / 1024);
    }
  }
  return out;
}
