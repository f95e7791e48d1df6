// Bidirectional multi-head attention over a padded batch (BERT-style encoders).
// Batch row b holds tokens b*S .. b*S + S-1; its first n = min(lengths[b], S) are real,
// the rest padding. A real query i < n attends to keys 0..n-1 of its own row (padding
// mask); padding query rows get zeros, and padding tokens' q/k/v are never read.
// q, k, v come straight from the fused projection rows `qkv [B*S, rowStride]` (head h of
// q at column h*hd, of k at kOff + h*hd, of v at vOff + h*hd). Online softmax in f32:
// running max m, sum l and accumulator acc, rescaled by exp(m_old - m_new).
// All offsets are in vec4 units (headDim, rowStride, kOff, vOff are multiples of 4).
// Variants:
//   SHARED=0 (CPU emulation): one invocation per (row b, head h, GQ consecutive queries),
//     no workgroup memory. Keys go in tiles of 8: each loaded K/V vec4 serves the GQ
//     queries, each q load and acc update serves 8 keys. acc lives in `out`. With PASSES
//     (long rows on llvmpipe, whose loop budget would cut one invocation's loops short:
//     core/ops/loop_budget.ts) the tiles p.tileFrom .. p.tileTo - 1 only, one dispatch per
//     pass; between passes each query's running max and sum wait in `st` and acc in `out`,
//     f32 both ways, so the passes compute exactly what one pass would.
//   SHARED=1 (real GPUs): flash-attention tiling. One workgroup per (row b, head h, QB
//     consecutive queries), WG = QB * hd/4 threads, each owning one vec4 of one query's
//     output. Per tile of KT keys: K/V staged in workgroup memory (each key read from
//     global memory once per QB queries), the QB x KT scores computed one per thread,
//     one thread per query row updates max / sum and turns scores into weights, then every
//     thread updates its acc vec4. No private arrays (they compile very slowly on
//     SwiftShader). Barriers stay in main (llvmpipe mis-orders barriers inside helpers).

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<vec4<f32>>;        // [B*S, rowStride/4] f32
@group(0) @binding(2) var<storage, read> lengths: array<u32>;          // [B] real tokens per row
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;  // [B*S, heads * hd/4] f32
#if PASSES
@group(0) @binding(4) var<storage, read_write> st: array<vec2<f32>>;   // [invocations, GQ] (m, l)
#endif

const WG: u32 = {{WG}}u;
const NEG: f32 = -1e30;  // "minus infinity" that keeps exp() and differences finite

