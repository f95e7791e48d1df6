// Token embedding gather: out[t, :] = table[ids[t], :] * scale (+ posTable[positions[t], :])
// (+ typeTable[typeIds[t], :]). Out-of-range ids / positions / type ids contribute zeros.
// Defines:
//   DTYPE = f32 | f16 (two per u32, rows padded to even D) | q8_0 | q4_0 (quants + one
//           f32 scale per 32 elements; layouts in core/gpu/tensor.ts; D % 32 == 0)
//           | q4_k | q5_k | q6_k (GGUF super-blocks, D % 256 == 0; _kquant, KQ = DTYPE).
//   POS=1 / TYPE=1: add the absolute-position / token-type rows (BERT, GPT-2 wpe).
//   VARIANT=cpu: one invocation per 4-column chunk of an output row (no workgroup memory).
//   VARIANT=gpu: one workgroup per token, threads stride the row's chunks.
//   B_*: binding numbers of the optional buffers (set by embedding.ts).
//   PART=1: the table holds rows p.base .. p.base + V - 1 of a larger one (a row-split weight):
//           ids are taken relative to p.base, and rows whose id falls outside the part are
//           left untouched, so the parts' dispatches together write every row once (the part
//           at base 0 runs first without PART, writing zeros for ids outside it).

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ids: array<u32>;      // [T] u32 token ids
#if DTYPE == f32
@group(0) @binding(2) var<storage, read> table: array<f32>;    // [V, D] f32
#elif DTYPE == q4_k || DTYPE == q5_k || DTYPE == q6_k
@group(0) @binding(2) var<storage, read> kqw: array<u32>;      // [V, D/256 super-blocks] (_kquant layouts)
#else
@group(0) @binding(2) var<storage, read> table: array<u32>;    // [V, D] f16 pairs / q8_0 / q4_0 quants
#endif
#if DTYPE == q4_k || DTYPE == q5_k || DTYPE == q6_k
#include _kquant
#endif
#if DTYPE == q8_0 || DTYPE == q4_0
@group(0) @binding(3) var<storage, read> ws: array<u32>;       // [V, D / 32] block scales, f16 pairs
#include _block_scale
#endif
#if POS
@group(0) @binding({{B_POS}}) var<storage, read> positions: array<u32>;  // [T] u32
@group(0) @binding({{B_PT}}) var<storage, read> posTable: array<f32>;    // [P, D] f32
#endif
#if TYPE
@group(0) @binding({{B_TY}}) var<storage, read> typeIds: array<u32>;     // [T] u32
@group(0) @binding({{B_TT}}) var<storage, read> typeTable: array<f32>;   // [TT, D] f32
#endif
@group(0) @binding({{B_OUT}}) var<storage, read_write> out: array<f32>;  // [T, D] f32

const WG: u32 = {{WG}}u;

// Table row r (< V), columns c0..c0+3 (c0 % 4 == 0; lanes at columns >= D are unused).
fn tok4(r: u32, c0: u32) -> vec4<f32> {
#if DTYPE == f32
  var v = vec4<f32>(0.0);
  for (var k = 0u; k < 4u; k++) {
    if (c0 + k < p.D) { v[k] = table[r * p.D + c0 + k]; }
  }
  return v;
#elif DTYPE == f16
  let w0 = r * ((p.D + 1u) / 2u) + c0 / 2u;  // u32 words per row: ceil(D / 2)
  var hi = vec2<f32>(0.0);
  if (c0 + 2u < p.D) { hi = unpack2x16float(table[w0 + 1u]); }
  return vec4<f32>(unpack2x16float(table[w0]), hi);
#elif DTYPE == q8_0
  let e = r * p.D + c0;  // element index: 4 int8 quants in one word, one block
  let q = bitcast<i32>(table[e / 4u]);
  let v = vec4<i32>(extractBits(q, 0u, 8u), extractBits(q, 8u, 8u), extractBits(q, 16u, 8u), extractBits(q, 24u, 8u));
  return vec4<f32>(v) * blockScale(e / 32u);
#elif DTYPE == q4_0
  let e = r * p.D + c0;
  let blk = e / 32u;
  let j = e % 32u;  // byte j % 16 of the block holds element j (low nibble) or j + 16 (high)
  let word = table[blk * 4u + (j % 16u) / 4u];
  let sh = select(0u, 4u, j >= 16u);
  let n = vec4<u32>(extractBits(word, sh, 4u), extractBits(word, sh + 8u, 4u), extractBits(word, sh + 16u, 4u), extractBits(word, sh + 24u, 4u));
  return (vec4<f32>(n) - 8.0) * blockScale(blk);
#else
  // K-quants (D % 256 == 0): 4 elements of one super-block.
  return kq4((r * (p.D / 256u) + c0 / 256u) * KQ_WORDS, c0 % 256u);
#endif
}

// Output row t, columns c0..c0+3.
fn emb4(t: u32, c0: u32) -> vec4<f32> {
  let id = ids[t] - p.base;  // wraps past V for ids below base
  var v = vec4<f32>(0.0);
  if (id < p.V) { v = tok4(id, c0) * p.scale; }
  for (var k = 0u; k < 4u; k++) {
    if (c0 + k >= p.D) { break; }
#if POS
    let pos = positions[t];
    if (pos < p.P) { v[k] += posTable[pos * p.D + c0 + k]; }
#endif
#if TYPE
    let ty = typeIds[t];
    if (ty < p.TT) { v[k] += typeTable[ty * p.D + c0 + k]; }
#endif
  }
  return v;
}

fn store4(t: u32, c0: u32, v: vec4<f32>) {
  for (var k = 0u; k < 4u; k++) {
    if (c0 + k < p.D) { out[t * p.D + c0 + k] = v[k]; }
  }
}

#if VARIANT == gpu
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = wid.x + wid.y * 65535u;
  if (t >= p.T) { return; }
#if PART
  if (ids[t] - p.base >= p.V) { return; }
#endif
  for (var c = lid; c < (p.D + 3u) / 4u; c += WG) {
    store4(t, c * 4u, emb4(t, c * 4u));
  }
}
#else
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let k = gid.x + gid.y * nwg.x * WG;  // 4-column chunk
  let nc = (p.D + 3u) / 4u;            // chunks per row
  let t = k / nc;
  if (t >= p.T) { return; }
#if PART
  if (ids[t] - p.base >= p.V) { return; }
#endif
  let c0 = (k % nc) * 4u;
  store4(t, c0, emb4(t, c0));
}
#endif
