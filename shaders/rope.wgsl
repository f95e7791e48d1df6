// Rotary position embedding, in place on the fused qkv rows: rotates the first
// p.heads (= nH q heads + nKv k heads) heads of each row; v heads are untouched.
// cos/sin are evaluated here from angle = f32(pos) * invFreq[i] (one f32 product,
// as HF transformers does), so no [maxPos, rotaryDim] table is needed.
// Pairs: INTERLEAVED=0 (HF rotate_half / NeoX): (i, i + rotHalf);
//        INTERLEAVED=1 (GPT-J / llama.cpp normal): (2i, 2i + 1); i < rotHalf.
// Dims >= 2*rotHalf (partial rotary) pass through (normalised when QK_NORM).
// QK_NORM=1: RMSNorm each head over headDim (f32) with its weight before rotating (Qwen3).
// KV=1 (rope_kv_write, the fused decoder step): p.heads = nH + nKv, and the invocation(s)
//   of each k head, after rotating it in place, also store it and the matching v head
//   into the paged cache at slots[t] (0xffffffff: skipped), f32 (Q8=0) or int8 rows with
//   an f32 absmax scale (Q8=1) or halves (F16=1), exactly as kv_write.wgsl (layouts in
//   core/ops/kv_write.ts).
//   headDim must be a multiple of 4.
// Variants: SHARED=0 one invocation per (token, head), no workgroup memory;
//           SHARED=1 one workgroup per (token, head), pairs split across WG threads,
//           the QK_NORM sum (and the KV Q8 absmax) reduced in workgroup memory; KV k-head
//           workgroups pass a storageBarrier before reading back their rotated k.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> qkv: array<f32>;  // [tokens, rowStride] f32
@group(0) @binding(2) var<storage, read> positions: array<u32>;  // [tokens] u32 absolute positions
@group(0) @binding(3) var<storage, read> invFreq: array<f32>;    // [rotHalf] f32 radians per position
#if KV
@group(0) @binding(4) var<storage, read> slots: array<u32>;      // [tokens] u32 cache slot per token
#if KV_TEX && Q8
// q8 rows in r32uint textures (core/ops/kv_write.ts KvTexture): u32 word w at (w % 4096, w / 4096).
@group(0) @binding(5) var cacheK: texture_storage_2d<r32uint, read_write>;
@group(0) @binding(6) var cacheV: texture_storage_2d<r32uint, read_write>;
#elif KV_TEX
// f32 rows in r32float textures (core/ops/kv_write.ts KvTexture): float f at (f % 4096, f / 4096).
@group(0) @binding(5) var cacheK: texture_storage_2d<r32float, read_write>;
@group(0) @binding(6) var cacheV: texture_storage_2d<r32float, read_write>;
#elif Q8
@group(0) @binding(5) var<storage, read_write> cacheK: array<u32>;  // [numSlots, nKv, headDim/4 + 1] u32 (int8 x4, ..., f32 scale)
@group(0) @binding(6) var<storage, read_write> cacheV: array<u32>;  // [numSlots, nKv, headDim/4 + 1] u32 (int8 x4, ..., f32 scale)
#elif F16
@group(0) @binding(5) var<storage, read_write> cacheK: array<vec2<u32>>;  // [numSlots, nKv, headDim/4] 4 halves each
@group(0) @binding(6) var<storage, read_write> cacheV: array<vec2<u32>>;  // [numSlots, nKv, headDim/4] 4 halves each
#else
@group(0) @binding(5) var<storage, read_write> cacheK: array<vec4<f32>>;  // [numSlots, nKv, headDim/4] vec4<f32>
@group(0) @binding(6) var<storage, read_write> cacheV: array<vec4<f32>>;  // [numSlots, nKv, headDim/4] vec4<f32>
#endif
#if KV_TEX
// Cache rows are vec4 indices within the layer, whose region starts at vec4 p.kvBase4.
fn kvBase4() -> u32 { return p.kvBase4; }
#include _kv_texture
#endif
#if QK_NORM
@group(0) @binding(7) var<storage, read> qNormW: array<f32>;     // [headDim] f32
@group(0) @binding(8) var<storage, read> kNormW: array<f32>;     // [headDim] f32
#endif
#elif QK_NORM
@group(0) @binding(4) var<storage, read> qNormW: array<f32>;     // [headDim] f32
@group(0) @binding(5) var<storage, read> kNormW: array<f32>;     // [headDim] f32
#endif

