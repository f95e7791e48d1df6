// Part of decode_megakernel.wgsl (#include _megakernel_matmul): the register-blocked matmul of
// MR token rows; uses the main file's MR, NO, PS, smv/smw and wv/ws.
// ---- matmul: MR rows x 8 columns per invocation, exactly matmul.wgsl's cpu kernel ----
// Row i of the MR token rows has its activations at vec4 offset i * PS. Per (row, column) one
// fma chain over k ascending; each loaded W chunk serves the MR rows (on CPU emulation every
// per-lane load is a scalar gather, the dominant cost), each x chunk 8 columns. Tail columns
// re-read row N - 1 and are dropped by the caller.

struct Oct {
  a: mat4x4<f32>,  // a[i] = row i, columns n0..n0+3
  b: mat4x4<f32>,  // b[i] = row i, columns n0+4..n0+7
}

// fma4, step: matmul.wgsl's, shared.
#include _mr_step

// x chunk c of the MR rows (region offset xo within each row) as matrix columns.
fn xload(xo: u32, c: u32) -> mat4x4<f32> {
  let z = vec4<f32>(0.0);
#if MR == 1
  return mat4x4<f32>(smv(xo + c), z, z, z);
#elif MR == 2
  return mat4x4<f32>(smv(xo + c), smv(PS + xo + c), z, z);
#elif MR == 3
  return mat4x4<f32>(smv(xo + c), smv(PS + xo + c), smv(2u * PS + xo + c), z);
#else
  return mat4x4<f32>(smv(xo + c), smv(PS + xo + c), smv(2u * PS + xo + c), smv(3u * PS + xo + c));
#endif
}

// W rows r.x..r.w (vec4 indices of their starts) at k chunk c, as matrix columns.
fn wquad(r: vec4<u32>, c: u32) -> mat4x4<f32> {
  return transpose(mat4x4<f32>(wv(r.x + c), wv(r.y + c), wv(r.z + c), wv(r.w + c)));
}

// Row starts (vec4 indices) of W rows n..n+3 clamped to N - 1 (tail columns re-read row N - 1).
fn rowStarts(w4o: u32, k4: u32, n: u32, nl: vec4<u32>) -> vec4<u32> {
  return vec4<u32>(w4o) + min(vec4<u32>(n) + vec4<u32>(0u, 1u, 2u, 3u), nl) * k4;
}

// NO octets (columns n0 .. n0 + 8 NO - 1) of the MR rows: octet j = columns n0 + 8j ...
struct Octs {
  o: array<Oct, NO>,
}

// Rows n0.. of W [N, K] at element offset wo (K % 4 == 0, wo % 4 == 0) times the MR x rows:
// NO octets per call, so each x chunk read from workgroup memory serves 8 NO columns (on
// llvmpipe a workgroup-memory load costs ~6x a texel fetch; NO is chosen per adapter).
fn octDot(xo: u32, wo: u32, K: u32, n0: u32, N: u32) -> Octs {
  let nl = vec4<u32>(N - 1u);
  let k4 = K / 4u;
  let w4o = wo >> 2u;
  let r0 = rowStarts(w4o, k4, n0, nl);
  let r1 = rowStarts(w4o, k4, n0 + 4u, nl);
  var a0 = mat4x4<f32>();
  var b0 = mat4x4<f32>();
#if NO == 2 || NO == 4
  let r2 = rowStarts(w4o, k4, n0 + 8u, nl);
  let r3 = rowStarts(w4o, k4, n0 + 12u, nl);
  var a1 = mat4x4<f32>();
  var b1 = mat4x4<f32>();
#endif
#if NO == 4
  let r4 = rowStarts(w4o, k4, n0 + 16u, nl);
  let r5 = rowStarts(w4o, k4, n0 + 20u, nl);
  let r6 = rowStarts(w4o, k4, n0 + 24u, nl);
  let r7 = rowStarts(w4o, k4, n0 + 28u, nl);
  var a2 = mat4x4<f32>();
  var b2 = mat4x4<f32>();
  var a3 = mat4x4<f32>();
  var b3 = mat4x4<f32>();
#endif
  for (var c = 0u; c < k4; c++) {
    let X = xload(xo, c);
    a0 = step(a0, wquad(r0, c), X);
    b0 = step(b0, wquad(r1, c), X);
#if NO == 2 || NO == 4
    a1 = step(a1, wquad(r2, c), X);
    b1 = step(b1, wquad(r3, c), X);
#endif
#if NO == 4
    a2 = step(a2, wquad(r4, c), X);
    b2 = step(b2, wquad(r5, c), X);
    a3 = step(a3, wquad(r6, c), X);
    b3 = step(b3, wquad(r7, c), X);
#endif
  }
  var r: Octs;
  r.o[0] = Oct(a0, b0);
#if NO == 2 || NO == 4
  r.o[1] = Oct(a1, b1);
#endif
#if NO == 4
  r.o[2] = Oct(a2, b2);
  r.o[3] = Oct(a3, b3);
#endif
  return r;
}

// Stores the NO octets of octDot at vec4 offset o4 (+ old value when `acc`); columns >= N dropped.
fn putOcts(o4: u32, n0: u32, N: u32, v: Octs, acc: bool) {
  for (var j = 0u; j < NO; j++) { putOct(o4, n0 + 8u * j, N, v.o[j], acc); }
}

#if !VEC_I
// W row elements 4c..4c+3 at element offset b, zero past K (matmul.wgsl wat, f32, !VEC).
fn wS(b: u32, c: u32, K: u32) -> vec4<f32> {
  let k = 4u * c;
  return vec4<f32>(select(0.0, ws(b + k), k < K), select(0.0, ws(b + k + 1u), k + 1u < K),
                   select(0.0, ws(b + k + 2u), k + 2u < K), select(0.0, ws(b + k + 3u), k + 3u < K));
}

// As octDot for any K (rows not vec4-aligned); x rows are zero-padded past K.
fn octDotS(xo: u32, wo: u32, K: u32, n0: u32, N: u32) -> Oct {
  let nl = vec4<u32>(N - 1u);
  let ba = vec4<u32>(wo) + min(vec4<u32>(n0) + vec4<u32>(0u, 1u, 2u, 3u), nl) * K;
  let bb = vec4<u32>(wo) + min(vec4<u32>(n0) + vec4<u32>(4u, 5u, 6u, 7u), nl) * K;
  var acc = mat4x4<f32>();
  var acd = mat4x4<f32>();
  for (var c = 0u; c < (K + 3u) / 4u; c++) {
    let X = xload(xo, c);
    acc = step(acc, transpose(mat4x4<f32>(wS(ba.x, c, K), wS(ba.y, c, K), wS(ba.z, c, K), wS(ba.w, c, K))), X);
    acd = step(acd, transpose(mat4x4<f32>(wS(bb.x, c, K), wS(bb.y, c, K), wS(bb.z, c, K), wS(bb.w, c, K))), X);
  }
  return Oct(acc, acd);
}
#endif

// Stores an octet (columns n0..n0+7 of the MR rows) at vec4 offset o4 of each row region
// (+ the old value when `acc`: the residual add); columns >= N dropped.
fn putOct(o4: u32, n0: u32, N: u32, v: Oct, acc: bool) {
  let i0 = o4 + n0 / 4u;
  for (var i = 0u; i < MR; i++) {
    let o = i * PS + i0;
    if (n0 < N) { smw(o, select(v.a[i], v.a[i] + smv(o), acc)); }
    if (n0 + 4u < N) { smw(o + 1u, select(v.b[i], v.b[i] + smv(o + 1u), acc)); }
  }
}
