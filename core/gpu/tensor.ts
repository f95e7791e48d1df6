/**
 * GPU tensors: a buffer region plus shape and dtype. Plain data, no methods,
 * so they can cross from scheduler-facing code to the runner untouched.
 *
 * Storage per dtype (row-major, innermost dimension last):
 *   f32  — 4 bytes per element.
 *   f16  — two halves packed per u32 (element 2i in the low 16 bits); rows are
 *          padded to an even length so a row never splits a word.
 *   q8_0 — GGUF Q8_0 repacked for 4-byte alignment: `data` holds the int8
 *          quants (32 per block, 8 u32 per block), `scales` one f16 per block (scaleBytes).
 *   q4_0 — GGUF Q4_0 repacked: `data` holds 16 bytes per block in GGUF order
 *          (byte j: low nibble = element j, high nibble = element j+16),
 *          `scales` one f16 per block. Quant value = nibble - 8.
 *   q4_k / q5_k / q6_k — GGUF K-quant super-blocks of 256 elements as in the file
 *          (Q6_K padded from 210 to 212 bytes per block; core/ops/quant_k.ts), no `scales`.
 *   u32/i32 — 4 bytes per element (token ids, positions, block tables).
 */
export type DType = 'f32' | 'f16' | 'q8_0' | 'q4_0' | 'q4_k' | 'q5_k' | 'q6_k' | 'u32' | 'i32';

export interface Tensor {
  readonly buffer: GPUBuffer;
  /** Byte offset of element 0 within `buffer`. */
  readonly offset: number;
  readonly shape: readonly number[];
  readonly dtype: DType;
  /**
   * Per-block scales of q8_0 / q4_0 (one per 32 elements of a row): halves packed two per u32,
   * block i in the low half of word i / 2 when i is even — the GGUF blocks' own f16 `d`, so the
   * device holds the file's bytes (34 / 18 per 32 weights).
   */
  readonly scales?: GPUBuffer;
}

export const QK = 32; // elements per quantization block (GGUF Q8_0/Q4_0)

/** Bytes of the device scales buffer for `blocks` q8_0 / q4_0 blocks (f16 pairs in u32 words). */
export function scaleBytes(blocks: number): number {
  return Math.ceil(blocks / 2) * 4;
}

export function numel(shape: readonly number[]): number {
  let n = 1;
  for (let i = 0; i < shape.length; i++) n *= shape[i]!;
  return n;
}

/** Bytes of `data` for a tensor of this shape and dtype (quantized: quants only). */
export function byteLength(shape: readonly number[], dtype: DType): number {
  const n = numel(shape);
  const cols = shape[shape.length - 1] ?? 1;
  const rows = n / cols;
  switch (dtype) {
    case 'f16':
      return rows * Math.ceil(cols / 2) * 4;
    case 'q8_0':
      return rows * (cols / QK) * QK;
    case 'q4_0':
      return rows * (cols / QK) * (QK / 2);
    case 'q4_k':
      return rows * (cols / 256) * 144;
    case 'q5_k':
      return rows * (cols / 256) * 176;
    case 'q6_k':
      return rows * (cols / 256) * 212;
    default:
      return n * 4;
  }
}
