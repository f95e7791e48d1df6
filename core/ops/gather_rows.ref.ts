/** CPU reference for gather_rows.ts: out[i, :] = x[rows[i], :] (zeros when rows[i] >= T). */
export function gatherRowsRef(x: Float32Array, rows: Uint32Array, D: number): Float32Array {
  const T = x.length / D;
  const out = new Float32Array(rows.length * D);
  rows.forEach((r, i) => {
    if (r < T) out.set(x.subarray(r * D, (r + 1) * D), i * D);
  });
  return out;
}
