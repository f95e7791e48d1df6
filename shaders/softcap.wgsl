// In-place soft-capping over a flat f32 array: y = cap * tanh(y / cap) (Gemma 2's final
// logits). tanh's argument is clamped to +-15, where tanh is 1 to within f32 rounding, so
// no backend's tanh overflows on exp(2x).
// Variants: VARIANT=cpu: one 4-element chunk per invocation (vec4 when VEC4, n % 4 == 0,
// else four bounds-checked scalars); VARIANT=gpu: one element per invocation.

@group(0) @binding(0) var<uniform> p: Params;
#if VEC4
@group(0) @binding(1) var<storage, read_write> y: array<vec4<f32>>;  // [n] f32
#else
@group(0) @binding(1) var<storage, read_write> y: array<f32>;        // [n] f32
#endif

const WG: u32 = {{WG}}u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * WG;
#if VEC4
  if (i >= p.count) { return; }  // p.count: vec4s
  y[i] = p.cap * tanh(clamp(y[i] * p.inv, vec4<f32>(-15.0), vec4<f32>(15.0)));
#elif VARIANT == gpu
  if (i >= p.count) { return; }
  y[i] = p.cap * tanh(clamp(y[i] * p.inv, -15.0, 15.0));
#else
  let e = i * 4u;
  for (var k = 0u; k < 4u; k++) {
    if (e + k < p.count) { y[e + k] = p.cap * tanh(clamp(y[e + k] * p.inv, -15.0, 15.0)); }
  }
#endif
}
