// Tiled flash attention for prompt chunks: causal grouped-query attention over a paged KV
// cache, same semantics as attention.wgsl (ragged batch, block tables, sliding window,
// soft-capping). One 64-invocation workgroup per (query tile, query head): a query tile is up
// to BQ = 8 consecutive tokens of ONE sequence (attention_prefill.ts builds the tiles), so
// every K/V tile staged in workgroup memory (BK = 16 keys) serves all its rows. Per key tile:
// stage the rows' slots, stage K, scores S[BQ, BK] (each invocation 2 dot products; keys
// outside a row's causal range are masked), online-softmax statistics per row (invocation r
// keeps row r's max m and sum l), stage V into the same memory, then each invocation updates
// 4 vec4s of the output accumulator (row lid / 8, vec4s lid % 8 + 8i). f32 accumulation.
// head dim <= 128 (32 vec4s per row). KV = f32 | f16 (halves two per u32) | f16n (native f16).
#if KV == f16n
enable f16;
#endif

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<vec4<f32>>;        // [tokens, rowStride/4] (q heads at column 0)
#if KV == f16n
@group(0) @binding(2) var<storage, read> cacheK: array<vec4<f16>>;     // [numSlots, kvHeads, headDim/4]
@group(0) @binding(3) var<storage, read> cacheV: array<vec4<f16>>;
#elif KV == f16
@group(0) @binding(2) var<storage, read> cacheK: array<vec2<u32>>;     // [numSlots, kvHeads, headDim/4] 4 halves each
@group(0) @binding(3) var<storage, read> cacheV: array<vec2<u32>>;
#else
@group(0) @binding(2) var<storage, read> cacheK: array<vec4<f32>>;     // [numSlots, kvHeads, headDim/4]
@group(0) @binding(3) var<storage, read> cacheV: array<vec4<f32>>;
#endif
@group(0) @binding(4) var<storage, read> positions: array<u32>;        // [tokens] absolute positions
@group(0) @binding(5) var<storage, read> tokenSeq: array<u32>;         // [tokens] sequence index
@group(0) @binding(6) var<storage, read> blockTables: array<u32>;      // [seqs, maxBlocks] block ids
@group(0) @binding(7) var<storage, read> qtiles: array<vec2<u32>>;     // [tiles] (first token, tokens <= BQ), one sequence each
@group(0) @binding(8) var<storage, read_write> out: array<vec4<f32>>;  // [tokens, qHeads * headDim/4]

const WG: u32 = 64u;
const BQ: u32 = 8u;     // query rows per tile
const BK: u32 = 16u;    // keys per tile
const HD4M: u32 = 32u;  // largest head dim / 4
const NEG: f32 = -1e30; // "minus infinity" that keeps exp() and differences finite
const NONE: u32 = 0xffffffffu;

var<workgroup> qs: array<vec4<f32>, BQ * HD4M>;  // q rows, pre-scaled [BQ, hd4]
var<workgroup> kv: array<vec4<f32>, BK * HD4M>;  // the K tile, then the V tile [BK, hd4]
var<workgroup> sc: array<f32, BQ * BK>;          // scores, then weights [BQ, BK]
var<workgroup> krow: array<u32, BK>;             // first vec4 of each key's K/V row (NONE: past the range)
var<workgroup> corr: array<f32, BQ>;             // per row: rescale of the accumulator this tile
var<workgroup> lsum: array<f32, BQ>;             // per row: final softmax sum

