// Causal grouped-query attention over a paged KV cache for a ragged batch.
// Token t (sequence tokenSeq[t], position positions[t]) attends to cache positions
// lo..pos of its sequence, lo = max(0, pos + 1 - window) (window 0 = unlimited);
// query head h uses kv head h / group. Online softmax in f32: running max m, sum l
// and accumulator acc, rescaled by exp(m_old - m_new) when the max grows. The score
// is qScale * q.k (SOFTCAP: softcap * tanh(that), qScale = scale / softcap).
// qkv/out offsets are in vec4 units (headDim and rowStride are multiples of 4); a cache
// row (slot, kv head) starts at (slot * kvHeads + kvh) * p.kvStride.
// Q8=0: f32 cache rows of headDim/4 vec4s. Q8=1: rows of headDim/4 + 1 u32 words: int8
//   codes packed 4 per word, then the row's f32 scale (core/ops/kv_write.ts). Reads
//   dequantize on the fly: q.k = scaleK * (q . codes), and each V row's scale is folded
//   into its softmax weight (the running sum l uses the unscaled weights).
// F16=1: rows of headDim/4 vec2<u32>, four halves each (_kv_half), widened to f32 on load.
// Variants:
//   SHARED=0 (CPU emulation): one invocation per (token, kv head, GC query heads of its
//     group), no workgroup memory. Keys go in tiles of 8: each loaded K/V vec4 serves
//     the GC heads, each q load and acc update serves 8 keys.
//   SHARED=1 (real GPUs): one workgroup of WG = 64 threads per (token, query head); keys
//     in tiles of WG: thread i scores key i of the tile, thread d accumulates vec4 d of
//     the output (coalesced V reads); scores and weights pass through workgroup memory.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<vec4<f32>>;        // [tokens, rowStride/4] (q heads at column 0)
#if KV_TEX && Q8
// q8 rows in r32uint textures (core/ops/kv_write.ts KvTexture): u32 word w at (w % 4096, w / 4096).
@group(0) @binding(2) var cacheK: texture_storage_2d<r32uint, read_write>;
@group(0) @binding(3) var cacheV: texture_storage_2d<r32uint, read_write>;
#elif KV_TEX
// f32 rows in r32float textures (core/ops/kv_write.ts KvTexture): float f at (f % 4096, f / 4096).
@group(0) @binding(2) var cacheK: texture_storage_2d<r32float, read_write>;
@group(0) @binding(3) var cacheV: texture_storage_2d<r32float, read_write>;
#elif Q8
@group(0) @binding(2) var<storage, read> cacheK: array<u32>;           // [numSlots, kvHeads, headDim/4 + 1] int8 x4 words, f32 scale
@group(0) @binding(3) var<storage, read> cacheV: array<u32>;           // [numSlots, kvHeads, headDim/4 + 1] int8 x4 words, f32 scale
#elif F16
@group(0) @binding(2) var<storage, read> cacheK: array<vec2<u32>>;     // [numSlots, kvHeads, headDim/4] 4 halves each
@group(0) @binding(3) var<storage, read> cacheV: array<vec2<u32>>;     // [numSlots, kvHeads, headDim/4] 4 halves each
#else
@group(0) @binding(2) var<storage, read> cacheK: array<vec4<f32>>;     // [numSlots, kvHeads, headDim/4]
@group(0) @binding(3) var<storage, read> cacheV: array<vec4<f32>>;     // [numSlots, kvHeads, headDim/4]
#endif
@group(0) @binding(4) var<storage, read> positions: array<u32>;        // [tokens] absolute positions
@group(0) @binding(5) var<storage, read> tokenSeq: array<u32>;         // [tokens] sequence index
@group(0) @binding(6) var<storage, read> blockTables: array<u32>;      // [seqs, maxBlocks] block ids
@group(0) @binding(7) var<storage, read_write> out: array<vec4<f32>>;  // [tokens, qHeads * headDim/4]

#if PASSES
// Long contexts on llvmpipe (core/ops/loop_budget.ts): a token's 8-key tiles in passes of
// tiles p.tileFrom .. p.tileTo - 1, one dispatch each. Between passes the running max and
// sum of each head wait in `st` and the accumulators in `out`, f32 both ways, so the passes
// compute exactly what one pass would.
@group(0) @binding(8) var<storage, read_write> st: array<vec2<f32>>;  // [invocations, GC] (m, l)
#endif

const WG: u32 = {{WG}}u;
const NEG: f32 = -1e30;  // "minus infinity" that keeps exp() and differences finite

// capped / capped4, codes (Q8), firstPos: shared with the decode megakernel.
#include _attention_common

