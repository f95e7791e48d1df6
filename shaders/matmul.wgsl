// Linear layer: y[M, N] = x[M, K] · W[N, K]ᵀ (+ bias[N]) (+ old y when accumulating),
// f32 accumulation. W is f32, f16 (packed pairs, or native f16), q8_0 or q4_0 (repacked GGUF,
// see core/gpu/tensor.ts). The gpu kernels read every format through wat(): chunk c = elements
// 4c..4c+3 of a W row, dequantized to vec4<f32>; the cpu kernel has its own decoders.
// Variants (PipelineKey defines):
//   WDT  = f32 | f16 (unpack2x16float) | f16n (native f16, device has shader-f16) | q8_0 | q4_0
//          | q4_k | q5_k | q6_k (GGUF super-blocks as in the file, K % 256 == 0; decoded in
//          registers by _kquant's kq4(), KQ = WDT; the cpu kernel reads them through wat() too)
//   VEC  = K % 4 == 0: x (and f32/f16 W) bound with vec4-sized elements; else guarded scalar loads.
//   KIND = cpu:  no workgroup memory or barriers; each invocation owns MR rows × 8 columns
//                (fast on SwiftShader / llvmpipe).
//          gemv: (gpu, M <= 16, no `subgroups`) one workgroup of WG threads per 4 columns, K split
//                across threads, two-level reduction in workgroup memory; MR >= M rows share W reads.
//          sgemv: (gpu, M <= 16, `subgroups`) each subgroup owns QPW/subgroups quads of W rows,
//                K split over its lanes, subgroupAdd per row (_matmul_sgemv).
//          tile: (gpu, M > 16, low limits) 32×32 output tile per 64-thread workgroup, K staged 8 at a
//                time in workgroup memory, 4×4 outputs per thread.
//          tile64: (gpu, M > 16) 64×64 output tile per 256-thread workgroup, K staged 16 at a time,
//                4×4 outputs per thread (_matmul_tile64).
//   QBLK = (cpu, quantized) loop over whole 32-element blocks: one scale per block and column.
//   WTEX = (cpu, f32, VEC) W read from an rgba32float texture copy of the buffer holding it
//          (decode_megakernel.ts weightTexture: vec4 i at texel (i % TW, i / TW)); on llvmpipe a
//          texel load (read-only storage texture) costs ~1/10 of a vec4 storage load. Same fma order as the buffer variant.
//   XTEX = (WTEX) x read from an rgba32float texture the host copied it into (prefill on llvmpipe:
//          with M rows each x chunk is reloaded by every column group, ~43 ns per vec4 from a buffer).
//   NO   = (cpu) column octets per invocation (8 NO columns share each x chunk): 1 | 4 (WTEX).
//   NORM = (WTEX, NO 4) x is the residual stream and the kernel applies the input RMSNorm
//          itself: y = (x * rsqrt(mean(x^2) + eps) * wn) · Wᵀ, wn at vec4 p.wn4 of the weight
//          texture, each row's 1/rms summed as rms_norm.wgsl's cpu kernel (sequential squares),
//          h = (x * inv) * wn as there: bit-identical to rms_norm then matmul, without h's
//          round trip through a storage buffer (llvmpipe loads those lane by lane).
//   GATED = (WTEX, NO 4) W is [2N, K] (gate rows, then up rows) and y [M, N] =
//          silu(x · Wgᵀ) * (x · Wuᵀ) as activation.wgsl's gated silu: 16 output columns per
//          invocation (16 gate + 16 up columns share each x chunk), no gu buffer. No bias or
//          accumulation.
//   ROPE = (WTEX, NO 4) W is the fused qkv projection [(nH + 2 nKv) hd, K] and the epilogue
//          is rope_kv_write's (half-split pairs, full rotary, no q/k norm, f32 KV in r32float
//          textures): q heads rotated into y (the qkv rows: attention reads q there), k heads
//          rotated and v heads as computed stored at slots[m] of the layer's cache region
//          (k and v columns of y are left unwritten). An invocation owns 4 rotation-pair quads:
//          columns 4j.. and hd/2 + 4j.. of a head, so each pair's two elements are its own.
//   MR, WG: rows per invocation / per workgroup; workgroup size.
// Params: M, N, K in elements (GATED: N output columns, W has 2N rows); flags bit 0 = add bias,
//   bit 1 = accumulate into y; w4 (WTEX only) = vec4 index of W[0, 0] in the texture;
//   eps, wn4 (NORM only) = RMSNorm epsilon and the vec4 index of its weight in the texture;
//   hd, nH, nKv, kvBase4 (ROPE only) = head dim, q and kv heads, vec4 index of the layer's region
//   in the KV textures.
// Grids are 1-D folded into 2-D by grid1d(): linear workgroup id = wid.x + wid.y * 65535.
// Parts: _matmul_fusions (NORM, ROPE, GATED helpers), _matmul_gpu (the gemv and tile kernels),
// _matmul_sgemv (subgroup decode kernel), _matmul_tile64 (64×64 prefill tiles).
#if WDT == f16n
enable f16;
#endif

