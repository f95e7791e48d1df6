/**
 * CPU reference for embedding.ts over a dequantized f32 table [V, D]: out[t, :] =
 * table[ids[t], :] * scale + posTable[positions[t], :] + typeTable[typeIds[t], :],
 * out-of-range rows contributing zeros.
 */
export interface EmbeddingRefExtras {
  positions?: Uint32Array;
  posTable?: Float32Array;
  typeIds?: Uint32Array;
  typeTable?: Float32Array;
}

export function embeddingRef(ids: Uint32Array, table: Float32Array, D: number, scale = 1, ex: EmbeddingRefExtras = {}): Float32Array {
  const out = new Float32Array(ids.length * D);
  const addRow = (src: Float32Array | undefined, r: number | undefined, t: number, mul: number): void => {
    if (!src || r === undefined || r >= src.length / D) return;
    for (let c = 0; c < D; c++) out[t * D + c] = out[t * D + c]! + src[r * D + c]! * mul;
  };
  ids.forEach((id, t) => {
    addRow(table, id, t, scale);
    addRow(ex.posTable, ex.positions?.[t], t, 1);
    addRow(ex.typeTable, ex.typeIds?.[t], t, 1);
  });
  return out;
}
