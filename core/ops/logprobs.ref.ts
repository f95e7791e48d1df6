/** CPU reference for logprobs.ts: float64 log-softmax of raw logits [rows, V]; top-k by (value desc, id asc). */
import type { RowLogprobs } from './logprobs.ts';

export function logSoftmaxRef(row: Float32Array): Float64Array {
  let m = -Infinity;
  for (const v of row) m = Math.max(m, v);
  let s = 0;
  for (const v of row) s += Math.exp(v - m);
  const lse = m + Math.log(s);
  return Float64Array.from(row, (v) => v - lse);
}

export function logprobsRef(logits: Float32Array, V: number, ids: readonly number[], k: number): RowLogprobs[] {
  return ids.map((id, r) => {
    const row = logits.subarray(r * V, (r + 1) * V);
    const lp = logSoftmaxRef(row);
    const order = Array.from({ length: V }, (_, i) => i).sort((a, b) => row[b]! - row[a]! || a - b);
    return { id, logprob: lp[id]!, top: order.slice(0, Math.min(k, V)).map((i) => ({ id: i, logprob: lp[i]! })) };
  });
}