#if SHARED
const HD4: u32 = {{HD4}}u;  // headDim / 4
const QB: u32 = {{QB}}u;    // queries per workgroup
const KT: u32 = {{KT}}u;    // keys per tile
// WG = QB * HD4: thread lid owns vec4 column d = lid % HD4 of query row qi = lid / HD4.
var<workgroup> sq: array<vec4<f32>, QB * HD4>;  // q block [QB, hd/4], pre-scaled
var<workgroup> sk: array<vec4<f32>, KT * HD4>;  // key tile [KT, hd/4]
var<workgroup> sv: array<vec4<f32>, KT * HD4>;  // value tile [KT, hd/4]
var<workgroup> sp: array<f32, QB * KT>;         // [QB, KT] scores, then weights
var<workgroup> sc: array<f32, QB>;              // per query: rescale of acc for this tile
var<workgroup> sl: array<f32, QB>;              // per query: final softmax denominator

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let id = wid.x + wid.y * 65535u;  // (b * heads + h) * qBlocks + qb
  let qBlocks = (p.S + QB - 1u) / QB;
  if (id >= p.B * p.heads * qBlocks) { return; }
  let qb = id % qBlocks;
  let h = (id / qBlocks) % p.heads;
  let b = id / qBlocks / p.heads;
  let n = min(lengths[b], p.S);  // uniform across the workgroup
  let t0 = b * p.S;              // token index of row b, position 0
  let qi = lid / HD4;
  let d = lid % HD4;
  let i = qb * QB + qi;          // this thread's query position
  let o = (t0 + i) * p.heads * HD4 + h * HD4 + d;
  if (qb * QB >= n) {            // a block of padding queries only (uniform branch)
    if (i < p.S) { out[o] = vec4<f32>(0.0); }
    return;
  }
  sq[lid] = qkv[(t0 + min(i, n - 1u)) * p.rowStride4 + h * HD4 + d] * p.scale;  // clamped to a real row
  var acc = vec4<f32>(0.0);
  var m = NEG;  // running max and sum of row qi (kept by its d == 0 thread)
  var l = 0.0;
  for (var j0 = 0u; j0 < n; j0 += KT) {
    // Stage keys j0 .. j0+KT-1 (clamped to the last real key; their scores are masked).
    for (var e = lid; e < KT * HD4; e += WG) {
      let kt = t0 + min(j0 + e / HD4, n - 1u);
      sk[e] = qkv[kt * p.rowStride4 + p.kOff4 + h * HD4 + e % HD4];
      sv[e] = qkv[kt * p.rowStride4 + p.vOff4 + h * HD4 + e % HD4];
    }
    workgroupBarrier();
    for (var e = lid; e < QB * KT; e += WG) {
      let r = e / KT;
      let c = e % KT;
      var s = NEG;
      if (j0 + c < n) {
        s = 0.0;
        for (var dd = 0u; dd < p.hd4; dd++) { s += dot(sq[r * HD4 + dd], sk[c * HD4 + dd]); }
      }
      sp[e] = s;
    }
    workgroupBarrier();
    if (d == 0u) {
      var mx = m;
      for (var c = 0u; c < KT; c++) { mx = max(mx, sp[qi * KT + c]); }
      var sum = 0.0;
      for (var c = 0u; c < KT; c++) {
        let w = exp(sp[qi * KT + c] - mx);
        sp[qi * KT + c] = w;
        sum += w;
      }
      sc[qi] = exp(m - mx);
      l = l * sc[qi] + sum;
      m = mx;
    }
    workgroupBarrier();
    var a = acc * sc[qi];
    for (var c = 0u; c < KT; c++) { a += sp[qi * KT + c] * sv[c * HD4 + d]; }
    acc = a;
    workgroupBarrier();  // the tile is consumed before the next one overwrites it
  }
  if (d == 0u) { sl[qi] = l; }
  workgroupBarrier();
  if (i < p.S) { out[o] = select(vec4<f32>(0.0), acc / sl[qi], i < n); }
}
#else
const GQ: u32 = {{GQ}}u;  // query rows per invocation

// vec4 index of head h's k (element 0) in token row t.
fn kRow(t: u32, h: u32) -> u32 {
  return t * p.rowStride4 + p.kOff4 + h * p.hd4;
}

// Loops over headDim use the runtime bound p.hd4 so compilers do not unroll them, and acc
// lives in `out` (large private arrays compile slowly on llvmpipe).
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let id = gid.x + gid.y * nwg.x * WG;  // (b * heads + h) * qBlocks + qb
  let qBlocks = (p.S + GQ - 1u) / GQ;
  if (id >= p.B * p.heads * qBlocks) { return; }
  let qb = id % qBlocks;
  let h = (id / qBlocks) % p.heads;
  let b = id / qBlocks / p.heads;
  let n = min(lengths[b], p.S);
  let t0 = b * p.S;
  let i0 = qb * GQ;                               // first query position
  let gq = select(0u, min(GQ, n - i0), i0 < n);   // real queries of this invocation
  let oStride = p.heads * p.hd4;                  // out row length in vec4s
  let vDelta = p.vOff4 - p.kOff4;                 // k -> v column shift (wraps mod 2^32: fine)
#if PASSES
  let jFrom = 8u * p.tileFrom;  // this pass's first key
  let jEnd = 8u * p.tileTo;     // first key of the next pass
  let resume = p.tileFrom > 0u;
#else
  let resume = false;
#endif
  // Padding query rows: zeros.
  if (!resume) {
    for (var g = gq; g < GQ && i0 + g < p.S; g++) {
      let o = (t0 + i0 + g) * oStride + h * p.hd4;
      for (var d = 0u; d < p.hd4; d++) { out[o + d] = vec4<f32>(0.0); }
    }
  }
  if (gq == 0u) { return; }
#if PASSES
  if (jFrom >= n) { return; }  // all its keys done in earlier passes
#endif
  var m: array<f32, GQ>;
  var l: array<f32, GQ>;
  var sa: array<vec4<f32>, GQ>;  // per query: scores, then weights, of tile keys 0..3
  var sb: array<vec4<f32>, GQ>;  // ... and of keys 4..7
  var cf: array<f32, GQ>;        // per query: rescale of the running state for this tile
  for (var g = 0u; g < gq; g++) {
#if PASSES
    let s0 = select(vec2<f32>(NEG, 0.0), st[id * GQ + g], resume);
    m[g] = s0.x;
    l[g] = s0.y;
#else
    m[g] = NEG;
    l[g] = 0.0;
#endif
    if (!resume) {
      let o = (t0 + i0 + g) * oStride + h * p.hd4;
      for (var d = 0u; d < p.hd4; d++) { out[o + d] = vec4<f32>(0.0); }
    }
  }
  let qBase = (t0 + i0) * p.rowStride4 + h * p.hd4;  // q of query g at qBase + g * rowStride4
  let oBase = (t0 + i0) * oStride + h * p.hd4;       // acc of query g at oBase + g * oStride
  let last = n - 1u;
  // Keys past n-1 in the last tile re-read key n-1 (real, finite) and get weight 0.
