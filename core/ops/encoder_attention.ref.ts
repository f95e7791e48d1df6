/**
 * CPU reference for encoder_attention.ts, written the direct way: per real query, float64
 * scores against every real key of its row, max-subtracted softmax, float64 weighted sum
 * of values. Padding query rows are zeros. Shapes as there.
 */
import type { EncoderAttentionOptions } from './encoder_attention.ts';

export function encoderAttentionRef(qkv: Float32Array, lengths: Uint32Array, o: Omit<EncoderAttentionOptions, 'variant'>): Float32Array {
  const { batch: B, seqLen: S, heads, headDim: hd, rowStride } = o;
  const kOff = o.kOffset ?? heads * hd;
  const vOff = o.vOffset ?? 2 * heads * hd;
  const scale = o.scale ?? 1 / Math.sqrt(hd);
  const out = new Float32Array(B * S * heads * hd);
  for (let b = 0; b < B; b++) {
    const n = Math.min(lengths[b]!, S);
    for (let i = 0; i < n; i++) {
      const t = b * S + i;
      for (let h = 0; h < heads; h++) {
        const q = t * rowStride + h * hd;
        const scores = new Float64Array(n);
        for (let j = 0; j < n; j++) {
          const k = (b * S + j) * rowStride + kOff + h * hd;
          let s = 0;
          for (let d = 0; d < hd; d++) s += qkv[q + d]! * qkv[k + d]!;
          scores[j] = s * scale;
        }
        const mx = Math.max(...scores);
        let sum = 0;
        for (let j = 0; j < n; j++) sum += (scores[j] = Math.exp(scores[j]! - mx));
        for (let d = 0; d < hd; d++) {
          let acc = 0;
          for (let j = 0; j < n; j++) acc += scores[j]! * qkv[(b * S + j) * rowStride + vOff + h * hd + d]!;
          out[(t * heads + h) * hd + d] = acc / sum;
        }
      }
    }
  }
  return out;
}
