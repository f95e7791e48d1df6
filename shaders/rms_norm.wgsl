// RMSNorm over the last dimension: y = x * rsqrt(mean(x^2) + eps) * w, f32 accumulation.
// Variants (PipelineKey defines):
//   SHARED=1: one workgroup of WG threads per row, tree reduction in workgroup memory
//             (real GPUs).
//   SHARED=0: one invocation per row, no workgroup memory or barriers (CPU emulation:
//             SwiftShader and llvmpipe run this several times faster).
//   ADD_ONE=1: weight stored as (w - 1) (Gemma convention): multiply by (1 + w).

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;        // [rows, dim]
@group(0) @binding(2) var<storage, read> w: array<f32>;        // [dim]
@group(0) @binding(3) var<storage, read_write> y: array<f32>;  // [rows, dim]

const WG: u32 = {{WG}}u;

fn scale(i: u32) -> f32 {
#if ADD_ONE
  return 1.0 + w[i];
#else
  return w[i];
#endif
}

#if SHARED
var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * 65535u;
  if (row >= p.rows) { return; }
  let base = row * p.dim;
  var s: f32 = 0.0;
  for (var i = lid; i < p.dim; i += WG) {
    let v = x[base + i];
    s += v * v;
  }
  partial[lid] = s;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride) { partial[lid] += partial[lid + stride]; }
    workgroupBarrier();
  }
  let inv = inverseSqrt(partial[0] / f32(p.dim) + p.eps);
  for (var i = lid; i < p.dim; i += WG) {
    y[base + i] = x[base + i] * inv * scale(i);
  }
}
#else
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = gid.x + gid.y * nwg.x * WG;
  if (row >= p.rows) { return; }
  let base = row * p.dim;
  var s: f32 = 0.0;
  for (var i = 0u; i < p.dim; i++) {
    let v = x[base + i];
    s += v * v;
  }
  let inv = inverseSqrt(s / f32(p.dim) + p.eps);
  for (var i = 0u; i < p.dim; i++) {
    y[base + i] = x[base + i] * inv * scale(i);
  }
}
#endif
