// Part of matmul.wgsl (#include _matmul_sgemv): KIND = sgemv, the decode matrix-vector kernel
// for adapters with the `subgroups` feature (M = 1..16 activation rows, any weight format:
// reads W through the main file's wat()). Uses its bindings and element access.
//
// Each SUBGROUP owns whole quads of W rows (4 columns of y) and walks K itself: lane l reads
// chunks l, l + S, l + 2S, ... of the quad's rows (S = subgroup size; adjacent lanes read
// adjacent 16-byte chunks, so one W row streams in S*16-byte coalesced runs), keeps MR x 4
// partial sums in registers, and one subgroupAdd per row finishes the dot products. No
// workgroup memory and no barriers: there is no reduction across subgroups.
//
// Which quads a subgroup owns does not assume any mapping of local invocations to subgroups
// (WGSL gives none): lane 0 of each subgroup marks its local index in `lead`, and after one
// barrier the subgroup's rank is the number of marks below its lane 0 (counted over the lanes,
// then subgroupAdd); the subgroup takes quads rank, rank + nsg, ... of the workgroup's QPW.
// (A workgroup-atomic ticket would do it in one step, but SwiftShader returns 0 from every
// lane-0 atomicAdd.) Deterministic: the same subgroup always computes the same quads.
//
// Fusions (decode steps of the gpu decode plan; VEC, no bias with GATED):
//   PRENORM: x is the residual stream and the kernel applies the input RMSNorm itself:
//     y = (x * rsqrt(mean(x^2) + eps) * wn) · Wᵀ, each row's sum of squares reduced over the
//     subgroup's lanes then subgroupAdd (every subgroup computes it: K/S loads per lane per
//     row, as one pass over x). Saves the rms_norm dispatch and h's round trip through memory.
//   GATED: W is [2N, K] (gate rows, then up rows) and y [M, N] = silu(x · Wgᵀ) * (x · Wuᵀ):
//     a quad's gate and up rows are dotted in the same pass. Saves the activation dispatch and
//     gu's round trip.
//   SROPE: W is the fused qkv projection [(nH + 2 nKv) hd, K] and the epilogue is
//     rope_kv_write's (half-split pairs over the whole head, no q/k norm): a subgroup owns
//     rotation-pair quads (columns 4j.. and hd/2 + 4j.. of one head, dotted in the same pass
//     as GATED's gate and up rows), so both elements of every pair are its own. q and k heads
//     are rotated, every column is written to y as rope() leaves qkv, and k and v heads are
//     stored at slots[m] of the paged cache (f32 rows, or halves with KVF16) as kv_write
//     does. Saves the rope_kv_write dispatch and qkv's second round trip.
#if KIND == sgemv
enable subgroups;
#if PRENORM
@group(0) @binding({{PN_BIND}}) var<storage, read> wn: array<vec4<f32>>;  // [K/4] RMSNorm weight
#endif
#if SROPE
@group(0) @binding({{RB_POS}}) var<storage, read> positions: array<u32>;  // [M] absolute positions
@group(0) @binding({{RB_SLOT}}) var<storage, read> slots: array<u32>;     // [M] cache slots (0xffffffff: not stored)
@group(0) @binding({{RB_FREQ}}) var<storage, read> invFreq: array<f32>;   // [hd / 2] radians per position
#if KVF16
#include _kv_half
@group(0) @binding({{RB_K}}) var<storage, read_write> cacheK: array<vec2<u32>>;  // [numSlots, nKv, hd/4] 4 halves each
@group(0) @binding({{RB_V}}) var<storage, read_write> cacheV: array<vec2<u32>>;
fn stK(i: u32, v: vec4<f32>) { cacheK[i] = half4(v); }
fn stV(i: u32, v: vec4<f32>) { cacheV[i] = half4(v); }
#else
@group(0) @binding({{RB_K}}) var<storage, read_write> cacheK: array<vec4<f32>>;  // [numSlots, nKv, hd/4]
@group(0) @binding({{RB_V}}) var<storage, read_write> cacheV: array<vec4<f32>>;
fn stK(i: u32, v: vec4<f32>) { cacheK[i] = v; }
fn stV(i: u32, v: vec4<f32>) { cacheV[i] = v; }
#endif
#include _sincos

// Row m's dot products with the pair quad at columns n0.. (lo) and n0 + hd/2.. (hi): + bias,
// rotated by rope.wgsl's rotPair unless a v head, into y, and k / v heads into the cache.
fn ropeKvStore(m: u32, n0: u32, lo: vec4<f32>, hi: vec4<f32>) {
  if (m >= p.M) { return; }
  let h = n0 / p.hd;     // q heads, then k heads, then v heads
  let j4 = n0 % p.hd;    // element offset of lo within its head (< hd / 2)
  let n1 = n0 + p.hd / 2u;
  var y0 = withBias(lo, n0);
  var y1 = withBias(hi, n1);
  if (h < p.nH + p.nKv) {
    let pos = f32(positions[m]);
    for (var e = 0u; e < 4u; e++) {
      let r = rotPair(y0[e], y1[e], sincos(pos * invFreq[j4 + e]));
      y0[e] = r.x;
      y1[e] = r.y;
    }
  }
  let o = m * p.ldy + p.y0;
  for (var e = 0u; e < 4u; e++) {
    y[o + n0 + e] = y0[e];
    y[o + n1 + e] = y1[e];
  }
  let slot = slots[m];
  if (h < p.nH || slot == 0xffffffffu) { return; }
  let hd4 = p.hd / 4u;
  let row = (slot * p.nKv + (h - p.nH) % p.nKv) * hd4 + j4 / 4u;
  if (h < p.nH + p.nKv) {
    stK(row, y0);
    stK(row + hd4 / 2u, y1);
  } else {
    stV(row, y0);
    stV(row + hd4 / 2u, y1);
  }
}
#endif
#if GATED
// The activation kernel's SiLU (activation.wgsl), per component.
fn sgSilu(v: vec4<f32>) -> vec4<f32> {
  return v / (vec4<f32>(1.0) + exp(min(-v, vec4<f32>(80.0))));
}
#endif

