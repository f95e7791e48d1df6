/**
 * Host-side tensors as model loaders hand them to weight uploaders, the
 * WeightSource interface both safetensors and GGUF checkpoints implement, and
 * the loader's count of the host bytes it holds.
 *
 * Quantized GGUF blocks stay quantized on their way to the GPU (Q8_0/Q4_0
 * repacked, K-quants as in the file); bf16/f16 checkpoints arrive as IEEE
 * halves (`f16`, no f32 detour), f32 ones as f32. Tensors are loaded, converted
 * and uploaded one (fused) tensor at a time, so a load never holds a second
 * full copy of the model: `HostBytes` counts what is alive and its peak.
 */
import type { DType } from '../gpu/tensor.ts';
import { f16ToF32, f32ToF16 } from '../formats/gguf_quants.ts';
import { dequantize } from '../ops/quant.ts';
import type { KQuantDType } from '../ops/quant_k.ts';

export type HostTensor =
  | { kind: 'f32'; shape: number[]; data: Float32Array }
  /** IEEE half bits, row-major, rows NOT padded. */
  | { kind: 'f16'; shape: number[]; data: Uint16Array }
  | { kind: 'q8_0' | 'q4_0'; shape: number[]; data: Uint8Array; scales: Float32Array }
  /** K-quant super-blocks in the device layout (core/ops/quant_k.ts). */
  | { kind: KQuantDType; shape: number[]; data: Uint8Array };

export interface WeightSource {
  /** Tensor names available, in Hugging Face naming. */
  has(name: string): boolean;
  load(name: string): Promise<HostTensor>;
  /** Shape and file of a tensor from the headers alone (no data read); undefined: not present. */
  info?(name: string): { shape: readonly number[]; file: string; type: string } | undefined;
}

/** GPU weight dtype choices; `auto` keeps a GGUF's quantization and uses f16 for float checkpoints (see load.ts). */
export type WeightDType = Extract<DType, 'f32' | 'f16' | 'q8_0' | 'q4_0'> | 'auto';

/** Host bytes a tensor holds (data plus scales). */
export function hostBytes(t: HostTensor): number {
  return t.data.byteLength + ('scales' in t ? t.scales.byteLength : 0);
}

/**
 * The loader's count of host bytes it holds (tensors read, converted, fused, encoded),
 * and the peak of that count over the load. Sources and uploaders `hold` what they
 * allocate and `release` it when it is dead (the garbage collector frees it later; RSS
 * therefore runs somewhat above this count, which the memory bench measures).
 */
export class HostBytes {
  held = 0;
  peak = 0;
  hold(n: number): void {
    this.held += n;
    if (this.held > this.peak) this.peak = this.held;
  }
  release(n: number): void {
    this.held = Math.max(0, this.held - n);
  }
}

/** A tensor's values as f32 (dequantized / widened). */
export function hostToF32(t: HostTensor): Float32Array {
  if (t.kind === 'f32') return t.data;
  const rows = t.shape.length === 1 ? 1 : t.shape[0]!;
  const cols = t.shape[t.shape.length - 1]!;
  if (t.kind === 'f16') {
    const out = new Float32Array(t.data.length);
    for (let i = 0; i < out.length; i++) out[i] = f16ToF32(t.data[i]!);
    return out;
  }
  return dequantize(t.kind, { data: t.data, scales: 'scales' in t ? t.scales : new Float32Array(0) }, rows, cols);
}

/** A tensor's values as IEEE halves (f16 as is; others rounded to nearest even). */
export function hostToF16(t: HostTensor): Uint16Array {
  if (t.kind === 'f16') return t.data;
  const f = hostToF32(t);
  const out = new Uint16Array(f.length);
  for (let i = 0; i < f.length; i++) out[i] = f32ToF16(f[i]!);
  return out;
}

/**
 * Concatenates tensors along their first (row) dimension; all must share columns. Parts of
 * one kind stay in it; parts of different kinds are joined as f16 halves (f16 rounding, 16 bits
 * a weight). The Llama loader does not join mixed GGUF quant types this way: it keeps them as
 * LinearWeight parts (core/models/llama/weights.ts fusedLinear).
 */
export function concatRows(parts: readonly HostTensor[]): HostTensor {
  const first = parts[0]!;
  const cols = first.shape[first.shape.length - 1]!;
  const rows = parts.reduce((a, p) => a + p.shape[0]!, 0);
  for (const p of parts) {
    if (p.shape[p.shape.length - 1] !== cols) throw new Error('concatRows: mismatched parts');
  }
  const shape = [rows, cols];
  if (parts.some((p) => p.kind !== first.kind)) {
    const halves = parts.map(hostToF16);
    return { kind: 'f16', shape, data: joinTyped(halves, new Uint16Array(rows * cols)) };
  }
  switch (first.kind) {
    case 'f32':
      return { kind: 'f32', shape, data: joinTyped(parts.map((p) => p.data as Float32Array), new Float32Array(rows * cols)) };
    case 'f16':
      return { kind: 'f16', shape, data: joinTyped(parts.map((p) => p.data as Uint16Array), new Uint16Array(rows * cols)) };
    case 'q8_0':
    case 'q4_0': {
      const q = parts as readonly { data: Uint8Array; scales: Float32Array }[];
      const data = joinTyped(q.map((p) => p.data), new Uint8Array(q.reduce((a, p) => a + p.data.length, 0)));
      const scales = joinTyped(q.map((p) => p.scales), new Float32Array(q.reduce((a, p) => a + p.scales.length, 0)));
      return { kind: first.kind, shape, data, scales };
    }
    default: {
      const data = joinTyped(parts.map((p) => p.data as Uint8Array), new Uint8Array(parts.reduce((a, p) => a + p.data.length, 0)));
      return { kind: first.kind, shape, data };
    }
  }
}

function joinTyped<T extends Float32Array | Uint16Array | Uint8Array>(parts: readonly T[], out: T): T {
  let o = 0;
  for (const p of parts) {
    out.set(p as never, o);
    o += p.length;
  }
  return out;
}
