/**
 * Host-side tails of an encoder, applied per input to its last hidden states h [n, D]
 * (the n real tokens only, so padding is excluded by construction): sentence-transformers
 * pooling (CLS, max, mean, mean / sqrt(n), position-weighted mean, last token; several
 * modes concatenate in that order, as sentence-transformers does), Dense modules, L2
 * normalization, and the sequence-classification heads. All f32 in, float64 accumulation,
 * f32 out. These touch one vector per input, so the host is the right place (see
 * weights.ts for why they are not GPU kernels).
 */
import type { ClassifierSpec, PoolingMode, StModule } from './config.ts';
import type { HostLinear } from './weights.ts';

/** y = act(W x + b); W [out, in] row-major. */
export function linear(l: HostLinear, x: Float32Array, activation: 'tanh' | 'identity' = 'identity'): Float32Array {
  if (x.length !== l.inFeatures) throw new Error(`linear: input has ${x.length} features, expected ${l.inFeatures}`);
  const y = new Float32Array(l.outFeatures);
  for (let o = 0; o < l.outFeatures; o++) {
    let s = l.b ? l.b[o]! : 0;
    const row = o * l.inFeatures;
    for (let i = 0; i < l.inFeatures; i++) s += l.w[row + i]! * x[i]!;
    y[o] = activation === 'tanh' ? Math.tanh(s) : s;
  }
  return y;
}

/** One pooling mode over h [n, D] (n >= 1 real tokens). */
export function pool1(h: Float32Array, n: number, D: number, mode: PoolingMode): Float32Array {
  const out = new Float32Array(D);
  if (n === 0) return out;
  if (mode === 'cls' || mode === 'lasttoken') {
    const r = mode === 'cls' ? 0 : n - 1;
    out.set(h.subarray(r * D, (r + 1) * D));
    return out;
  }
  if (mode === 'max') {
    for (let d = 0; d < D; d++) {
      let m = -Infinity;
      for (let t = 0; t < n; t++) m = Math.max(m, h[t * D + d]!);
      out[d] = m;
    }
    return out;
  }
  // mean, mean_sqrt_len: sum / n or sum / sqrt(n); weightedmean: positions weigh 1..n.
  const weight = (t: number): number => (mode === 'weightedmean' ? t + 1 : 1);
  const total = mode === 'weightedmean' ? (n * (n + 1)) / 2 : mode === 'mean' ? n : Math.sqrt(n);
  for (let d = 0; d < D; d++) {
    let s = 0;
    for (let t = 0; t < n; t++) s += h[t * D + d]! * weight(t);
    out[d] = s / total;
  }
  return out;
}

/** Several modes concatenated (sentence-transformers order: cls, max, mean, mean_sqrt_len, weightedmean, lasttoken). */
export function pool(h: Float32Array, n: number, D: number, modes: readonly PoolingMode[]): Float32Array {
  const order: PoolingMode[] = ['cls', 'max', 'mean', 'mean_sqrt_len', 'weightedmean', 'lasttoken'];
  const parts = order.filter((m) => modes.includes(m)).map((m) => pool1(h, n, D, m));
  if (parts.length === 1) return parts[0]!;
  const out = new Float32Array(parts.length * D);
  parts.forEach((p, i) => out.set(p, i * D));
  return out;
}

/** x / max(||x||_2, 1e-12), as torch.nn.functional.normalize. */
export function l2normalize(x: Float32Array): Float32Array {
  let s = 0;
  for (const v of x) s += v * v;
  const inv = 1 / Math.max(Math.sqrt(s), 1e-12);
  return x.map((v) => v * inv);
}

/** Runs the sentence-transformers modules after the Transformer; `normalize` overrides Normalize modules. */
export function runStModules(
  h: Float32Array,
  n: number,
  D: number,
  modules: readonly StModule[],
  dense: ReadonlyMap<string, HostLinear>,
  normalize?: boolean,
): Float32Array {
  let v: Float32Array | null = null;
  let normalized = false;
  for (const m of modules) {
    if (m.kind === 'pooling') v = pool(h, n, D, m.modes);
    else if (!v) throw new Error(`sentence-transformers ${m.kind} module before Pooling`);
    else if (m.kind === 'dense') v = linear(dense.get(m.path)!, v, m.activation);
    else if (normalize !== false) {
      v = l2normalize(v);
      normalized = true;
    }
  }
  if (!v) throw new Error('sentence-transformers pipeline has no Pooling module');
  return normalize && !normalized ? l2normalize(v) : v;
}

/** Host weights of a sequence-classification head. */
export interface ClassifierHead {
  spec: ClassifierSpec;
  /** bert: pooler.dense; roberta: classifier.dense. Both followed by tanh. */
  dense: HostLinear;
  /** bert: classifier; roberta: classifier.out_proj. */
  out: HostLinear;
}

/** Logits [labels] from the first token's hidden state (CLS / <s>). */
export function classifierLogits(head: ClassifierHead, first: Float32Array): Float32Array {
  return linear(head.out, linear(head.dense, first, 'tanh'));
}

export function sigmoid(x: number): number {
  return x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x));
}

export function softmax(x: ArrayLike<number>): number[] {
  const m = Math.max(...Array.from(x));
  const e = Array.from(x, (v) => Math.exp(v - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
}

/** Class scores per HF text-classification's function_to_apply. */
export function classScores(logits: Float32Array, activation: ClassifierSpec['activation']): number[] {
  if (activation === 'softmax') return softmax(logits);
  if (activation === 'sigmoid') return Array.from(logits, sigmoid);
  return Array.from(logits);
}

export function cosine(a: Float32Array, b: Float32Array): number {
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i]! * b[i]!;
    aa += a[i]! * a[i]!;
    bb += b[i]! * b[i]!;
  }
  return ab / Math.max(Math.sqrt(aa * bb), 1e-12);
}