#if Q8
#if KV_TEX
// Cache rows r are word indices within the layer, whose region starts at word 4 p.kvBase4.
fn kvBase4() -> u32 { return p.kvBase4; }
#include _kv_texture
#else
fn kwK(w: u32) -> u32 { return cacheK[w]; }
fn kwV(w: u32) -> u32 { return cacheV[w]; }
#endif
// Element vec4 d of the row starting at r (codes, not yet scaled), and the row's scale.
fn ldK(r: u32, d: u32) -> vec4<f32> { return codes(kwK(r + d)); }
fn ldV(r: u32, d: u32) -> vec4<f32> { return codes(kwV(r + d)); }
fn scK(r: u32) -> f32 { return bitcast<f32>(kwK(r + p.hd4)); }
fn scV(r: u32) -> f32 { return bitcast<f32>(kwV(r + p.hd4)); }
#elif KV_TEX
// Cache rows r are vec4 indices within the layer, whose region starts at vec4 p.kvBase4.
fn kvBase4() -> u32 { return p.kvBase4; }
#include _kv_texture
#elif F16
#include _kv_half
fn ldK(r: u32, d: u32) -> vec4<f32> { return unhalf4(cacheK[r + d]); }
fn ldV(r: u32, d: u32) -> vec4<f32> { return unhalf4(cacheV[r + d]); }
#else
fn ldK(r: u32, d: u32) -> vec4<f32> { return cacheK[r + d]; }
fn ldV(r: u32, d: u32) -> vec4<f32> { return cacheV[r + d]; }
#endif

#if SHARED
var<workgroup> qs: array<vec4<f32>, 64>;  // q of this head, pre-scaled [headDim/4 <= 64]
var<workgroup> ws: array<f32, WG>;        // per tile key: score, then weight
var<workgroup> rows: array<u32, WG>;      // per tile key: index of its K/V row
#if Q8
var<workgroup> vsc: array<f32, WG>;       // per tile key: scale of its V row
#endif

// Tiles of WG keys: thread i scores key j0 + i (full dot product), every thread reads
// the tile max from workgroup memory, thread i turns its score into a weight, then
// thread d accumulates dims d (a vec4 of headDim, d < headDim/4 <= WG) over the tile.
// Workgroup memory stays small (qs + ws), and each thread holds one vec4 of acc.
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let id = wid.x + wid.y * 65535u;  // t * qHeads + h
  if (id >= p.tokens * p.qHeads) { return; }
  let t = id / p.qHeads;
  let h = id % p.qHeads;
  let kvh = h / p.group;
  if (lid < p.hd4) { qs[lid] = qkv[t * p.rowStride4 + h * p.hd4 + lid] * p.qScale; }
  let pos = positions[t];
  let bt = tokenSeq[t] * p.maxBlocks;
  var m = NEG;
  var l = 0.0;
  var acc = vec4<f32>(0.0);
  workgroupBarrier();
  for (var j0 = firstPos(pos); j0 <= pos; j0 += WG) {
    let n = min(WG, pos + 1u - j0);  // valid keys in this tile
    var s = NEG;
    if (lid < n) {
      let j = j0 + lid;
      let slot = blockTables[bt + j / p.blockSize] * p.blockSize + j % p.blockSize;
      let kv = (slot * p.kvHeads + kvh) * p.kvStride;
      rows[lid] = kv;
      var dt = 0.0;
      for (var d = 0u; d < p.hd4; d++) { dt += dot(qs[d], ldK(kv, d)); }
#if Q8
      dt *= scK(kv);
      vsc[lid] = scV(kv);
#endif
      s = capped(dt);
    }
    ws[lid] = s;
    workgroupBarrier();  // scores and rows of the tile are visible
    var mt = m;
    for (var i = 0u; i < n; i++) { mt = max(mt, ws[i]); }
    workgroupBarrier();  // everyone has read the scores
    ws[lid] = exp(s - mt);  // 0 for keys past n
    workgroupBarrier();  // weights are visible
    let corr = exp(m - mt);
    m = mt;
    var sum = 0.0;
    var a = vec4<f32>(0.0);
    for (var i = 0u; i < n; i++) {
      let w = ws[i];
      sum += w;
#if Q8
      if (lid < p.hd4) { a += (w * vsc[i]) * ldV(rows[i], lid); }
#else
      if (lid < p.hd4) { a += w * ldV(rows[i], lid); }
#endif
    }
    l = l * corr + sum;
    acc = acc * corr + a;
    workgroupBarrier();  // ws is rewritten by the next tile
  }
  if (lid < p.hd4) { out[(t * p.qHeads + h) * p.hd4 + lid] = acc / l; }
}
#else
const GC: u32 = {{GC}}u;  // query heads per invocation (divides group, <= 8)

// Cache row (index of its first vec4 / word) of key position j for kv head kvh.
fn kvRow(bt: u32, j: u32, kvh: u32) -> u32 {
  let slot = blockTables[bt + j / p.blockSize] * p.blockSize + j % p.blockSize;
  return (slot * p.kvHeads + kvh) * p.kvStride;
}

