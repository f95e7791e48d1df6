// Part of matmul.wgsl and embedding.wgsl (#include _kquant): GGUF K-quant super-blocks
// (256 elements each) decoded in registers, four elements at a time. The including file
// binds the raw blocks as `kqw: array<u32>` and sets KQ = q4_k | q5_k | q6_k.
// Block layouts in 32-bit words (core/ops/quant_k.ts; bytes as in the GGUF file, little-endian):
//   q4_k: 36 words = d f16 | dmin f16, scales u8[12] (8 x 6-bit scale, 8 x 6-bit min), qs u8[128].
//         Element j: chunk g = j / 64, l = j % 32; nibble of qs[32 g + l] (low for j % 64 < 32,
//         sub-block 2g; high, sub-block 2g + 1). y = d * sc * q - dmin * m.
//   q5_k: 44 words = d | dmin, scales u8[12], qh u8[32], qs u8[128]; as q4_k plus a fifth bit:
//         bit (2g + high) of qh[l] adds 16 to q.
//   q6_k: 53 words (the file's 210 bytes padded to 212 so blocks stay word aligned) =
//         ql u8[128], qh u8[64], scales i8[16], d f16 (+ 2 zero bytes). Element j: half h = j / 128,
//         r = j % 128, g = r / 32, l = r % 32: low 4 bits from ql[64 h + 32 (g & 1) + l] (nibble g / 2),
//         high 2 bits from qh[32 h + l] (bits 2g, 2g + 1), scale scales[8 h + l / 16 + 2 g];
//         y = d * sc * (q - 32).

#if KQ == q4_k
const KQ_WORDS: u32 = 36u;
#elif KQ == q5_k
const KQ_WORDS: u32 = 44u;
#else
const KQ_WORDS: u32 = 53u;
#endif

// Byte i of the block starting at word wb.
fn kqByte(wb: u32, i: u32) -> u32 {
  return (kqw[wb + i / 4u] >> (8u * (i % 4u))) & 0xFFu;
}

// The 4 bytes of word v as a vec4 (byte 0 first).
fn kqBytes(v: u32) -> vec4<u32> {
  return vec4<u32>(v, v >> 8u, v >> 16u, v >> 24u) & vec4<u32>(0xFFu);
}

#if KQ == q4_k || KQ == q5_k
// d * scale and dmin * min of sub-block s (0..7): ggml's get_scale_min_k4 over bytes 4..15.
fn kqScaleMin(wb: u32, s: u32) -> vec2<f32> {
  var sc: u32;
  var m: u32;
  if (s < 4u) {
    sc = kqByte(wb, 4u + s) & 63u;
    m = kqByte(wb, 8u + s) & 63u;
  } else {
    let hi = kqByte(wb, 8u + s);
    sc = (hi & 0xFu) | ((kqByte(wb, s) >> 6u) << 4u);
    m = (hi >> 4u) | ((kqByte(wb, 4u + s) >> 6u) << 4u);
  }
  let dm = unpack2x16float(kqw[wb]);
  return vec2<f32>(dm.x * f32(sc), dm.y * f32(m));
}
#endif

// Elements j..j+3 (j % 4 == 0, j < 256) of the super-block starting at word wb, as f32.
fn kq4(wb: u32, j: u32) -> vec4<f32> {
#if KQ == q6_k
  let h = j / 128u;
  let r = j % 128u;
  let g = r / 32u;
  let l = r % 32u;
  let lo = (kqBytes(kqw[wb + (64u * h + 32u * (g & 1u) + l) / 4u]) >> vec4<u32>(4u * (g / 2u))) & vec4<u32>(0xFu);
  let hi = (kqBytes(kqw[wb + 32u + (32u * h + l) / 4u]) >> vec4<u32>(2u * g)) & vec4<u32>(3u);
  let sb = kqByte(wb, 192u + 8u * h + l / 16u + 2u * g);
  let sc = f32(bitcast<i32>(sb << 24u) >> 24u);
  let d = unpack2x16float(kqw[wb + 52u]).x * sc;
  return d * (vec4<f32>(lo | (hi << vec4<u32>(4u))) - 32.0);
#else
  let g = j / 64u;
  let up = (j % 64u) / 32u;  // 0: low nibbles (sub-block 2g), 1: high (2g + 1)
  let l = j % 32u;
#if KQ == q4_k
  let qw = kqw[wb + 4u + 8u * g + l / 4u];
  let q = vec4<f32>((kqBytes(qw) >> vec4<u32>(4u * up)) & vec4<u32>(0xFu));
#else
  let qw = kqw[wb + 12u + 8u * g + l / 4u];
  let hb = (kqBytes(kqw[wb + 4u + l / 4u]) >> vec4<u32>(2u * g + up)) & vec4<u32>(1u);
  let q = vec4<f32>(((kqBytes(qw) >> vec4<u32>(4u * up)) & vec4<u32>(0xFu)) + 16u * hb);
#endif
  let dm = kqScaleMin(wb, 2u * g + up);
  return dm.x * q - dm.y;
#endif
}
