/** CPU reference for add.ts: out = a + b, rounded to f32. */
export function addRef(a: Float32Array, b: Float32Array): Float32Array {
  const y = new Float32Array(a.length);
  for (let i = 0; i < a.length; i++) y[i] = a[i]! + b[i]!;
  return y;
}