// acc lives in `out` (this invocation's own GC heads) and q is read from qkv: large
// private arrays compile very slowly on llvmpipe and index slowly on SwiftShader.
// Loops over headDim use the runtime bound p.hd4 so compilers do not unroll them.
// QREG (small heads, GC * HD4 <= 16 vec4s, attention.ts): q and acc in private arrays with
// compile-time bounds instead (unrolled into registers, as the decode megakernel's attend()),
// saving a storage-buffer q load and an out load + store per vec4 and tile; same arithmetic.
#if QREG
const HD4: u32 = {{HD4}}u;  // head dim / 4 (== p.hd4)
var<private> qr: array<vec4<f32>, GC * HD4>;
var<private> acr: array<vec4<f32>, GC * HD4>;
#endif
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let id = gid.x + gid.y * nwg.x * WG;  // (t * kvHeads + kvh) * chunks + c
  let chunks = p.group / GC;
  if (id >= p.tokens * p.kvHeads * chunks) { return; }
  let tk = id / chunks;
  let t = tk / p.kvHeads;
  let kvh = tk % p.kvHeads;
  let h0 = kvh * p.group + (id % chunks) * GC;  // first query head of this invocation
  let qBase = t * p.rowStride4 + h0 * p.hd4;      // q of head h0 + g at qBase + g * p.hd4
  let oBase = (t * p.qHeads + h0) * p.hd4;        // acc / out of head h0 + g at oBase + g * p.hd4
  var m: array<f32, GC>;
  var l: array<f32, GC>;
  var sa: array<vec4<f32>, GC>;  // per head: scores, then weights, of tile keys 0..3
  var sb: array<vec4<f32>, GC>;  // ... and of keys 4..7
  var cf: array<f32, GC>;        // per head: rescale of the running state for this tile
  let pos = positions[t];
#if PASSES
  let jFrom = firstPos(pos) + 8u * p.tileFrom;
  if (jFrom > pos) { return; }  // all its tiles done in earlier passes
  let jEnd = firstPos(pos) + 8u * p.tileTo;  // first key of the next pass
  let resume = p.tileFrom > 0u;
#endif
  for (var g = 0u; g < GC; g++) {
#if PASSES
    let s0 = select(vec2<f32>(NEG, 0.0), st[id * GC + g], resume);
    m[g] = s0.x;
    l[g] = s0.y;
#else
    m[g] = NEG;
    l[g] = 0.0;
#endif
  }
#if QREG
  for (var i = 0u; i < GC * HD4; i++) {
    qr[i] = qkv[qBase + i];  // head h0 + i / HD4, vec4 i % HD4
#if PASSES
    acr[i] = select(vec4<f32>(0.0), out[oBase + i], resume);
#else
    acr[i] = vec4<f32>(0.0);
#endif
  }
#elif PASSES
  if (!resume) {
    for (var i = 0u; i < GC * p.hd4; i++) { out[oBase + i] = vec4<f32>(0.0); }
  }
#else
  for (var i = 0u; i < GC * p.hd4; i++) { out[oBase + i] = vec4<f32>(0.0); }
#endif
  let bt = tokenSeq[t] * p.maxBlocks;
  // Tiles of 8 keys: each q load and acc update serves 8 keys; one max/rescale per tile.
  // Keys past `pos` in the last tile re-read key `pos` (finite) and get weight 0.
#if PASSES
  for (var j = jFrom; j <= pos && j < jEnd; j += 8u) {
#else
  for (var j = firstPos(pos); j <= pos; j += 8u) {
#endif
    let r0 = kvRow(bt, j, kvh);
    let r1 = kvRow(bt, min(j + 1u, pos), kvh);
    let r2 = kvRow(bt, min(j + 2u, pos), kvh);
    let r3 = kvRow(bt, min(j + 3u, pos), kvh);
    let r4 = kvRow(bt, min(j + 4u, pos), kvh);
    let r5 = kvRow(bt, min(j + 5u, pos), kvh);
    let r6 = kvRow(bt, min(j + 6u, pos), kvh);
    let r7 = kvRow(bt, min(j + 7u, pos), kvh);
    // Scores, online softmax and V accumulation of the tile: shared with the decode megakernel.
#include _attention_tile8
  }
#if PASSES
  if (jEnd <= pos) {  // tiles left for the next pass: keep the state
    for (var g = 0u; g < GC; g++) { st[id * GC + g] = vec2<f32>(m[g], l[g]); }
#if QREG
    for (var i = 0u; i < GC * HD4; i++) { out[oBase + i] = acr[i]; }
#endif
    return;
  }
#endif
  for (var g = 0u; g < GC; g++) {
    let inv = 1.0 / l[g];
#if QREG
    for (var d = 0u; d < HD4; d++) { out[oBase + g * HD4 + d] = acr[g * HD4 + d] * inv; }
#else
    for (var d = 0u; d < p.hd4; d++) { out[oBase + g * p.hd4 + d] *= inv; }
#endif
  }
}
#endif
