// Flash-decoding: causal grouped-query attention over a paged KV cache with the context split
// into ranges of p.splitKeys positions (split-K), so a decode step's few (token, head) pairs
// still fill a GPU with workgroups. Same semantics as attention.wgsl (ragged batch, block
// tables, sliding window, soft-capping); f32 or f16 KV cache.
// PHASE = partial: one workgroup of WG = 64 threads per (token, query head, split): keys of
//   the split in tiles of 64, thread i scores key i (q in workgroup memory), online softmax
//   over the tiles, thread d accumulates vec4 d of the head (coalesced V reads). Writes the
//   split's unnormalised accumulator and its (max m, sum l) to `part`; an empty split writes
//   m = NEG, l = 0, acc = 0.
// PHASE = combine: one workgroup per (token, query head): M = max_s m_s, thread d writes
//   out[d] = sum_s exp(m_s - M) acc_s[d] / sum_s exp(m_s - M) l_s.
// DIRECT (partial phase, one split): writes out[d] = acc[d] / l itself, what combine computes
//   from a single split (exp(0) = 1: bit-identical), without the partials or a second dispatch.
// KV = f32: cache rows [numSlots, kvHeads, headDim/4] vec4<f32>; f16: the same rows as halves
//   packed two per u32 (vec2<u32> per 4 elements, unpack2x16float; any adapter); f16n: native
//   vec4<f16> (adapter has shader-f16). Identical values for f16 and f16n.
#if KV == f16n
enable f16;
#endif

@group(0) @binding(0) var<uniform> p: Params;
#if PHASE == partial
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
#if DIRECT
@group(0) @binding(7) var<storage, read_write> out: array<vec4<f32>>;  // [tokens, qHeads * headDim/4]
#else
@group(0) @binding(7) var<storage, read_write> part: array<vec4<f32>>; // [tokens, qHeads, splits, headDim/4 + 1]: acc, then (m, l, 0, 0)
#endif
#else
@group(0) @binding(1) var<storage, read> part: array<vec4<f32>>;       // as written by the partial phase
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;  // [tokens, qHeads * headDim/4]
#endif

const WG: u32 = 64u;
const NEG: f32 = -1e30;  // "minus infinity" that keeps exp() and differences finite

#if PHASE == partial
#include _kv_load_vec4
#include _attention_common

var<workgroup> qs: array<vec4<f32>, 64>;  // q of this head, pre-scaled [headDim/4 <= 64]
var<workgroup> ws: array<f32, WG>;        // per tile key: score, then weight
var<workgroup> rows: array<u32, WG>;      // per tile key: first vec4 of its K/V row

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let id = wid.x + wid.y * 65535u;  // (t * qHeads + h) * splits + s
  if (id >= p.tokens * p.qHeads * p.splits) { return; }
  let s = id % p.splits;
  let th = id / p.splits;
  let t = th / p.qHeads;
  let h = th % p.qHeads;
  let kvh = h / p.group;
  if (lid < p.hd4) { qs[lid] = qkv[t * p.rowStride4 + h * p.hd4 + lid] * p.qScale; }
  let pos = positions[t];
  var lo = 0u;
  if (p.window > 0u && pos + 1u > p.window) { lo = pos + 1u - p.window; }
  let ja = lo + s * p.splitKeys;                   // this split's keys: ja .. jb (inclusive)
  let jb = min(pos, ja + p.splitKeys - 1u);
  let bt = tokenSeq[t] * p.maxBlocks;
  var m = NEG;
  var l = 0.0;
  var acc = vec4<f32>(0.0);
  workgroupBarrier();
  for (var j0 = ja; j0 <= jb; j0 += WG) {        // uniform: no iterations for an empty split
    let n = min(WG, jb + 1u - j0);                 // valid keys in this tile
    var sc = NEG;
    if (lid < n) {
      let j = j0 + lid;
      let slot = blockTables[bt + j / p.blockSize] * p.blockSize + j % p.blockSize;
      let kv = (slot * p.kvHeads + kvh) * p.hd4;
      rows[lid] = kv;
      var dt = 0.0;
      for (var d = 0u; d < p.hd4; d++) { dt += dot(qs[d], ldK(kv + d)); }
      sc = capped(dt);
    }
    ws[lid] = sc;
    workgroupBarrier();                            // scores and rows of the tile are visible
    var mt = m;
    for (var i = 0u; i < n; i++) { mt = max(mt, ws[i]); }
    workgroupBarrier();                            // everyone has read the scores
    ws[lid] = exp(sc - mt);                        // 0 for keys past n
    workgroupBarrier();                            // weights are visible
    let corr = exp(m - mt);
    m = mt;
    var sum = 0.0;
    var a = vec4<f32>(0.0);
    for (var i = 0u; i < n; i++) {
      let w = ws[i];
      sum += w;
      if (lid < p.hd4) { a += w * ldV(rows[i] + lid); }
    }
    l = l * corr + sum;
    acc = acc * corr + a;
    workgroupBarrier();                            // ws is rewritten by the next tile
  }
#if DIRECT
  if (lid < p.hd4) { out[id * p.hd4 + lid] = acc / l; }  // id = t * qHeads + h with one split
#else
  let base = id * (p.hd4 + 1u);
  if (lid < p.hd4) { part[base + lid] = acc; }
  if (lid == 0u) { part[base + p.hd4] = vec4<f32>(m, l, 0.0, 0.0); }
#endif
}
#else
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let th = wid.x + wid.y * 65535u;  // t * qHeads + h
  if (th >= p.tokens * p.qHeads || lid >= p.hd4) { return; }
  let row = p.hd4 + 1u;
  let b0 = th * p.splits * row;
  var mx = NEG;
  for (var s = 0u; s < p.splits; s++) { mx = max(mx, part[b0 + s * row + p.hd4].x); }
  var l = 0.0;
  var acc = vec4<f32>(0.0);
  for (var s = 0u; s < p.splits; s++) {
    let ml = part[b0 + s * row + p.hd4];
    let f = exp(ml.x - mx);                        // 0 for empty splits
    l += f * ml.y;
    acc += f * part[b0 + s * row + lid];
  }
  out[th * p.hd4 + lid] = acc / l;
}
#endif
