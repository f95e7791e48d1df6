// LayerNorm over the last dimension: y = (h - mean) * rsqrt(var + eps) * w (+ b), biased
// variance, f32 accumulation, two-pass on data shifted by the row's first element K (so a
// large common offset costs no precision). h = x, or x + residual (RES=1), which SUM=1 also
// writes to `s` (pre-norm residual stream); later passes then read h back from `s`.
// Variants (PipelineKey defines):
//   SHARED=1: one workgroup of WG threads per row, tree reductions in workgroup memory.
//   SHARED=0: one invocation per row, no workgroup memory or barriers (CPU emulation).
// Aliasing: X_SRC / R_SRC name the binding x / residual are read from: their own, or `y` or
// `s` when that output is the same buffer (one buffer may not be bound read-only and
// read_write at once). Every element is read and then written by the same invocation,
// and K is read before any write, so the aliases are race-free. B_*: binding numbers.

@group(0) @binding(0) var<uniform> p: Params;
#if X_SRC == x
@group(0) @binding({{B_X}}) var<storage, read> x: array<f32>;    // [rows, dim]
#endif
#if RES && R_SRC == r
@group(0) @binding({{B_R}}) var<storage, read> res: array<f32>;  // [rows, dim]
#endif
@group(0) @binding({{B_W}}) var<storage, read> w: array<f32>;    // [dim]
#if BIAS
@group(0) @binding({{B_B}}) var<storage, read> b: array<f32>;    // [dim]
#endif
@group(0) @binding({{B_Y}}) var<storage, read_write> y: array<f32>;  // [rows, dim]
#if SUM
@group(0) @binding({{B_S}}) var<storage, read_write> s: array<f32>;  // [rows, dim], x + residual
#endif

const WG: u32 = {{WG}}u;

// h before any write of this row: x (+ residual).
fn h0(i: u32) -> f32 {
#if X_SRC == y
  var v = y[i];
#elif X_SRC == s
  var v = s[i];
#else
  var v = x[i];
#endif
#if RES && R_SRC == y
  v += y[i];
#elif RES && R_SRC == s
  v += s[i];
#elif RES
  v += res[i];
#endif
  return v;
}

// h after the first pass (which stored it to `s` when SUM).
fn h(i: u32) -> f32 {
#if SUM
  return s[i];
#else
  return h0(i);
#endif
}

fn affine(i: u32, c: u32, d: f32, inv: f32) {
#if BIAS
  y[i] = d * inv * w[c] + b[c];
#else
  y[i] = d * inv * w[c];
#endif
}

#if SHARED
// One array per reduction (no reuse barrier). The tree reductions are written out in
// main on purpose: on Dawn's OpenGL ES backend (Mesa llvmpipe) a workgroupBarrier()
// inside a helper function did not order the workgroup-memory accesses (invocations
// past the first 8 read a stale partial[0]).
var<workgroup> sums: array<f32, WG>;   // per-thread sum of (h - K)
var<workgroup> sqs: array<f32, WG>;    // per-thread sum of (h - mean)^2

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * 65535u;
  if (row >= p.rows) { return; }
  let base = row * p.dim;
  let K = h0(base);
  storageBarrier();  // K read by all before `s` (maybe aliasing x or residual) is written
  var s1: f32 = 0.0;
  for (var i = lid; i < p.dim; i += WG) {
    let v = h0(base + i);
#if SUM
    s[base + i] = v;
#endif
    s1 += v - K;
  }
  sums[lid] = s1;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride) { sums[lid] += sums[lid + stride]; }
    workgroupBarrier();
  }
  let m = sums[0] / f32(p.dim);  // mean - K
  var s2: f32 = 0.0;
  for (var i = lid; i < p.dim; i += WG) {
    let d = (h(base + i) - K) - m;
    s2 += d * d;
  }
  sqs[lid] = s2;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride) { sqs[lid] += sqs[lid + stride]; }
    workgroupBarrier();
  }
  let inv = inverseSqrt(sqs[0] / f32(p.dim) + p.eps);
  for (var i = lid; i < p.dim; i += WG) {
    affine(base + i, i, (h(base + i) - K) - m, inv);
  }
}
#else
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = gid.x + gid.y * nwg.x * WG;
  if (row >= p.rows) { return; }
  let base = row * p.dim;
  let K = h0(base);
  var s1: f32 = 0.0;
  for (var i = 0u; i < p.dim; i++) {
    let v = h0(base + i);
#if SUM
    s[base + i] = v;
#endif
    s1 += v - K;
  }
  let m = s1 / f32(p.dim);  // mean - K
  var s2: f32 = 0.0;
  for (var i = 0u; i < p.dim; i++) {
    let d = (h(base + i) - K) - m;
    s2 += d * d;
  }
  let inv = inverseSqrt(s2 / f32(p.dim) + p.eps);
  for (var i = 0u; i < p.dim; i++) {
    affine(base + i, i, (h(base + i) - K) - m, inv);
  }
}
#endif