const WG: u32 = {{WG}}u;
const MR: u32 = {{MR}}u;  // rows per invocation (cpu) / per workgroup (gemv)

@group(0) @binding(0) var<uniform> p: Params;
#if XTEX
@group(0) @binding(1) var xt: texture_storage_2d<rgba32float, read>;  // x [M, K/4] copied in: vec4 i at texel (i % TW, i / TW)
#elif VEC
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;     // [M, K/4]
#else
@group(0) @binding(1) var<storage, read> x: array<f32>;           // [M, K]
#endif
#if WTEX
@group(0) @binding(2) var wt: texture_storage_2d<rgba32float, read>;                   // W [N, K/4] from vec4 index p.w4
const TW: u32 = {{TW}}u;                                          // texels per texture row (power of two)
const TW_LOG2: u32 = {{TW_LOG2}}u;
#elif WDT == f32 && VEC
@group(0) @binding(2) var<storage, read> w: array<vec4<f32>>;     // [N, K/4]
#elif WDT == f32
@group(0) @binding(2) var<storage, read> w: array<f32>;           // [N, K]
#elif WDT == f16 && VEC
@group(0) @binding(2) var<storage, read> w: array<vec2<u32>>;     // [N, K/4]: 4 halves per element
#elif WDT == f16
@group(0) @binding(2) var<storage, read> w: array<u32>;           // [N, ceil(K/2)]: 2 halves per u32
#elif WDT == f16n && VEC
@group(0) @binding(2) var<storage, read> w: array<vec4<f16>>;     // [N, K/4]
#elif WDT == f16n
@group(0) @binding(2) var<storage, read> w: array<f16>;           // [N, K rounded up to even]
#elif WDT == q4_k || WDT == q5_k || WDT == q6_k
@group(0) @binding(2) var<storage, read> kqw: array<u32>;         // [N, K/256 blocks of KQ_WORDS words]
#else
@group(0) @binding(2) var<storage, read> w: array<u32>;           // q8_0 [N, K/4] (4 int8 each) | q4_0 [N, K/8] (8 nibbles each)
#endif
#if WDT == q4_k || WDT == q5_k || WDT == q6_k
#include _kquant
#endif
#if WDT == q8_0 || WDT == q4_0
@group(0) @binding(3) var<storage, read> ws: array<u32>;          // [N, K/32] block scales, f16 pairs (block i: half i % 2 of word i / 2)
@group(0) @binding(4) var<storage, read> bias: array<f32>;        // [N] (dummy when flags bit 0 is clear)
@group(0) @binding(5) var<storage, read_write> y: array<f32>;     // [M, N]
#include _block_scale
#else
@group(0) @binding(3) var<storage, read> bias: array<f32>;        // [N] (dummy when flags bit 0 is clear)
@group(0) @binding(4) var<storage, read_write> y: array<f32>;     // [M, N]
#endif
#if ROPE
@group(0) @binding(5) var<storage, read> positions: array<u32>;   // [M] absolute positions
@group(0) @binding(6) var<storage, read> slots: array<u32>;       // [M] cache slots (0xffffffff: not stored)
@group(0) @binding(7) var<storage, read> invFreq: array<f32>;     // [hd / 2] radians per position
// f32 KV rows in r32float textures (core/ops/kv_write.ts KvTexture): float f at (f % 4096, f / 4096).
@group(0) @binding(8) var cacheK: texture_storage_2d<r32float, read_write>;
@group(0) @binding(9) var cacheV: texture_storage_2d<r32float, read_write>;
#endif

