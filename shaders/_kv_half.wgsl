// Part of kv_write.wgsl, rope.wgsl, attention.wgsl and _kv_load_vec4.wgsl (#include _kv_half): the f16 KV rows
// (layout in core/ops/kv_write.ts): four elements as halves packed two per u32 word, element
// 2i in the low 16 bits of word i (unpack2x16float's order, and a native f16 array's bytes),
// so any adapter reads and writes them, shader-f16 or not.

// f16's largest finite value: pack2x16float of anything larger is undefined in WGSL.
const HALF_MAX: f32 = 65504.0;

// x as four halves in two words (components clamped to the finite f16 range).
fn half4(x: vec4<f32>) -> vec2<u32> {
  let c = clamp(x, vec4<f32>(-HALF_MAX), vec4<f32>(HALF_MAX));
  return vec2<u32>(pack2x16float(c.xy), pack2x16float(c.zw));
}

// The four elements of two words.
fn unhalf4(w: vec2<u32>) -> vec4<f32> {
  return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}
