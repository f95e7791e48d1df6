/**
 * Host-side tensors as model loaders hand them to weight uploaders, and the
 * WeightSource interface both safetensors and GGUF checkpoints implement.
 *
 * Quantized GGUF blocks stay quantized on their way to the GPU (repacked, not
 * dequantized); float checkpoints arrive as f32 and are packed to the
 * requested GPU dtype one tensor at a time, so loading never holds a second
 * full copy of the model in memory.
 */
import type { DType } from '../gpu/tensor.ts';

export type HostTensor =
  | { kind: 'f32'; shape: number[]; data: Float32Array }
  | { kind: 'q8_0' | 'q4_0'; shape: number[]; data: Uint8Array; scales: Float32Array };

export interface WeightSource {
  /** Tensor names available, in Hugging Face naming. */
  has(name: string): boolean;
  load(name: string): Promise<HostTensor>;
}

/** GPU weight dtype choices; `auto` keeps a GGUF's quantization and uses f32 otherwise. */
export type WeightDType = Extract<DType, 'f32' | 'f16' | 'q8_0' | 'q4_0'> | 'auto';

/** Concatenates tensors along their first (row) dimension; all must share kind and columns. */
export function concatRows(parts: readonly HostTensor[]): HostTensor {
  const first = parts[0]!;
  const cols = first.shape[first.shape.length - 1]!;
  const rows = parts.reduce((a, p) => a + p.shape[0]!, 0);
  for (const p of parts) {
    if (p.kind !== first.kind || p.shape[p.shape.length - 1] !== cols) throw new Error('concatRows: mismatched parts');
  }
  if (first.kind === 'f32') {
    const out = new Float32Array(rows * cols);
    let o = 0;
    for (const p of parts) {
      out.set(p.data as Float32Array, o);
      o += p.data.length;
    }
    return { kind: 'f32', shape: [rows, cols], data: out };
  }
  const data = new Uint8Array(parts.reduce((a, p) => a + p.data.length, 0));
  const scales = new Float32Array(parts.reduce((a, p) => a + (p as { scales: Float32Array }).scales.length, 0));
  let o = 0;
  let s = 0;
  for (const p of parts) {
    const q = p as { data: Uint8Array; scales: Float32Array };
    data.set(q.data, o);
    scales.set(q.scales, s);
    o += q.data.length;
    s += q.scales.length;
  }
  return { kind: first.kind, shape: [rows, cols], data, scales };
}
