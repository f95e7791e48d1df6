// Part of attention.wgsl, attention_splitk.wgsl, attention_prefill.wgsl and decode_megakernel.wgsl
// (#include _attention_common): the score cap, the int8 KV codes and the window start, shared
// so every attention computes alike.

// Score cap (SOFTCAP: softcap * tanh(x); identity otherwise, as in the decode megakernel).
fn capped(x: f32) -> f32 {
#if SOFTCAP
  return p.softcap * tanh(clamp(x, -15.0, 15.0));
#else
  return x;
#endif
}

fn capped4(x: vec4<f32>) -> vec4<f32> {
#if SOFTCAP
  return p.softcap * tanh(clamp(x, vec4<f32>(-15.0), vec4<f32>(15.0)));
#else
  return x;
#endif
}

#if Q8
// Four int8 codes of one word as f32 (byte b -> component b, sign-extended).
fn codes(w: u32) -> vec4<f32> {
  return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(w) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
}
#endif

// First attended position for a token at `pos` (window 0 = unlimited).
fn firstPos(pos: u32) -> u32 {
  if (p.window != 0u && pos + 1u > p.window) { return pos + 1u - p.window; }
  return 0u;
}
