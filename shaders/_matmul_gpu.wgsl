// Part of matmul.wgsl (#include _matmul_gpu): the gpu kernels (KIND = gemv | tile, see the
// main file's header); use its bindings and element access (xat, wat, store, storeRow).

#if KIND == gemv
// Workgroup arrays stay small: SwiftShader's compile time grows with their size (zero-init).
var<workgroup> red: array<vec4<f32>, WG>;       // one row's WG partial sums, lanes = 4 columns
var<workgroup> part: array<vec4<f32>, MR * 8u>; // [MR, 8] second-level partial sums

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let n0 = (wid.x + wid.y * 65535u) * 4u;
  if (n0 >= p.N) { return; }             // uniform per workgroup
  let last = p.N - 1u;
  let r0 = min(n0, last);
  let r1 = min(n0 + 1u, last);
  let r2 = min(n0 + 2u, last);
  let r3 = min(n0 + 3u, last);
  let w0 = wbase(r0);
  let w1 = wbase(r1);
  let w2 = wbase(r2);
  let w3 = wbase(r3);
  var acc: array<vec4<f32>, MR>;
  let nc = (p.K + 3u) / 4u;
  for (var c = lid; c < nc; c += WG) {   // adjacent threads read adjacent chunks of a W row
    let wm = mat4x4<f32>(wat(w0, c, r0), wat(w1, c, r1), wat(w2, c, r2), wat(w3, c, r3));
    for (var i = 0u; i < MR; i++) { acc[i] += xat(xbase(min(i, p.M - 1u)), c) * wm; }
  }
  // Two-level reduction, two barriers per row (CPU emulators pay dearly per barrier):
  // WG partials -> 8 sums of WG/8 -> one sum.
  for (var i = 0u; i < MR; i++) {
    red[lid] = acc[i];
    workgroupBarrier();
    if (lid < 8u) {
      var s = vec4<f32>(0.0);
      for (var k = lid; k < WG; k += 8u) { s += red[k]; }
      part[i * 8u + lid] = s;
    }
    workgroupBarrier();
  }
  if (lid < MR) {
    var s = vec4<f32>(0.0);
    for (var k = 0u; k < 8u; k++) { s += part[lid * 8u + k]; }
    storeRow(lid, n0, s);
  }
}
#endif

#if KIND == tile
// K staged 8 at a time; row stride 3 (not 2) vec4s so the 8 threads reading different rows hit
// different banks. Kept small: SwiftShader's compile time grows with workgroup array size.
var<workgroup> xt: array<vec4<f32>, 96>;  // [32 rows of x, 2 chunks (+1 pad)]
var<workgroup> wt: array<vec4<f32>, 96>;  // [32 rows of W, 2 chunks (+1 pad)], dequantized

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let tilesN = (p.N + 31u) / 32u;
  let g = wid.x + wid.y * 65535u;
  let m0 = (g / tilesN) * 32u;
  let n0 = (g % tilesN) * 32u;
  if (m0 >= p.M) { return; }             // uniform per workgroup
  let tx = lid % 8u;                     // columns n0 + tx + 8j
  let ty = lid / 8u;                     // rows m0 + ty + 8i
  var acc: array<vec4<f32>, 4>;          // acc[i][j]
  let nc = (p.K + 3u) / 4u;
  for (var c0 = 0u; c0 < nc; c0 += 2u) {
    // Thread lid stages chunk lid % 2 of tile row lid / 2 (consecutive threads: consecutive chunks).
    let row = lid / 2u;
    let kc = lid % 2u;
    let c = c0 + kc;
    let n = min(n0 + row, p.N - 1u);
    xt[row * 3u + kc] = select(vec4<f32>(0.0), xat(xbase(min(m0 + row, p.M - 1u)), c), c < nc);
    wt[row * 3u + kc] = select(vec4<f32>(0.0), wat(wbase(n), c, n), c < nc);
    workgroupBarrier();
    for (var kc = 0u; kc < 2u; kc++) {
      let wm = mat4x4<f32>(wt[tx * 3u + kc], wt[(tx + 8u) * 3u + kc], wt[(tx + 16u) * 3u + kc], wt[(tx + 24u) * 3u + kc]);
      for (var i = 0u; i < 4u; i++) { acc[i] += xt[(ty + 8u * i) * 3u + kc] * wm; }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    for (var j = 0u; j < 4u; j++) { store(m0 + ty + 8u * i, n0 + tx + 8u * j, acc[i][j]); }
  }
}
#endif
