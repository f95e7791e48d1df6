/** CPU reference for rms_norm.ts, in float64 accumulation. Shapes as there. */
export function rmsNormRef(x: Float32Array, w: Float32Array, dim: number, eps: number, addOne = false): Float32Array {
  const rows = x.length / dim;
  const y = new Float32Array(x.length);
  for (let r = 0; r < rows; r++) {
    let s = 0;
    for (let i = 0; i < dim; i++) s += x[r * dim + i]! ** 2;
    const inv = 1 / Math.sqrt(s / dim + eps);
    for (let i = 0; i < dim; i++) y[r * dim + i] = x[r * dim + i]! * inv * (addOne ? 1 + w[i]! : w[i]!);
  }
  return y;
}
