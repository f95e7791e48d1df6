/**
 * CPU reference for attention.ts: the same paged, ragged, causal GQA attention
 * written the direct way (gather the attended keys, float64 scores, max-
 * subtracted softmax, float64 weighted sum of values). Shapes as there; the
 * caches must already hold each token's own k/v (see kv_write.ref.ts).
 */
import type { AttentionOptions } from './attention.ts';

export function attentionRef(
  qkv: Float32Array,
  cacheK: Float32Array,
  cacheV: Float32Array,
  positions: Uint32Array,
  tokenSeq: Uint32Array,
  blockTables: Uint32Array,
  o: Omit<AttentionOptions, 'variant'>,
): Float32Array {
  const { qHeads, kvHeads, headDim: hd, blockSize: bs } = o;
  const scale = o.scale ?? 1 / Math.sqrt(hd);
  const out = new Float32Array(o.tokens * qHeads * hd);
  for (let t = 0; t < o.tokens; t++) {
    const pos = positions[t]!;
    const lo = o.window ? Math.max(0, pos + 1 - o.window) : 0;
    const slots: number[] = [];
    for (let j = lo; j <= pos; j++) slots.push(blockTables[tokenSeq[t]! * o.maxBlocksPerSeq + Math.floor(j / bs)]! * bs + (j % bs));
    for (let h = 0; h < qHeads; h++) {
      const kvh = Math.floor(h / (qHeads / kvHeads));
      const q = t * o.rowStride + h * hd;
      const scores = slots.map((slot) => {
        const k = (slot * kvHeads + kvh) * hd;
        let s = 0;
        for (let d = 0; d < hd; d++) s += qkv[q + d]! * cacheK[k + d]!;
        s *= scale;
        return o.softcap ? o.softcap * Math.tanh(s / o.softcap) : s;
      });
      const m = scores.reduce((a, b) => Math.max(a, b), -Infinity);
      const w = scores.map((s) => Math.exp(s - m));
      const sum = w.reduce((a, b) => a + b, 0);
      const acc = new Float64Array(hd);
      slots.forEach((slot, i) => {
        const v = (slot * kvHeads + kvh) * hd;
        for (let d = 0; d < hd; d++) acc[d] = acc[d]! + w[i]! * cacheV[v + d]!;
      });
      const dst = (t * qHeads + h) * hd;
      for (let d = 0; d < hd; d++) out[dst + d] = acc[d]! / sum;
    }
  }
  return out;
}
