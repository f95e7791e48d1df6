/** CPU reference for scatter_rows.ts: x[at[i], :] = rows[i, :] in place (indices >= T skipped). */
export function scatterRowsRef(x: Float32Array, rows: Float32Array, at: Uint32Array, D: number): Float32Array {
  const T = x.length / D;
  const out = x.slice();
  at.forEach((r, i) => {
    if (r < T) out.set(rows.subarray(i * D, (i + 1) * D), r * D);
  });
  return out;
}
