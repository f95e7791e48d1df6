/**
 * CPU reference for rope.ts. Returns a rotated copy of `qkv [tokens, rowStride]`.
 * The angle is rounded to f32 exactly as the shader (and HF transformers) form
 * it, f32(pos) * invFreq[i] with invFreq from ropeInvFreq; cos/sin and the
 * optional per-head RMSNorm are evaluated in float64.
 */
import { ropeInvFreq, type RopeOptions } from './rope.ts';

export type RopeRefOptions = Omit<RopeOptions, 'qkNorm' | 'variant'> & {
  qkNorm?: { q: Float32Array; k: Float32Array; eps: number };
};

export function ropeRef(qkv: Float32Array, positions: Uint32Array, o: RopeRefOptions): Float32Array {
  const y = new Float32Array(qkv);
  const hd = o.headDim;
  const half = (o.rotaryDim ?? hd) / 2;
  const inv = ropeInvFreq(o);
  const head = new Float64Array(hd);
  for (let t = 0; t < o.tokens; t++) {
    const pos = Math.fround(positions[t]!);
    for (let h = 0; h < o.qHeads + o.kHeads; h++) {
      const base = t * o.rowStride + h * hd;
      for (let d = 0; d < hd; d++) head[d] = y[base + d]!;
      if (o.qkNorm) {
        const w = h < o.qHeads ? o.qkNorm.q : o.qkNorm.k;
        let s = 0;
        for (let d = 0; d < hd; d++) s += head[d]! ** 2;
        const r = 1 / Math.sqrt(s / hd + o.qkNorm.eps);
        for (let d = 0; d < hd; d++) head[d] = head[d]! * r * w[d]!;
      }
      for (let i = 0; i < half; i++) {
        const a = Math.fround(pos * inv[i]!);
        const c = Math.cos(a);
        const s = Math.sin(a);
        const [i0, i1] = o.style === 'interleaved' ? [2 * i, 2 * i + 1] : [i, i + half];
        const x0 = head[i0]!;
        const x1 = head[i1]!;
        head[i0] = x0 * c - x1 * s;
        head[i1] = x1 * c + x0 * s;
      }
      for (let d = 0; d < hd; d++) y[base + d] = head[d]!;
    }
  }
  return y;
}
