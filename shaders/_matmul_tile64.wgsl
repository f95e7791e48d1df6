// Part of matmul.wgsl (#include _matmul_tile64): KIND = tile64, the prefill / large-batch
// kernel: a 64x64 output tile per 256-invocation workgroup, 4x4 outputs per invocation
// (register blocking), K staged 16 elements (4 vec4 chunks) at a time in workgroup memory
// for x and for W (dequantized to f32 through the main file's wat(), so f16 and quantized
// weights are read from memory once per tile), f32 accumulation. Each staged chunk serves
// 64 rows or columns, twice the reuse of the 32x32 `tile` kernel; needs 256 invocations and
// 10 KiB of workgroup memory (matmulPlan picks `tile` where the adapter's limits are lower).
#if KIND == tile64
// Row stride 5 vec4s (not 4): invocations reading rows tx, tx + 16, ... at the same chunk hit
// different banks.
const T64_STRIDE: u32 = 5u;
var<workgroup> t64x: array<vec4<f32>, 320>;  // [64 rows of x, 4 chunks (+1 pad)]
var<workgroup> t64w: array<vec4<f32>, 320>;  // [64 rows of W, 4 chunks (+1 pad)], dequantized

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let tilesN = (p.N + 63u) / 64u;
  let g = wid.x + wid.y * 65535u;
  let m0 = (g / tilesN) * 64u;
  let n0 = (g % tilesN) * 64u;
  if (m0 >= p.M) { return; }             // uniform per workgroup
  let tx = lid % 16u;                    // columns n0 + tx + 16j
  let ty = lid / 16u;                    // rows m0 + ty + 16i
  // Staging: invocation lid loads chunk lid % 4 of tile row lid / 4 (4 consecutive invocations
  // read one 64-byte run of a row).
  let srow = lid / 4u;
  let skc = lid % 4u;
  let xb = xbase(min(m0 + srow, p.M - 1u));
  let wn = min(n0 + srow, p.N - 1u);
  let wb = wbase(wn);
  var acc: array<vec4<f32>, 4>;          // acc[i][j]: row m0 + ty + 16i, column n0 + tx + 16j
  let nc = (p.K + 3u) / 4u;
  for (var c0 = 0u; c0 < nc; c0 += 4u) {
    let c = c0 + skc;
    t64x[srow * T64_STRIDE + skc] = select(vec4<f32>(0.0), xat(xb, c), c < nc);
    t64w[srow * T64_STRIDE + skc] = select(vec4<f32>(0.0), wat(wb, c, wn), c < nc);
    workgroupBarrier();
    for (var kc = 0u; kc < 4u; kc++) {
      let wm = mat4x4<f32>(t64w[tx * T64_STRIDE + kc], t64w[(tx + 16u) * T64_STRIDE + kc],
                           t64w[(tx + 32u) * T64_STRIDE + kc], t64w[(tx + 48u) * T64_STRIDE + kc]);
      for (var i = 0u; i < 4u; i++) { acc[i] += t64x[(ty + 16u * i) * T64_STRIDE + kc] * wm; }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    for (var j = 0u; j < 4u; j++) { store(m0 + ty + 16u * i, n0 + tx + 16u * j, acc[i][j]); }
  }
}
#endif
