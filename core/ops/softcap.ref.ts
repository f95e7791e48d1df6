/** CPU reference for softcap.ts: cap * tanh(y / cap) in float64, rounded to f32. */
export function softcapRef(y: Float32Array, cap: number): Float32Array {
  const out = new Float32Array(y.length);
  for (let i = 0; i < y.length; i++) out[i] = cap * Math.tanh(y[i]! / cap);
  return out;
}
