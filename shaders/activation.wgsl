// Activations, f32. Plain: y = act(x + bias?) over x [rows, n], bias [n].
// Gated (GATED=1): gu [T, 2I] (gate columns first, then up) -> y [T, I] = act(gate) * up.
// Defines:
//   ACT = silu | gelu (erf form) | gelu_tanh | relu | quick_gelu (CLIP: v * sigmoid(1.702 v)).
//   VARIANT=cpu: each invocation computes a 4-element chunk as vec4 (V = vec4<f32>); VEC4=1
//                binds the arrays as vec4<f32> (needs n % 4 == 0, or count % 4 == 0
//                without bias), else four bounds-checked scalar loads.
//   VARIANT=gpu: one element per invocation (V = f32), WG=256.
//   INPLACE=1:   x is the same buffer as y: read it from `y` (one read_write binding).
//   B_*:         binding numbers of the optional buffers (set by activation.ts).

@group(0) @binding(0) var<uniform> p: Params;
alias V = {{V}};  // compute type
alias S = {{S}};  // storage element
const WG: u32 = {{WG}}u;
const SW: u32 = {{SW}}u;  // elements per storage element: 4 when VEC4, else 1

#if GATED
@group(0) @binding(1) var<storage, read> gu: array<S>;       // [T, 2*I] f32
#elif !INPLACE
@group(0) @binding(1) var<storage, read> x: array<S>;        // [rows, n] f32
#endif
#if BIAS
@group(0) @binding({{B_BIAS}}) var<storage, read> bias: array<S>;  // [n] f32
#endif
@group(0) @binding({{B_Y}}) var<storage, read_write> y: array<S>;  // [rows, n] or [T, I] f32

fn actf(v: V) -> V {
#if ACT == silu
  return v / (V(1.0) + exp(min(-v, V(80.0))));
#elif ACT == relu
  return max(v, V(0.0));
#elif ACT == quick_gelu
  return v / (V(1.0) + exp(min(-1.702 * v, V(80.0))));
#elif ACT == gelu_tanh
  // 0.5 v (1 + tanh(u)) = v * sigmoid(2u): no tanh overflow for large |u|.
  let u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
  return v / (V(1.0) + exp(min(-2.0 * u, V(80.0))));
#elif ACT == gelu
  // 0.5 v (1 + erf(v / sqrt 2)) = 0.5 v erfc(-v / sqrt 2). erfc(z), z >= 0, by the
  // Chebyshev fit of Numerical Recipes (erfcc: relative error < 1.2e-7, so the
  // negative tail keeps its digits and |erf error| < 1.2e-7 everywhere).
  let z = abs(v) * 0.7071067811865476;
  let t = 1.0 / (1.0 + 0.5 * z);
  let q = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
        + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return select(0.5 * v * q, v - 0.5 * v * q, v >= V(0.0));
#endif
}

// Storage element i of the input (x, or y when in place).
#if !GATED
fn xin(i: u32) -> S {
#if INPLACE
  return y[i];
#else
  return x[i];
#endif
}
#endif

// Activation input and up value for storage element i of the output (element, or vec4 when VEC4).
fn pre(i: u32) -> S {
#if GATED
  let e = i * SW;
  return gu[(e / p.n * 2u * p.n + e % p.n) / SW];
#elif BIAS
  return xin(i) + bias[i % (p.n / SW)];
#else
  return xin(i);
#endif
}

#if GATED
fn up(i: u32) -> S {
  let e = i * SW;
  return gu[(e / p.n * 2u * p.n + p.n + e % p.n) / SW];
}
#endif

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * WG;  // storage element (gpu, VEC4) or 4-element chunk
#if VARIANT == gpu || VEC4
  if (i * SW >= p.count) { return; }
#if GATED
  y[i] = actf(pre(i)) * up(i);
#else
  y[i] = actf(pre(i));
#endif
#else
  let e = i * 4u;
  if (e >= p.count) { return; }
  var v = vec4<f32>(0.0);
#if GATED
  var u = vec4<f32>(0.0);
#endif
  for (var k = 0u; k < 4u; k++) {
    if (e + k < p.count) {
      v[k] = pre(e + k);
#if GATED
      u[k] = up(e + k);
#endif
    }
  }
#if GATED
  let r = actf(v) * u;
#else
  let r = actf(v);
#endif
  for (var k = 0u; k < 4u; k++) {
    if (e + k < p.count) { y[e + k] = r[k]; }
  }
#endif
}
