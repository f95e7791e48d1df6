/**
 * Speculative rejection sampling on the CPU (Leviathan et al. 2023, Chen et
 * al. 2023): with the draft's distributions q_i (from which the draft tokens
 * d_i were drawn) and the target's p_i for the same positions, accept d_i with
 * probability min(1, p_i(d_i) / q_i(d_i)); at the first rejection draw from
 * norm(max(0, p_i - q_i)) and stop; if all k are accepted draw one more token
 * from p_k. The emitted tokens are distributed exactly as k+1 sequential draws
 * from the target would be.
 *
 * Distributions are the processed ones each sampler draws from (temperature,
 * top-k, top-p, min-p as in core/ops/sample.ref.ts), as Float64Array [V]
 * summing to 1. Only used for rows without masks or penalties (the engine
 * does not speculate for those).
 */
import { pcg2d } from '../ops/pcg.ts';
import type { SamplingParams } from '../sampling/params.ts';

const F32_MAX = 3.4028234663852886e38;

/**
 * The distribution a sampled row (temperature > 0) draws from: softmax of
 * logits / temperature restricted to top-k, then top-p, then min-p (ties at a
 * threshold kept, as the GPU kernel and its reference do).
 */
export function processedProbs(logits: ArrayLike<number>, p: SamplingParams): Float64Array {
  const V = logits.length;
  const T = Math.fround(p.temperature);
  const order: number[] = [];
  for (let v = 0; v < V; v++) if (logits[v]! > -F32_MAX) order.push(v);
  const out = new Float64Array(V);
  if (!order.length) return out;
  order.sort((a, b) => logits[b]! - logits[a]! || a - b);
  const z = (v: number): number => logits[v]! / T;
  let n = order.length;
  if (p.topK > 0 && p.topK < n) {
    const kth = z(order[p.topK - 1]!);
    let m = p.topK;
    while (m < n && z(order[m]!) >= kth) m++;
    n = m;
  }
  const top = z(order[0]!);
  const w = new Float64Array(n);
  let S = 0;
  for (let i = 0; i < n; i++) S += w[i] = Math.exp(z(order[i]!) - top);
  const tp = Math.fround(p.topP);
  if (tp < 1) {
    const goal = tp * S;
    let cum = 0;
    let R = 0;
    for (; R < n; R++) {
      cum += w[R]!;
      if (cum >= goal) break;
    }
    R = Math.min(R, n - 1);
    let m = R + 1;
    while (m < n && w[m]! >= w[R]!) m++;
    n = m;
  }
  const mp = Math.fround(p.minP);
  let kept = 0;
  for (let i = 0; i < n; i++) {
    if (mp > 0 && w[i]! < mp) continue;
    out[order[i]!] = w[i]!;
    kept += w[i]!;
  }
  for (let v = 0; v < V; v++) out[v]! /= kept;
  return out;
}

/** First id (ascending) whose cumulative probability exceeds u; the last nonzero id if rounding leaves u unclaimed. */
export function drawFrom(p: ArrayLike<number>, u: number): number {
  let cum = 0;
  let last = 0;
  for (let v = 0; v < p.length; v++) {
    if (p[v]! <= 0) continue;
    last = v;
    cum += p[v]!;
    if (cum > u) return v;
  }
  return last;
}

/**
 * Uniform [0, 1) draws for one speculation round of a request: 24-bit values
 * hashed from (seed, round key, counter), apart from the GPU sampler's stream.
 */
export function uniformStream(seed: number, round: number): () => number {
  const s = pcg2d((seed ^ 0x6a09e667) >>> 0, round >>> 0)[0];
  let n = 0;
  return () => (pcg2d(s, n++)[0] >>> 8) / 16777216;
}

export interface Verdict {
  /** Tokens to emit: the accepted draft prefix, then one corrected or bonus token (1..k+1 tokens). */
  tokens: number[];
  /** Draft tokens accepted (0..k). */
  accepted: number;
}

/**
 * Rejection sampling of `drafts` (k tokens, d_i drawn from q[i]) against the
 * target distributions p (k + 1 rows).
 */
export function verifySampled(drafts: readonly number[], q: readonly Float64Array[], p: readonly Float64Array[], rand: () => number): Verdict {
  const k = drafts.length;
  if (q.length !== k || p.length !== k + 1) throw new Error(`verifySampled: ${k} drafts need ${k} q rows and ${k + 1} p rows`);
  const tokens: number[] = [];
  for (let i = 0; i < k; i++) {
    const d = drafts[i]!;
    const pd = p[i]![d]!;
    const qd = q[i]![d]!;
    if (qd > 0 && rand() * qd < pd) {
      tokens.push(d);
      continue;
    }
    // Rejected: draw from norm(max(0, p - q)).
    const V = p[i]!.length;
    const r = new Float64Array(V);
    let S = 0;
    for (let v = 0; v < V; v++) S += r[v] = Math.max(0, p[i]![v]! - q[i]![v]!);
    // S == 0 only if p == q up to rounding, where rejection has probability ~0: draw from p.
    tokens.push(S > 0 ? drawFrom(r, rand() * S) : drawFrom(p[i]!, rand()));
    return { tokens, accepted: i };
  }
  tokens.push(drawFrom(p[k]!, rand()));
  return { tokens, accepted: k };
}

/** Greedy verification: target argmax ids g (k + 1) against drafts d (k): emit g_0..g_m, m = first mismatch (or k). */
export function verifyGreedy(drafts: readonly number[], g: ArrayLike<number>): Verdict {
  let m = 0;
  while (m < drafts.length && g[m] === drafts[m]) m++;
  return { tokens: Array.from({ length: m + 1 }, (_, i) => g[i]!), accepted: m };
}
