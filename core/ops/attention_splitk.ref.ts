/**
 * CPU reference for attention_splitk.ts, phase by phase in float64: each (token, head, split)
 * gives the split's max score m, sum of exp(score - m) l and unnormalised accumulator; the
 * combine rescales by exp(m_s - max). Equal to attention.ref.ts's direct softmax up to
 * rounding (the numerics test checks both). Caches are f32 values ([numSlots, kvHeads,
 * headDim]; an f16 cache is passed dequantized).
 */
import type { SplitAttentionOptions } from './attention_splitk.ts';

export interface SplitPartial {
  m: number;
  l: number;
  acc: Float64Array;
}

/** The partial phase for one (token, query head): one entry per split (empty split: m -Infinity, l 0). */
export function splitPartialsRef(
  qkv: Float32Array,
  cacheK: Float32Array,
  cacheV: Float32Array,
  pos: number,
  seq: number,
  t: number,
  h: number,
  blockTables: Uint32Array,
  o: Required<Pick<SplitAttentionOptions, 'splitKeys'>> & Omit<SplitAttentionOptions, 'splitKeys'>,
  splits: number,
): SplitPartial[] {
  const { qHeads, kvHeads, headDim: hd, blockSize: bs } = o;
  const scale = o.scale ?? 1 / Math.sqrt(hd);
  const kvh = Math.floor(h / (qHeads / kvHeads));
  const lo = o.window ? Math.max(0, pos + 1 - o.window) : 0;
  const out: SplitPartial[] = [];
  for (let s = 0; s < splits; s++) {
    const from = lo + s * o.splitKeys;
    const to = Math.min(pos, from + o.splitKeys - 1);
    const scores: number[] = [];
    const rows: number[] = [];
    for (let j = from; j <= to; j++) {
      const slot = blockTables[seq * o.maxBlocksPerSeq + Math.floor(j / bs)]! * bs + (j % bs);
      const k = (slot * kvHeads + kvh) * hd;
      let dt = 0;
      for (let d = 0; d < hd; d++) dt += qkv[t * o.rowStride + h * hd + d]! * cacheK[k + d]!;
      dt *= scale;
      scores.push(o.softcap ? o.softcap * Math.tanh(dt / o.softcap) : dt);
      rows.push(k);
    }
    const m = scores.reduce((a, b) => Math.max(a, b), -Infinity);
    const acc = new Float64Array(hd);
    let l = 0;
    scores.forEach((sc, i) => {
      const w = Math.exp(sc - m);
      l += w;
      for (let d = 0; d < hd; d++) acc[d] = acc[d]! + w * cacheV[rows[i]! + d]!;
    });
    out.push({ m, l, acc });
  }
  return out;
}

/** The combine phase: out = sum_s exp(m_s - M) acc_s / sum_s exp(m_s - M) l_s. */
export function combineSplitsRef(parts: readonly SplitPartial[], hd: number): Float64Array {
  const M = parts.reduce((a, p) => Math.max(a, p.m), -Infinity);
  const out = new Float64Array(hd);
  let l = 0;
  for (const p of parts) {
    if (p.l === 0) continue;
    const f = Math.exp(p.m - M);
    l += f * p.l;
    for (let d = 0; d < hd; d++) out[d] = out[d]! + f * p.acc[d]!;
  }
  for (let d = 0; d < hd; d++) out[d] = out[d]! / l;
  return out;
}

/** Whole-op reference: [tokens, qHeads * headDim] through the split and combine phases. */
export function attentionSplitKRef(
  qkv: Float32Array,
  cacheK: Float32Array,
  cacheV: Float32Array,
  positions: Uint32Array,
  tokenSeq: Uint32Array,
  blockTables: Uint32Array,
  o: Required<Pick<SplitAttentionOptions, 'splitKeys'>> & Omit<SplitAttentionOptions, 'splitKeys'>,
  splits: number,
): Float32Array {
  const hd = o.headDim;
  const out = new Float32Array(o.tokens * o.qHeads * hd);
  for (let t = 0; t < o.tokens; t++) {
    for (let h = 0; h < o.qHeads; h++) {
      const parts = splitPartialsRef(qkv, cacheK, cacheV, positions[t]!, tokenSeq[t]!, t, h, blockTables, o, splits);
      out.set(combineSplitsRef(parts, hd), (t * o.qHeads + h) * hd);
    }
  }
  return out;
}
