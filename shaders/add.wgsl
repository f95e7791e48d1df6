// Elementwise add over flat f32 arrays: out = a + b (residual adds).
// Variants (PipelineKey defines):
//   VARIANT=cpu: each invocation adds one 4-element chunk; VEC4=1 binds the arrays as
//                vec4<f32> (n % 4 == 0), else four bounds-checked scalar loads.
//   VARIANT=gpu: one element per invocation, WG=256 (coalesced on real GPUs).
//   ALIAS=a|b:   `out` is the same buffer as a (or b): that operand is read from `y`,
//                since one buffer may not be bound both read-only and read_write.

@group(0) @binding(0) var<uniform> p: Params;
#if VEC4
alias V = vec4<f32>;
#else
alias V = f32;
#endif
#if ALIAS == a
@group(0) @binding(1) var<storage, read> b: array<V>;        // [n] f32
@group(0) @binding(2) var<storage, read_write> y: array<V>;  // [n] f32, holds a on entry
fn la(i: u32) -> V { return y[i]; }
fn lb(i: u32) -> V { return b[i]; }
#elif ALIAS == b
@group(0) @binding(1) var<storage, read> a: array<V>;        // [n] f32
@group(0) @binding(2) var<storage, read_write> y: array<V>;  // [n] f32, holds b on entry
fn la(i: u32) -> V { return a[i]; }
fn lb(i: u32) -> V { return y[i]; }
#else
@group(0) @binding(1) var<storage, read> a: array<V>;        // [n] f32
@group(0) @binding(2) var<storage, read> b: array<V>;        // [n] f32
@group(0) @binding(3) var<storage, read_write> y: array<V>;  // [n] f32
fn la(i: u32) -> V { return a[i]; }
fn lb(i: u32) -> V { return b[i]; }
#endif

const WG: u32 = {{WG}}u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * WG;  // element (gpu, VEC4) or 4-element chunk (cpu scalar)
#if VARIANT == gpu || VEC4
  if (i >= p.count) { return; }        // p.count: elements (gpu) or vec4s (VEC4)
  y[i] = la(i) + lb(i);
#else
  let e = i * 4u;
  for (var k = 0u; k < 4u; k++) {
    if (e + k < p.count) { y[e + k] = la(e + k) + lb(e + k); }
  }
#endif
}