// ---- element access: callers hoist row bases (xbase / wbase) out of their K loops ----

// Base of x row m, in units of x's element type.
fn xbase(m: u32) -> u32 {
#if VEC
  return m * (p.K / 4u);
#else
  return m * p.K;
#endif
}

// x[row at base b, 4c..4c+3]; zero past K.
fn xat(b: u32, c: u32) -> vec4<f32> {
#if XTEX
  let i = b + c;
  return textureLoad(xt, vec2<u32>(i & (TW - 1u), i >> TW_LOG2));
#elif VEC
  return x[b + c];
#else
  let k = 4u * c;
  return vec4<f32>(select(0.0, x[b + k], k < p.K), select(0.0, x[b + k + 1u], k + 1u < p.K),
                   select(0.0, x[b + k + 2u], k + 2u < p.K), select(0.0, x[b + k + 3u], k + 3u < p.K));
#endif
}

// Base of W row n, in units of w's element type.
fn wbase(n: u32) -> u32 {
#if WTEX
  return p.w4 + n * (p.K / 4u);
#elif WDT == q4_k || WDT == q5_k || WDT == q6_k
  return n * (p.K / 256u) * KQ_WORDS;
#elif VEC && WDT != q4_0
  return n * (p.K / 4u);
#elif WDT == f32
  return n * p.K;
#elif WDT == f16
  return n * ((p.K + 1u) / 2u);
#elif WDT == f16n
  return n * (p.K + (p.K & 1u));
#else
  return n * (p.K / 8u);
#endif
}

// 8 nibbles of a q4_0 word -> 4 quants (shift 0: elements j..j+3; shift 4: elements j+16..j+19).
fn q4(word: u32, shift: u32) -> vec4<f32> {
  let v = (word >> shift) & 0x0F0F0F0Fu;
  return vec4<f32>(vec4<u32>(v, v >> 8u, v >> 16u, v >> 24u) & vec4<u32>(0xFFu)) - 8.0;
}

// 4 int8 quants of a q8_0 word (byte i = element i).
fn q8(word: u32) -> vec4<f32> {
  return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(word) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
}

