/**
 * CPU reference for layer_norm.ts, float64 statistics. h = x (+ residual, rounded to
 * f32 as the GPU stores it); returns y and h. Shapes [rows, dim]; w, b [dim].
 */
export function layerNormRef(
  x: Float32Array,
  w: Float32Array,
  b: Float32Array | null,
  dim: number,
  eps: number,
  residual?: Float32Array,
): { y: Float32Array; sum: Float32Array } {
  const h = residual ? x.map((v, i) => v + residual[i]!) : x.slice();
  const y = new Float32Array(x.length);
  for (let r = 0; r < x.length / dim; r++) {
    const row = h.subarray(r * dim, (r + 1) * dim);
    let mean = 0;
    for (const v of row) mean += v;
    mean /= dim;
    let vr = 0;
    for (const v of row) vr += (v - mean) ** 2;
    const inv = 1 / Math.sqrt(vr / dim + eps);
    for (let i = 0; i < dim; i++) y[r * dim + i] = (row[i]! - mean) * inv * w[i]! + (b ? b[i]! : 0);
  }
  return { y, sum: h };
}
