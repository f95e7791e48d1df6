// Part of matmul.wgsl and decode_megakernel.wgsl (#include _mr_step): the register-blocked
// fma of MR token rows (MR 1..4, a define of the includer) with one weight quad per k chunk.

// a + Σ_k xk[k] · wt[k]  (wt[k] = the quad's 4 column weights at one k).
fn fma4(a: vec4<f32>, xk: vec4<f32>, wt: mat4x4<f32>) -> vec4<f32> {
  return fma(vec4<f32>(xk.w), wt[3], fma(vec4<f32>(xk.z), wt[2], fma(vec4<f32>(xk.y), wt[1], fma(vec4<f32>(xk.x), wt[0], a))));
}

// acc[i] += X[i] · wt for the MR rows (acc[i][j] = y[m0 + i, quad column j]).
fn step(acc: mat4x4<f32>, wt: mat4x4<f32>, X: mat4x4<f32>) -> mat4x4<f32> {
  var r = acc;
  r[0] = fma4(r[0], X[0], wt);
#if MR == 2 || MR == 3 || MR == 4
  r[1] = fma4(r[1], X[1], wt);
#endif
#if MR == 3 || MR == 4
  r[2] = fma4(r[2], X[2], wt);
#endif
#if MR == 4
  r[3] = fma4(r[3], X[3], wt);
#endif
  return r;
}