// W[n, 4c..4c+3] as f32 (dequantized) for the row at base b = wbase(n); zero past K.
fn wat(b: u32, c: u32, n: u32) -> vec4<f32> {
#if WTEX
  let i = b + c;
  return textureLoad(wt, vec2<u32>(i & (TW - 1u), i >> TW_LOG2));
#elif WDT == f32 && VEC
  return w[b + c];
#elif WDT == f32
  let k = 4u * c;
  return vec4<f32>(select(0.0, w[b + k], k < p.K), select(0.0, w[b + k + 1u], k + 1u < p.K),
                   select(0.0, w[b + k + 2u], k + 2u < p.K), select(0.0, w[b + k + 3u], k + 3u < p.K));
#elif WDT == f16 && VEC
  let q = w[b + c];
  return vec4<f32>(unpack2x16float(q.x), unpack2x16float(q.y));
#elif WDT == f16
  // Row stride ceil(K/2) words; the padding half of an odd row is zero and x is zero there.
  let i = 2u * c;
  return vec4<f32>(unpack2x16float(w[b + i]), unpack2x16float(select(0u, w[b + i + 1u], i + 1u < (p.K + 1u) / 2u)));
#elif WDT == f16n && VEC
  return vec4<f32>(w[b + c]);
#elif WDT == f16n
  let k = 4u * c;
  return vec4<f32>(select(0.0, f32(w[b + k]), k < p.K), select(0.0, f32(w[b + k + 1u]), k + 1u < p.K),
                   select(0.0, f32(w[b + k + 2u]), k + 2u < p.K), select(0.0, f32(w[b + k + 3u]), k + 3u < p.K));
#elif WDT == q8_0
  return q8(w[b + c]) * blockScale(n * (p.K / 32u) + c / 8u);
#elif WDT == q4_k || WDT == q5_k || WDT == q6_k
  return kq4(b + (c / 64u) * KQ_WORDS, (4u * c) % 256u);
#else
  let j = c % 8u;
  return q4(w[b + (c / 8u) * 4u + (j & 3u)], select(0u, 4u, j >= 4u)) * blockScale(n * (p.K / 32u) + c / 8u);
#endif
}

// Epilogue for y[m, y0 + n] = v (+ bias[n]) (+ old y), y rows ldy apart; out-of-range (m, n) are skipped.
fn store(m: u32, n: u32, v: f32) {
  if (m >= p.M || n >= p.N) { return; }
  let o = m * p.ldy + p.y0 + n;
  var r = v;
  if ((p.flags & 1u) != 0u) { r += bias[n]; }
  if ((p.flags & 2u) != 0u) { r += y[o]; }
  y[o] = r;
}

// v + bias[n..n+3] where flags bit 0 says (the rope epilogues: a quad's sums before rotating).
fn withBias(v: vec4<f32>, n: u32) -> vec4<f32> {
  if ((p.flags & 1u) != 0u) { return v + vec4<f32>(bias[n], bias[n + 1u], bias[n + 2u], bias[n + 3u]); }
  return v;
}

fn storeRow(m: u32, n0: u32, v: vec4<f32>) {
  store(m, n0, v.x);
  store(m, n0 + 1u, v.y);
  store(m, n0 + 2u, v.z);
  store(m, n0 + 3u, v.w);
}

#if KIND == cpu
// Register block: MR rows (1..4) × 8 NO columns (2 NO quads) per invocation. Accumulators are
// mat4x4 columns (one per row) indexed by constants only: dynamically indexed function arrays
// become per-lane memory traffic on CPU emulators. Each x chunk is loaded once for 8 NO columns.
// Quant decoders leave bytes/nibbles in place, giving exact values times a power of two
// (undone through the block scale or x) to save ALU work, which emulators pay per lane.

const NO: u32 = {{NO}}u;  // column octets per invocation
const Q4_X = vec4<f32>(1.0, 0.00390625, 1.52587890625e-5, 5.9604644775390625e-8);  // 2^-8i
const Q8_D: f32 = 5.9604644775390625e-8;  // 2^-24: q8 quants decoded × 2^24

// x chunk c of the MR rows as matrix columns (unused rows: zero, folded away).
fn xload(c: u32, xb: vec4<u32>) -> mat4x4<f32> {
  let z = vec4<f32>(0.0);
#if MR == 1
  return mat4x4<f32>(xat(xb.x, c), z, z, z);
#elif MR == 2
  return mat4x4<f32>(xat(xb.x, c), xat(xb.y, c), z, z);
#elif MR == 3
  return mat4x4<f32>(xat(xb.x, c), xat(xb.y, c), xat(xb.z, c), z);
#else
  return mat4x4<f32>(xat(xb.x, c), xat(xb.y, c), xat(xb.z, c), xat(xb.w, c));
#endif
}

