// Part of rope.wgsl and decode_megakernel.wgsl (#include _sincos): the rope angle's sin and cos,
// and the rotation of one pair by it.

// (sin a, cos a) for a >= 0 in f32, about 1 ulp for a < ~1e5 rad. Builtin sin/cos are
// not used: WGSL only promises 2^-11 absolute error and SwiftShader's are ~1e-4 off.
// Cody-Waite reduction by pi/2 (8-bit c1, c2: k * c exact for k < 2^16), then the
// cephes sinf/cosf minimax polynomials on [-pi/4, pi/4].
fn sincos(a: f32) -> vec2<f32> {
  let k = round(a * 0.6366197723675814);
  let r = ((a - k * 1.5703125) - k * 4.84466552734375e-4) + k * 6.397578431460715e-7;
  let z = r * r;
  let s = r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
  let c = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
  let q = u32(i32(k)) & 3u;  // quadrant
  let odd = (q & 1u) == 1u;
  let sn = select(s, c, odd);
  let cs = select(c, s, odd);
  return vec2<f32>(select(sn, -sn, (q & 2u) != 0u), select(cs, -cs, ((q + 1u) & 2u) != 0u));
}

// The pair (x0, x1) rotated by the angle whose (sin, cos) is sc: (x0 c - x1 s, x1 c + x0 s).
fn rotPair(x0: f32, x1: f32, sc: vec2<f32>) -> vec2<f32> {
  return vec2<f32>(x0 * sc.y - x1 * sc.x, x1 * sc.y + x0 * sc.x);
}