const QPW: u32 = {{QPW}}u;  // quads of W rows (4 y columns each) per workgroup
var<workgroup> lead: array<u32, WG>;  // 1 where a subgroup's lane 0 sits, by local index

// Every loop bound below is uniform within a subgroup (rank, n0) or the subgroup-size stride,
// so the subgroupAdd calls run with the whole subgroup active; WGSL's analysis only sees that
// the rank differs across the workgroup.
@diagnostic(off, subgroup_uniformity)
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_invocation_id) sid: u32,
        @builtin(subgroup_size) ss: u32) {
  let g = wid.x + wid.y * 65535u;
  lead[lid] = select(0u, 1u, sid == 0u);
  workgroupBarrier();
  let first = subgroupBroadcast(lid, 0u);  // local index of this subgroup's lane 0
  var below = 0u;
  for (var j = sid; j < first; j += ss) { below += lead[j]; }
  let t = subgroupAdd(below);            // subgroups whose lane 0 comes first: this one's rank
  let nsg = max(WG / ss, 1u);            // subgroups per workgroup (WG is a multiple of S <= WG)
  let nc = (p.K + 3u) / 4u;
  let last = p.N - 1u;
  let ml = p.M - 1u;
#if PRENORM
  var inv: array<f32, MR>;               // 1 / rms of each x row
  for (var i = 0u; i < MR; i++) {
    var ss2 = 0.0;
    for (var c = sid; c < nc; c += ss) { let v = xat(xbase(min(i, ml)), c); ss2 += dot(v, v); }
    inv[i] = inverseSqrt(subgroupAdd(ss2) / f32(p.K) + p.eps);
  }
#endif
  for (var q = t; q < QPW; q += nsg) {
#if SROPE
    let pq = g * QPW + q;                // rotation-pair quad: 8 columns
    if (pq >= p.N / 8u) { break; }       // uniform per subgroup
    let n0 = (pq / (p.hd / 8u)) * p.hd + 4u * (pq % (p.hd / 8u));
#else
    let n0 = (g * QPW + q) * 4u;
    if (n0 >= p.N) { break; }            // uniform per subgroup
#endif
    let r0 = min(n0, last);
    let r1 = min(n0 + 1u, last);
    let r2 = min(n0 + 2u, last);
    let r3 = min(n0 + 3u, last);
    let w0 = wbase(r0);
    let w1 = wbase(r1);
    let w2 = wbase(r2);
    let w3 = wbase(r3);
    // Zeroed explicitly per quad: a loop-local's zero-init is not re-run per iteration on SwiftShader.
    var acc: array<vec4<f32>, MR>;       // acc[i] = x row i against the quad's 4 W rows
    for (var i = 0u; i < MR; i++) { acc[i] = vec4<f32>(0.0); }
#if GATED || SROPE
    // The quad's partner rows: the up rows N further down W (GATED), the pairs' hi rows (SROPE).
#if GATED
    let po = p.N;
#else
    let po = p.hd / 2u;
#endif
    let u0 = wbase(r0 + po);
    let u1 = wbase(r1 + po);
    let u2 = wbase(r2 + po);
    let u3 = wbase(r3 + po);
    var acu: array<vec4<f32>, MR>;
    for (var i = 0u; i < MR; i++) { acu[i] = vec4<f32>(0.0); }
#endif
    for (var c = sid; c < nc; c += ss) {
      let wm = mat4x4<f32>(wat(w0, c, r0), wat(w1, c, r1), wat(w2, c, r2), wat(w3, c, r3));
#if GATED || SROPE
      let um = mat4x4<f32>(wat(u0, c, r0 + po), wat(u1, c, r1 + po), wat(u2, c, r2 + po), wat(u3, c, r3 + po));
#endif
      for (var i = 0u; i < MR; i++) {
#if PRENORM
        let xv = xat(xbase(min(i, ml)), c) * inv[i] * wn[c];
#else
        let xv = xat(xbase(min(i, ml)), c);
#endif
        acc[i] += xv * wm;
#if GATED || SROPE
        acu[i] += xv * um;
#endif
      }
    }
    for (var i = 0u; i < MR; i++) {
#if SROPE
      let lo = subgroupAdd(acc[i]);
      let hi = subgroupAdd(acu[i]);
      if (sid == i % ss) { ropeKvStore(i, n0, lo, hi); }  // rows spread over lanes; drops i >= M
#else
#if GATED
      let s = sgSilu(subgroupAdd(acc[i])) * subgroupAdd(acu[i]);
#else
      let s = subgroupAdd(acc[i]);
#endif
      if (sid == i % ss) { storeRow(i, n0, s); }  // rows spread over lanes; store() drops i >= M
#endif
    }
  }
}
#endif