fn xscale(X: mat4x4<f32>, s: vec4<f32>) -> mat4x4<f32> {
  return mat4x4<f32>(X[0] * s, X[1] * s, X[2] * s, X[3] * s);
}

#include _matmul_fusions

#include _mr_step

// End of a quantized block: acc[i] = fma(part[i] - off[i], d, acc[i]) (d: the quad's scales).
fn blockEnd(acc: mat4x4<f32>, part: mat4x4<f32>, off: vec4<f32>, d: vec4<f32>) -> mat4x4<f32> {
  var r = acc;
  r[0] = fma(part[0] - off.x, d, r[0]);
#if MR == 2 || MR == 3 || MR == 4
  r[1] = fma(part[1] - off.y, d, r[1]);
#endif
#if MR == 3 || MR == 4
  r[2] = fma(part[2] - off.z, d, r[2]);
#endif
#if MR == 4
  r[3] = fma(part[3] - off.w, d, r[3]);
#endif
  return r;
}

// 4 int8 quants × 2^24: each byte moved to the top of an i32 (no sign-extension shifts).
fn q8t(wd: u32) -> vec4<f32> {
  return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(wd << 24u, wd << 16u, wd << 8u, wd) & vec4<u32>(0xFF000000u)));
}

// Nibble × 2^(8i) for byte i, nibbles left in place (shift 0: low nibbles, 4: high); the -8
// offset is applied per block through Σx.
fn q4t(wd: u32, shift: u32) -> vec4<f32> {
  return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(wd >> shift) & vec4<u32>(0xFu, 0xF00u, 0xF0000u, 0xF000000u)));
}

// The quad's weights at chunk c, transposed: [k][column] (float formats; f16 through
// unpack2x16float: exact for subnormal halves, which a bit-placement trick would turn into
// f32 denormals that SwiftShader flushes to zero, for ~13% more speed).
fn wquad(c: u32, b: vec4<u32>, n: vec4<u32>) -> mat4x4<f32> {
  return transpose(mat4x4<f32>(wat(b.x, c, n.x), wat(b.y, c, n.y), wat(b.z, c, n.z), wat(b.w, c, n.w)));
}

#if WDT == q8_0
fn q8quad(c: u32, b: vec4<u32>) -> mat4x4<f32> {
  return transpose(mat4x4<f32>(q8t(w[b.x + c]), q8t(w[b.y + c]), q8t(w[b.z + c]), q8t(w[b.w + c])));
}
#endif

fn q4quad(q: vec4<u32>, shift: u32) -> mat4x4<f32> {
  return transpose(mat4x4<f32>(q4t(q.x, shift), q4t(q.y, shift), q4t(q.z, shift), q4t(q.w, shift)));
}

// Columns n..n+3 clamped to N - 1 (tail columns re-read row N - 1; store() drops them).
fn quadCols(n: u32, nl: vec4<u32>) -> vec4<u32> {
  return min(vec4<u32>(n) + vec4<u32>(0u, 1u, 2u, 3u), nl);
}

