/** CPU references for activation.ts, in float64; `erf` accurate to ~1e-14. */
import type { Act } from './activation.ts';

/** erfc(x) with ~1e-14 relative accuracy (continued fraction for x >= 3, so the tail keeps its digits). */
export function erfc(x: number): number {
  if (x < 3) return 1 - erf(x);
  // erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), evaluated backwards.
  let f = x;
  for (let k = 80; k >= 1; k--) f = x + k / 2 / f;
  return Math.exp(-x * x) / Math.sqrt(Math.PI) / f;
}

/** erf(x): Maclaurin series for |x| < 3, 1 - erfc beyond. */
export function erf(x: number): number {
  if (Math.abs(x) >= 3) return Math.sign(x) * (1 - erfc(Math.abs(x)));
  let term = x;
  let sum = x;
  for (let n = 1; n < 80; n++) {
    term *= (-x * x) / n;
    sum += term / (2 * n + 1);
  }
  return (2 / Math.sqrt(Math.PI)) * sum;
}

export function actRef1(a: Act, v: number): number {
  switch (a) {
    case 'silu':
      return v / (1 + Math.exp(-v));
    case 'relu':
      return Math.max(v, 0);
    case 'gelu':
      return 0.5 * v * erfc(-v / Math.SQRT2);
    case 'quick_gelu':
      return v / (1 + Math.exp(-1.702 * v));
    case 'gelu_tanh':
      return 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));
  }
}

/** out = act(x + bias?), x [rows, n], bias [n]; x + bias rounded to f32 as on the GPU. */
export function actRef(a: Act, x: Float32Array, n: number, bias?: Float32Array): Float32Array {
  return x.map((v, i) => actRef1(a, bias ? Math.fround(v + bias[i % n]!) : v));
}

/** gu [T, 2*I] -> [T, I] = act(gate) * up. */
export function gatedActRef(a: Act, gu: Float32Array, inter: number): Float32Array {
  const T = gu.length / (2 * inter);
  const y = new Float32Array(T * inter);
  for (let t = 0; t < T; t++) {
    for (let j = 0; j < inter; j++) y[t * inter + j] = actRef1(a, gu[t * 2 * inter + j]!) * gu[t * 2 * inter + inter + j]!;
  }
  return y;
}
