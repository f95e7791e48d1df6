/**
 * CPU reference for matmul.ts, float64 accumulation:
 * y[M, N] = x[M, K] · W[N, K]ᵀ (+ bias[N]) (+ accumulateInto[M, N]).
 * W is the dequantized f32 weight (quant.ts `dequantize`), so the comparison isolates
 * the kernel from quantization error.
 */
export function matmulRef(
  x: Float32Array,
  M: number,
  K: number,
  wDequantF32: Float32Array,
  N: number,
  bias?: Float32Array,
  accumulateInto?: Float32Array,
): Float32Array {
  const y = new Float32Array(M * N);
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      let s = bias ? bias[n]! : 0;
      for (let k = 0; k < K; k++) s += x[m * K + k]! * wDequantF32[n * K + k]!;
      if (accumulateInto) s += accumulateInto[m * N + n]!;
      y[m * N + n] = s;
    }
  }
  return y;
}