fn wbases(n: vec4<u32>) -> vec4<u32> {
  return vec4<u32>(wbase(n.x), wbase(n.y), wbase(n.z), wbase(n.w));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = (wid.x + wid.y * 65535u) * WG + lid;
#if ROPE
  let no = ((p.nH + 2u * p.nKv) * (p.hd / 8u) + 3u) / 4u;  // groups of 4 rotation-pair quads
  let m0 = (t / no) * MR;
  let t0 = (t % no) * 4u;  // first pair quad
  let n0 = 0u;
#else
#if GATED
  let cols = 4u * NO;  // output columns per invocation: as many gate and up columns
#else
  let cols = 8u * NO;
#endif
  let no = (p.N + cols - 1u) / cols;  // column groups
  let m0 = (t / no) * MR;
  let n0 = (t % no) * cols;
#endif
  if (m0 >= p.M) { return; }
  // Clamped W rows / x rows: tails compute duplicates that store() drops.
  let nl = vec4<u32>(p.N - 1u);
#if ROPE
  // Quads (lo, hi) of pair quads t0 .. t0 + 3 (past the last: re-read it, ropePair drops them).
  let na = pairCols(t0, false, nl);
  let nb = pairCols(t0, true, nl);
#else
  let na = min(vec4<u32>(n0) + vec4<u32>(0u, 1u, 2u, 3u), nl);
  let nb = min(vec4<u32>(n0) + vec4<u32>(4u, 5u, 6u, 7u), nl);
#endif
  let ba = wbases(na);
  let bb = wbases(nb);
  let ml = p.M - 1u;
  let xb = vec4<u32>(xbase(m0), xbase(min(m0 + 1u, ml)), xbase(min(m0 + 2u, ml)), xbase(min(m0 + 3u, ml)));
  var acc = mat4x4<f32>();               // columns n0..n0+3
  var acd = mat4x4<f32>();               // columns n0+4..n0+7
#if QBLK
  // Whole 32-element blocks: Σ q·x per block, then one scale per block and column.
  let sb = p.K / 32u;
  for (var blk = 0u; blk < sb; blk++) {
    // Loop-local vars are zeroed explicitly: their zero-init is not re-run per iteration on SwiftShader.
    var pa: mat4x4<f32>;
    var pb: mat4x4<f32>;
    pa = mat4x4<f32>();
    pb = mat4x4<f32>();
#if WDT == q8_0
    for (var j = 0u; j < 8u; j++) {
      let c = blk * 8u + j;
      let X = xload(c, xb);
      pa = step(pa, q8quad(c, ba), X);
      pb = step(pb, q8quad(c, bb), X);
    }
    let off = vec4<f32>(0.0);
    let ds = Q8_D;
#else
    var sx: mat4x4<f32>;                 // Σx over the block, per row (for the -8 offset)
    sx = mat4x4<f32>();
    for (var j = 0u; j < 4u; j++) {
      let o = blk * 4u + j;
      let Xl = xload(blk * 8u + j, xb);
      let Xh = xload(blk * 8u + j + 4u, xb);
      sx += Xl + Xh;
      let Xls = xscale(Xl, Q4_X);
      let Xhs = xscale(Xh, Q4_X);
      let qa = vec4<u32>(w[ba.x + o], w[ba.y + o], w[ba.z + o], w[ba.w + o]);
      let qb = vec4<u32>(w[bb.x + o], w[bb.y + o], w[bb.z + o], w[bb.w + o]);
      pa = step(step(pa, q4quad(qa, 0u), Xls), q4quad(qa, 4u), Xhs);
      pb = step(step(pb, q4quad(qb, 0u), Xls), q4quad(qb, 4u), Xhs);
    }
    let e = vec4<f32>(8.0);
    let off = vec4<f32>(dot(sx[0], e), dot(sx[1], e), dot(sx[2], e), dot(sx[3], e));  // 8 Σx per row
    let ds = 1.0;
#endif
    let da = vec4<f32>(blockScale(na.x * sb + blk), blockScale(na.y * sb + blk), blockScale(na.z * sb + blk), blockScale(na.w * sb + blk)) * ds;
    let db = vec4<f32>(blockScale(nb.x * sb + blk), blockScale(nb.y * sb + blk), blockScale(nb.z * sb + blk), blockScale(nb.w * sb + blk)) * ds;
    acc = blockEnd(acc, pa, off, da);
    acd = blockEnd(acd, pb, off, db);
  }
#else
  // Octets 1..3 of NO = 4 (texture weights only): quad q = columns n0 + 4q .. n0 + 4q + 3, each
  // with the same fma chain per column as quads a, b (bit-identical to NO = 1).
#if NO == 4
#if ROPE
  let n2 = pairCols(t0 + 1u, false, nl);
  let n3 = pairCols(t0 + 1u, true, nl);
  let n4 = pairCols(t0 + 2u, false, nl);
  let n5 = pairCols(t0 + 2u, true, nl);
  let n6 = pairCols(t0 + 3u, false, nl);
  let n7 = pairCols(t0 + 3u, true, nl);
#elif GATED
  // Quads acc, acd, a2, a3: gate columns n0 .. n0 + 15; a4 .. a7: the same columns' up rows.
  let n2 = quadCols(n0 + 8u, nl);
  let n3 = quadCols(n0 + 12u, nl);
  let upRows = vec4<u32>(p.N);
  let n4 = na + upRows;
  let n5 = nb + upRows;
  let n6 = n2 + upRows;
  let n7 = n3 + upRows;
#else
  let n2 = quadCols(n0 + 8u, nl);
  let n3 = quadCols(n0 + 12u, nl);
  let n4 = quadCols(n0 + 16u, nl);
  let n5 = quadCols(n0 + 20u, nl);
  let n6 = quadCols(n0 + 24u, nl);
  let n7 = quadCols(n0 + 28u, nl);
#endif
  let b2 = wbases(n2);
  let b3 = wbases(n3);
  let b4 = wbases(n4);
  let b5 = wbases(n5);
  let b6 = wbases(n6);
  let b7 = wbases(n7);
  var a2 = mat4x4<f32>();
  var a3 = mat4x4<f32>();
  var a4 = mat4x4<f32>();
  var a5 = mat4x4<f32>();
  var a6 = mat4x4<f32>();
  var a7 = mat4x4<f32>();
#endif
  let nc = (p.K + 3u) / 4u;
#if NORM
  let inv = rowsInvRms(nc, xb);
#endif
  for (var c = 0u; c < nc; c++) {
#if NORM
    let X = xnorm(xload(c, xb), inv, c);
#else
    let X = xload(c, xb);
#endif
    acc = step(acc, wquad(c, ba, na), X);
    acd = step(acd, wquad(c, bb, nb), X);
#if NO == 4
    a2 = step(a2, wquad(c, b2, n2), X);
    a3 = step(a3, wquad(c, b3, n3), X);
    a4 = step(a4, wquad(c, b4, n4), X);
    a5 = step(a5, wquad(c, b5, n5), X);
    a6 = step(a6, wquad(c, b6, n6), X);
    a7 = step(a7, wquad(c, b7, n7), X);
#endif
  }
#endif
#if ROPE
  for (var i = 0u; i < MR; i++) {
    ropePair(m0 + i, t0, acc[i], acd[i]);
    ropePair(m0 + i, t0 + 1u, a2[i], a3[i]);
    ropePair(m0 + i, t0 + 2u, a4[i], a5[i]);
    ropePair(m0 + i, t0 + 3u, a6[i], a7[i]);
  }
#elif GATED
  // y = silu(gate) * up per output column (the activation kernel's vec4 expression).
  for (var i = 0u; i < MR; i++) {
    storeRow(m0 + i, n0, silu(acc[i]) * a4[i]);
    storeRow(m0 + i, n0 + 4u, silu(acd[i]) * a5[i]);
    storeRow(m0 + i, n0 + 8u, silu(a2[i]) * a6[i]);
    storeRow(m0 + i, n0 + 12u, silu(a3[i]) * a7[i]);
  }
#else
  // Epilogue as a loop (dynamic indexing is fine once per invocation): unrolled, the 8·MR·NO
  // stores dominate SwiftShader's compile time.
#if NO == 4
  var res = array<mat4x4<f32>, 8>(acc, acd, a2, a3, a4, a5, a6, a7);
#else
  var res = array<mat4x4<f32>, 2>(acc, acd);
#endif
  for (var i = 0u; i < MR; i++) {
    for (var h = 0u; h < 2u * NO; h++) { storeRow(m0 + i, n0 + 4u * h, res[h][i]); }
  }
#endif
}
#endif

#include _matmul_gpu
#include _matmul_sgemv
#include _matmul_tile64
