// Part of matmul.wgsl (#include _matmul_fusions): the cpu kernel's fused prologue and
// epilogues with texture weights (NORM, ROPE, GATED; see the main file's header); uses its
// bindings, xload, store and the weight texture.

#if NORM
// 1 / rms of each of the MR rows over K (rows in vec4 components), each a sequential sum of
// squares in element order as rms_norm.wgsl's cpu kernel.
fn rowsInvRms(nc: u32, xb: vec4<u32>) -> vec4<f32> {
  var s = vec4<f32>(0.0);
  for (var c = 0u; c < nc; c++) {
    let T = transpose(xload(c, xb));  // T[j] = element 4c + j of the rows
    s += T[0] * T[0];
    s += T[1] * T[1];
    s += T[2] * T[2];
    s += T[3] * T[3];
  }
  return inverseSqrt(s / f32(p.K) + p.eps);
}

// x chunk c of the rows normed: (x * inv) * wn, rms_norm.wgsl's expression.
fn xnorm(X: mat4x4<f32>, inv: vec4<f32>, c: u32) -> mat4x4<f32> {
  let i = p.wn4 + c;
  let wn = textureLoad(wt, vec2<u32>(i & (TW - 1u), i >> TW_LOG2));
  return mat4x4<f32>(X[0] * inv.x * wn, X[1] * inv.y * wn, X[2] * inv.z * wn, X[3] * inv.w * wn);
}
#endif

#if ROPE
#include _sincos

// The KV textures' layout (stK / stV: k and v come from different invocations here).
fn kvBase4() -> u32 { return p.kvBase4; }
#include _kv_texture

// Rotation pair quad `t` of row m: lo = elements 4j..4j+3 of head h, hi = the same + hd / 2
// (t = h * hd / 8 + j), as computed (+ bias). rope.wgsl's rotate() per element, then q to y,
// k and v to the cache as rope_kv_write stores them.
fn ropePair(m: u32, t: u32, lo: vec4<f32>, hi: vec4<f32>) {
  let hp = p.hd / 8u;  // pair quads per head
  let h = t / hp;
  let j = t % hp;
  if (m >= p.M || h >= p.nH + 2u * p.nKv) { return; }
  let c0 = h * p.hd + 4u * j;
  let c1 = c0 + p.hd / 2u;
  let x0 = withBias(lo, c0);
  let x1 = withBias(hi, c1);
  let slot = slots[m];
  let hd4 = p.hd / 4u;
  if (h >= p.nH + p.nKv) {  // v head: stored as computed
    if (slot != 0xffffffffu) {
      let row = (slot * p.nKv + h - p.nH - p.nKv) * hd4;
      stV(row, j, x0);
      stV(row, hd4 / 2u + j, x1);
    }
    return;
  }
  let pos = f32(positions[m]);
  var cs = vec4<f32>(0.0);
  var sn = vec4<f32>(0.0);
  for (var e = 0u; e < 4u; e++) {
    let sc = sincos(pos * invFreq[4u * j + e]);
    cs[e] = sc.y;
    sn[e] = sc.x;
  }
  let y0 = x0 * cs - x1 * sn;
  let y1 = x1 * cs + x0 * sn;
  if (h < p.nH) {
    let o = m * p.N;
    for (var e = 0u; e < 4u; e++) {
      y[o + c0 + e] = y0[e];
      y[o + c1 + e] = y1[e];
    }
  } else if (slot != 0xffffffffu) {
    let row = (slot * p.nKv + h - p.nH) * hd4;
    stK(row, j, y0);
    stK(row, hd4 / 2u + j, y1);
  }
}
#endif

#if GATED
// activation.wgsl's silu.
fn silu(v: vec4<f32>) -> vec4<f32> {
  return v / (vec4<f32>(1.0) + exp(min(-v, vec4<f32>(80.0))));
}
#endif

#if ROPE
// W rows (qkv columns) of rotation-pair quad t: 4j.. of head t / (hd / 8), or (hi) hd / 2 + 4j..
fn pairCols(t: u32, hi: bool, nl: vec4<u32>) -> vec4<u32> {
  let hp = p.hd / 8u;
  let c = (t / hp) * p.hd + 4u * (t % hp) + select(0u, p.hd / 2u, hi);
  return min(vec4<u32>(c) + vec4<u32>(0u, 1u, 2u, 3u), nl);
}
#endif