const WG: u32 = {{WG}}u;

// Element offsets (within a head) of the two members of rotation pair i.
fn lo(i: u32) -> u32 {
#if INTERLEAVED
  return 2u * i;
#else
  return i;
#endif
}
fn hi(i: u32) -> u32 {
#if INTERLEAVED
  return 2u * i + 1u;
#else
  return i + p.rotHalf;
#endif
}

// Norm multiplier for element d of a head: inv * weight (1 without QK_NORM).
fn nmul(isQ: bool, d: u32, inv: f32) -> f32 {
#if QK_NORM
  if (isQ) { return inv * qNormW[d]; }
  return inv * kNormW[d];
#else
  return 1.0;
#endif
}

#include _sincos

// Rotates pair i of the head at element offset `base`.
fn rotate(base: u32, i: u32, pos: f32, isQ: bool, inv: f32) {
  let i0 = lo(i);
  let i1 = hi(i);
  let y = rotPair(qkv[base + i0] * nmul(isQ, i0, inv), qkv[base + i1] * nmul(isQ, i1, inv), sincos(pos * invFreq[i]));
  qkv[base + i0] = y.x;
  qkv[base + i1] = y.y;
}

#if KV
const INV127: f32 = 0.007874015718698502;  // f32(1/127)

fn ld4(i: u32) -> vec4<f32> {
  return vec4<f32>(qkv[i], qkv[i + 1u], qkv[i + 2u], qkv[i + 3u]);
}

#if Q8
#if !KV_TEX
fn swK(w: u32, v: u32) { cacheK[w] = v; }
fn swV(w: u32, v: u32) { cacheV[w] = v; }
#endif
#include _kv_pack8

// (absmax of the k head at kb, of the v head at vb) over vec4s start, start + step, ...
fn absmax2(kb: u32, vb: u32, start: u32, step: u32) -> vec2<f32> {
  var mk = vec4<f32>(0.0);
  var mv = vec4<f32>(0.0);
  for (var d = start; d < p.headDim / 4u; d += step) {
    mk = max(mk, abs(ld4(kb + 4u * d)));
    mv = max(mv, abs(ld4(vb + 4u * d)));
  }
  return vec2<f32>(max(max(mk.x, mk.y), max(mk.z, mk.w)), max(max(mv.x, mv.y), max(mv.z, mv.w)));
}

// Stores vec4s start, start + step, ... of kv head kvh's k (at kb) and v (at vb) rows with
// scales sc = (k, v) = absmax * f32(1/127); the start-0 caller also stores the scales.
fn storeRow(slot: u32, kvh: u32, kb: u32, vb: u32, start: u32, step: u32, sc: vec2<f32>) {
  if (slot == 0xffffffffu) { return; }
  let hd4 = p.headDim / 4u;
  let dst = (slot * (p.heads - p.qHeads) + kvh) * (hd4 + 1u);
  let ik = select(0.0, 1.0 / sc.x, sc.x > 0.0);
  let iv = select(0.0, 1.0 / sc.y, sc.y > 0.0);
  for (var d = start; d < hd4; d += step) {
    swK(dst + d, pack8(ld4(kb + 4u * d), ik));
    swV(dst + d, pack8(ld4(vb + 4u * d), iv));
  }
  if (start == 0u) {
    swK(dst + hd4, bitcast<u32>(sc.x));
    swV(dst + hd4, bitcast<u32>(sc.y));
  }
}
#else
#if F16
#include _kv_half
#endif
// Copies vec4s start, start + step, ... of kv head kvh's k (at kb) and v (at vb) rows.
fn storeRow(slot: u32, kvh: u32, kb: u32, vb: u32, start: u32, step: u32) {
  if (slot == 0xffffffffu) { return; }
  let hd4 = p.headDim / 4u;
  let dst = (slot * (p.heads - p.qHeads) + kvh) * hd4;
  for (var d = start; d < hd4; d += step) {
#if KV_TEX
    stKV(dst, d, ld4(kb + 4u * d), ld4(vb + 4u * d));
#elif F16
    cacheK[dst + d] = half4(ld4(kb + 4u * d));
    cacheV[dst + d] = half4(ld4(vb + 4u * d));
#else
    cacheK[dst + d] = ld4(kb + 4u * d);
    cacheV[dst + d] = ld4(vb + 4u * d);
#endif
  }
}
#endif
#endif