#if PASSES
  for (var j = jFrom; j < n && j < jEnd; j += 8u) {
#else
  for (var j = 0u; j < n; j += 8u) {
#endif
    let r0 = kRow(t0 + j, h);
    let r1 = kRow(t0 + min(j + 1u, last), h);
    let r2 = kRow(t0 + min(j + 2u, last), h);
    let r3 = kRow(t0 + min(j + 3u, last), h);
    let r4 = kRow(t0 + min(j + 4u, last), h);
    let r5 = kRow(t0 + min(j + 5u, last), h);
    let r6 = kRow(t0 + min(j + 6u, last), h);
    let r7 = kRow(t0 + min(j + 7u, last), h);
    for (var g = 0u; g < gq; g++) {
      sa[g] = vec4<f32>(0.0);
      sb[g] = vec4<f32>(0.0);
    }
    for (var d = 0u; d < p.hd4; d++) {
      let k0 = qkv[r0 + d];
      let k1 = qkv[r1 + d];
      let k2 = qkv[r2 + d];
      let k3 = qkv[r3 + d];
      let k4 = qkv[r4 + d];
      let k5 = qkv[r5 + d];
      let k6 = qkv[r6 + d];
      let k7 = qkv[r7 + d];
      for (var g = 0u; g < gq; g++) {
        let qd = qkv[qBase + g * p.rowStride4 + d];
        sa[g] += vec4<f32>(dot(qd, k0), dot(qd, k1), dot(qd, k2), dot(qd, k3));
        sb[g] += vec4<f32>(dot(qd, k4), dot(qd, k5), dot(qd, k6), dot(qd, k7));
      }
    }
    let va = vec4<u32>(j, j + 1u, j + 2u, j + 3u) < vec4<u32>(n);
    let vb = vec4<u32>(j + 4u, j + 5u, j + 6u, j + 7u) < vec4<u32>(n);
    for (var g = 0u; g < gq; g++) {
      let xa = select(vec4<f32>(NEG), sa[g] * p.scale, va);
      let xb = select(vec4<f32>(NEG), sb[g] * p.scale, vb);
      let mx = max(xa, xb);
      let mt = max(m[g], max(max(mx.x, mx.y), max(mx.z, mx.w)));
      let corr = exp(m[g] - mt);
      let wa = exp(xa - mt);
      let wb = exp(xb - mt);
      let ws = wa + wb;
      l[g] = l[g] * corr + (ws.x + ws.y + ws.z + ws.w);
      m[g] = mt;
      cf[g] = corr;
      sa[g] = wa;
      sb[g] = wb;
    }
    for (var d = 0u; d < p.hd4; d++) {
      let v0 = qkv[r0 + vDelta + d];
      let v1 = qkv[r1 + vDelta + d];
      let v2 = qkv[r2 + vDelta + d];
      let v3 = qkv[r3 + vDelta + d];
      let v4 = qkv[r4 + vDelta + d];
      let v5 = qkv[r5 + vDelta + d];
      let v6 = qkv[r6 + vDelta + d];
      let v7 = qkv[r7 + vDelta + d];
      for (var g = 0u; g < gq; g++) {
        let wa = sa[g];
        let wb = sb[g];
        let o = oBase + g * oStride + d;
        out[o] = out[o] * cf[g] + (wa.x * v0 + wa.y * v1 + wa.z * v2 + wa.w * v3) + (wb.x * v4 + wb.y * v5 + wb.z * v6 + wb.w * v7);
      }
    }
  }
#if PASSES
  if (jEnd < n) {  // keys left for the next pass: keep the state
    for (var g = 0u; g < gq; g++) { st[id * GQ + g] = vec2<f32>(m[g], l[g]); }
    return;
  }
#endif
  for (var g = 0u; g < gq; g++) {
    let inv = 1.0 / l[g];
    for (var d = 0u; d < p.hd4; d++) { out[oBase + g * oStride + d] *= inv; }
  }
}
#endif
