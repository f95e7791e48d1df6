// Part of matmul.wgsl and embedding.wgsl (#include _block_scale): q8_0 / q4_0 block scales as
// the GGUF blocks hold them, f16, packed two per u32 word in the `ws` binding (block i in the
// low half of word i / 2 when i is even; core/gpu/tensor.ts Tensor.scales).

// Scale of block i.
fn blockScale(i: u32) -> f32 {
  let h = unpack2x16float(ws[i >> 1u]);
  return select(h.x, h.y, (i & 1u) == 1u);
}