#if SHARED
var<workgroup> partial: array<f32, WG>;
#if KV && Q8
var<workgroup> red: array<vec2<f32>, WG>;
#endif

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let id = wid.x + wid.y * 65535u;  // (token, head)
  if (id >= p.tokens * p.heads) { return; }
  let t = id / p.heads;
  let h = id % p.heads;
  let isQ = h < p.qHeads;
  let base = t * p.rowStride + h * p.headDim;
  let pos = f32(positions[t]);
  var inv = 1.0;
#if QK_NORM
  var s = 0.0;
  for (var d = lid; d < p.headDim; d += WG) {
    let v = qkv[base + d];
    s += v * v;
  }
  partial[lid] = s;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride) { partial[lid] += partial[lid + stride]; }
    workgroupBarrier();
  }
  inv = inverseSqrt(partial[0] / f32(p.headDim) + p.eps);
  for (var d = 2u * p.rotHalf + lid; d < p.headDim; d += WG) {
    qkv[base + d] *= nmul(isQ, d, inv);
  }
#endif
  for (var i = lid; i < p.rotHalf; i += WG) {
    rotate(base, i, pos, isQ, inv);
  }
#if KV
  if (isQ) { return; }  // uniform: h depends on the workgroup id only
  storageBarrier();  // every thread's rotated k is visible
  let kvh = h - p.qHeads;
  let vb = t * p.rowStride + (p.heads + kvh) * p.headDim;
#if Q8
  red[lid] = absmax2(base, vb, lid, WG);
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride) { red[lid] = max(red[lid], red[lid + stride]); }
    workgroupBarrier();
  }
  storeRow(slots[t], kvh, base, vb, lid, WG, red[0] * INV127);
#else
  storeRow(slots[t], kvh, base, vb, lid, WG);
#endif
#endif
}
#else
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let id = gid.x + gid.y * nwg.x * WG;  // (token, head)
  if (id >= p.tokens * p.heads) { return; }
  let t = id / p.heads;
  let h = id % p.heads;
  let isQ = h < p.qHeads;
  let base = t * p.rowStride + h * p.headDim;
  let pos = f32(positions[t]);
  var inv = 1.0;
#if QK_NORM
  var s = 0.0;
  for (var d = 0u; d < p.headDim; d++) {
    let v = qkv[base + d];
    s += v * v;
  }
  inv = inverseSqrt(s / f32(p.headDim) + p.eps);
  for (var d = 2u * p.rotHalf; d < p.headDim; d++) {
    qkv[base + d] *= nmul(isQ, d, inv);
  }
#endif
  for (var i = 0u; i < p.rotHalf; i++) {
    rotate(base, i, pos, isQ, inv);
  }
#if KV
  if (!isQ) {
    let kvh = h - p.qHeads;
    let vb = t * p.rowStride + (p.heads + kvh) * p.headDim;
#if Q8
    storeRow(slots[t], kvh, base, vb, 0u, 1u, absmax2(base, vb, 0u, 1u) * INV127);
#else
    storeRow(slots[t], kvh, base, vb, 0u, 1u);
#endif
  }
#endif
}
#endif
