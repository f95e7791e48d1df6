// Part of rope.wgsl and decode_megakernel.wgsl (#include _kv_pack8): the int8 KV row codes
// (layout in core/ops/kv_write.ts), shared so both KV stores write the same bytes.

// Four int8 codes round(x * inv), clamped to +-127, packed into one word (x.b in byte b).
fn pack8(x: vec4<f32>, inv: f32) -> u32 {
  let q = clamp(vec4<i32>(round(x * inv)), vec4<i32>(-127), vec4<i32>(127));
  let b = bitcast<vec4<u32>>(q) & vec4<u32>(0xffu);
  return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}