#include _kv_load_vec4
#include _attention_common

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let g = wid.x + wid.y * 65535u;  // tile * qHeads + h
  if (g >= p.tiles * p.qHeads) { return; }  // uniform per workgroup
  let tile = qtiles[g / p.qHeads];
  let h = g % p.qHeads;
  let kvh = h / p.group;
  let t0 = tile.x;
  let n = tile.y;
  let hd4 = p.hd4;
  let bt = tokenSeq[t0] * p.maxBlocks;
  // The tile's key range: the union of its rows' causal ranges.
  var jlo = NONE;
  var jhi = 0u;
  for (var r = 0u; r < n; r++) {
    let pr = positions[t0 + r];
    jlo = min(jlo, firstPos(pr));
    jhi = max(jhi, pr);
  }
  for (var i = lid; i < BQ * hd4; i += WG) {
    let r = i / hd4;
    qs[i] = select(vec4<f32>(0.0), qkv[(t0 + r) * p.rowStride4 + h * hd4 + i % hd4] * p.qScale, r < n);
  }
  // Score ownership: invocation lid scores (row, key) idx = lid and lid + 64 of the [BQ, BK] tile.
  let sr0 = lid / BK;
  let sr1 = (lid + WG) / BK;
  let pos0 = positions[t0 + min(sr0, n - 1u)];
  let pos1 = positions[t0 + min(sr1, n - 1u)];
  // Row statistics (invocations 0..BQ-1 own rows 0..BQ-1).
  var m = NEG;
  var l = 0.0;
  // Accumulator ownership: row lid / 8, vec4s lid % 8 + 8i.
  let ar = lid / 8u;
  var acc: array<vec4<f32>, 4>;
  for (var j0 = jlo; j0 <= jhi; j0 += BK) {
    if (lid < BK) {
      let j = j0 + lid;
      var row = NONE;
      if (j <= jhi) {
        let slot = blockTables[bt + j / p.blockSize] * p.blockSize + j % p.blockSize;
        row = (slot * p.kvHeads + kvh) * hd4;
      }
      krow[lid] = row;
    }
    workgroupBarrier();  // key rows are visible
    for (var i = lid; i < BK * hd4; i += WG) {
      let k = krow[i / hd4];
      kv[i] = select(vec4<f32>(0.0), ldK(k + i % hd4), k != NONE);
    }
    workgroupBarrier();  // the K tile is visible
    for (var e = 0u; e < 2u; e++) {
      let idx = lid + e * WG;
      let r = idx / BK;
      let k = idx % BK;
      let j = j0 + k;
      let pr = select(pos0, pos1, e == 1u);
      var s = NEG;
      if (r < n && j <= pr && j >= firstPos(pr) && krow[k] != NONE) {
        var dt = 0.0;
        for (var d = 0u; d < hd4; d++) { dt += dot(qs[r * hd4 + d], kv[k * hd4 + d]); }
        s = capped(dt);
      }
      sc[idx] = s;
    }
    workgroupBarrier();  // scores are visible; K is no longer needed
    if (lid < BQ) {
      var mt = m;
      for (var k = 0u; k < BK; k++) { mt = max(mt, sc[lid * BK + k]); }
      var sum = 0.0;
      for (var k = 0u; k < BK; k++) {
        let s = sc[lid * BK + k];
        let w = select(0.0, exp(s - mt), s > 0.5 * NEG);  // masked keys weigh 0
        sc[lid * BK + k] = w;
        sum += w;
      }
      let c = exp(m - mt);
      corr[lid] = c;
      l = l * c + sum;
      m = mt;
    }
    for (var i = lid; i < BK * hd4; i += WG) {
      let k = krow[i / hd4];
      kv[i] = select(vec4<f32>(0.0), ldV(k + i % hd4), k != NONE);
    }
    workgroupBarrier();  // weights, rescales and the V tile are visible
    let c = corr[ar];
    for (var i = 0u; i < 4u; i++) {
      let d = lid % 8u + 8u * i;
      if (d < hd4) {
        var a = acc[i] * c;
        for (var k = 0u; k < BK; k++) { a += sc[ar * BK + k] * kv[k * hd4 + d]; }
        acc[i] = a;
      }
    }
    workgroupBarrier();  // the next tile rewrites krow, kv, sc and corr
  }
  if (lid < BQ) { lsum[lid] = l; }
  workgroupBarrier();
  if (ar < n) {
    let inv = 1.0 / lsum[ar];
    for (var i = 0u; i < 4u; i++) {
      let d = lid % 8u + 8u * i;
      if (d < hd4) { out[((t0 + ar) * p.qHeads + h) * hd4 + d] = acc[i] * inv; }
    }
  }
}
