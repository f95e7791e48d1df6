/**
 * CPU reference for sample.ts, in float64 with explicit sorting: the
 * specification the GPU kernel is tested against. Same order and RNG:
 * mask -> penalties -> argmax (temperature 0) or / temperature -> top-k ->
 * top-p -> min-p -> first id (ascending) whose cumulative probability exceeds
 * u = uniform01(seed, step). `margin` reports how close a row came to a
 * decision boundary (CDF boundary, top-p / min-p / top-k threshold, greedy
 * gap): where it is below ~1e-5, f32 rounding on the GPU may pick a
 * neighbour; `near` lists the ids drawn at u -/+ NEAR (or the greedy runner-up).
 */
import { hasPenalties, NO_TOKEN } from '../sampling/params.ts';
import type { SampleRow } from './sample.ts';
import { pcg2d } from './pcg.ts';

export { pcg2d };

const F32_MAX = 3.4028234663852886e38;
/** Half-width of the u window whose draws `near` reports. */
export const NEAR = 1e-5;

/** The draw of sample `step` of a request seeded `seed`: 24-bit u in [0, 1), exact in f32. */
export function uniform01(seed: number, step: number): number {
  return (pcg2d(seed, step)[0] >>> 8) / 16777216;
}

export interface RefSample {
  id: number;
  /** Distance to the nearest decision boundary (probability / relative units). */
  margin: number;
  /** Ids a slightly perturbed computation could return instead (see file comment). */
  near: number[];
}

export function sampleRef(logits: Float32Array, V: number, rows: readonly SampleRow[], mask?: Uint32Array): Uint32Array {
  return Uint32Array.from(sampleRefDetailed(logits, V, rows, mask), (s) => s.id);
}

export function sampleRefDetailed(logits: Float32Array, V: number, rows: readonly SampleRow[], mask?: Uint32Array): RefSample[] {
  const W = Math.ceil(V / 32);
  return rows.map((row, b) => sampleRow(logits.subarray(b * V, (b + 1) * V), row, mask?.subarray(b * W, (b + 1) * W)));
}

function sampleRow(l: Float32Array, row: SampleRow, mask: Uint32Array | undefined): RefSample {
  const V = l.length;
  const p = row.params;
  // 1. mask (-inf / NaN logits count as disallowed), 2. penalties.
  const z = new Float64Array(V).fill(-Infinity);
  for (let v = 0; v < V; v++) {
    const ok = !mask || ((mask[v >>> 5]! >>> (v & 31)) & 1) === 1;
    if (ok && l[v]! > -F32_MAX) z[v] = l[v]!;
  }
  if (hasPenalties(p) && row.history) {
    const counts = new Map<number, number>();
    for (const t of row.history) if (t < V) counts.set(t, (counts.get(t) ?? 0) + 1);
    const rp = Math.fround(p.repetitionPenalty);
    for (const [t, c] of counts) {
      if (z[t] === -Infinity) continue;
      const x = l[t]! > 0 ? l[t]! / rp : l[t]! * rp;
      z[t] = x - (Math.fround(p.presencePenalty) + Math.fround(p.frequencyPenalty) * c);
    }
  }
  const gap = (hi: number, lo: number): number => (hi === lo ? Infinity : (hi - lo) / Math.max(1, Math.abs(hi)));
  const T = Math.fround(p.temperature);
  if (T === 0) {
    // 3. greedy: lowest-id argmax; the runner-up is the near alternative.
    let a = -1;
    let b = -1;
    for (let v = 0; v < V; v++) {
      if (z[v] === -Infinity) continue;
      if (a < 0 || z[v]! > z[a]!) (b = a), (a = v);
      else if (b < 0 || z[v]! > z[b]!) b = v;
    }
    if (a < 0) return { id: NO_TOKEN, margin: Infinity, near: [] };
    return { id: a, margin: b < 0 ? Infinity : gap(z[a]!, z[b]!), near: b < 0 ? [] : [b] };
  }
  // Allowed ids by value descending (ties: lower id first).
  const order: number[] = [];
  for (let v = 0; v < V; v++) if (z[v]! > -Infinity) order.push(v);
  if (!order.length) return { id: NO_TOKEN, margin: Infinity, near: [] };
  order.sort((a, b) => z[b]! - z[a]! || a - b);

  let margin = Infinity;
  const zt = (v: number): number => z[v]! / T;
  // 4. / temperature, top-k: keep z >= k-th largest (ties at the k-th value kept).
  let kept = order;
  if (p.topK > 0 && p.topK < order.length) {
    const kth = zt(order[p.topK - 1]!);
    let n = p.topK;
    while (n < order.length && zt(order[n]!) >= kth) n++;
    if (n < order.length) margin = Math.min(margin, gap(kth, zt(order[n]!)));
    kept = order.slice(0, n);
  }
  const m = zt(order[0]!);
  const w = new Map<number, number>(kept.map((v) => [v, Math.exp(zt(v) - m)]));
  const S = kept.reduce((a, v) => a + w.get(v)!, 0);
  // 5. top-p: smallest top set with mass >= topP (ties at its last value kept).
  const tp = Math.fround(p.topP);
  if (tp < 1) {
    const goal = tp * S;
    let cum = 0;
    let R = 0;
    for (; R < kept.length; R++) {
      const before = cum;
      cum += w.get(kept[R]!)!;
      if (cum >= goal) {
        margin = Math.min(margin, (cum - goal) / S, R > 0 ? (goal - before) / S : Infinity);
        break;
      }
    }
    R = Math.min(R, kept.length - 1);
    const t = w.get(kept[R]!)!;
    let n = R + 1;
    while (n < kept.length && w.get(kept[n]!)! >= t) n++;
    kept = kept.slice(0, n);
  }
  // 6. min-p: keep w >= minP * (top weight = 1).
  const mp = Math.fround(p.minP);
  if (mp > 0) {
    for (const v of kept) margin = Math.min(margin, Math.abs(w.get(v)! - mp) / mp);
    kept = kept.filter((v) => w.get(v)! >= mp);
  }
  // 7. draw: first id (ascending) whose cumulative probability exceeds u.
  const ids = [...kept].sort((a, b) => a - b);
  const S2 = ids.reduce((a, v) => a + w.get(v)!, 0);
  const cdf: number[] = [];
  ids.reduce((a, v) => (cdf.push(a + w.get(v)! / S2), a + w.get(v)! / S2), 0);
  const draw = (u: number): number => {
    const i = cdf.findIndex((c) => c > u);
    return i < 0 ? ids.length - 1 : i;
  };
  const u = uniform01(p.seed, row.step);
  const i = draw(u);
  margin = Math.min(margin, u - (i > 0 ? cdf[i - 1]! : 0), cdf[i]! - u);
  return { id: ids[i]!, margin, near: [ids[draw(u - NEAR)]!, ids[draw(u + NEAR)]!] };
}
