// Paged KV-cache write: stores each token's k and v heads out of the fused qkv row
// into its cache slot. cache[slot, h, :] = qkv[t, off + h*headDim : ...] for the k
// (off = kOff4) and v (off = vOff4) heads. Slot 0xffffffff marks a padding token: skipped.
// All qkv offsets are in vec4 units (headDim and rowStride are multiples of 4).
// Q8=0: f32 cache rows of headDim/4 vec4s, a plain copy.
// Q8=1: int8 cache rows of headDim/4 + 1 u32 words: the codes of elements 4i..4i+3 in
//       word i (element 4i+b in byte b), then the f32 scale = absmax * f32(1/127);
//       code = round(x / scale) (ties to even), |code| <= 127 (see core/ops/kv_write.ts).
// F16=1: f16 cache rows of headDim/4 vec2<u32> (four halves each, _kv_half).
// Variants: SHARED=0 one invocation per (token, kv head) looping over headDim/4
//           (CPU emulation); SHARED=1 f32: one invocation per (token, kv head, vec4),
//           consecutive threads on consecutive vec4s (coalesced, real GPUs); q8: one
//           workgroup per (token, kv head), the absmax reduced in workgroup memory.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<vec4<f32>>;           // [tokens, rowStride/4] vec4<f32>
@group(0) @binding(2) var<storage, read> slots: array<u32>;               // [tokens] u32 cache slot per token
#if Q8
@group(0) @binding(3) var<storage, read_write> cacheK: array<u32>;        // [numSlots, kvHeads, headDim/4 + 1] u32 (int8 x4, ..., f32 scale)
@group(0) @binding(4) var<storage, read_write> cacheV: array<u32>;        // [numSlots, kvHeads, headDim/4 + 1] u32 (int8 x4, ..., f32 scale)
#elif F16
@group(0) @binding(3) var<storage, read_write> cacheK: array<vec2<u32>>;  // [numSlots, kvHeads, headDim/4] 4 halves each
@group(0) @binding(4) var<storage, read_write> cacheV: array<vec2<u32>>;  // [numSlots, kvHeads, headDim/4] 4 halves each
#else
@group(0) @binding(3) var<storage, read_write> cacheK: array<vec4<f32>>;  // [numSlots, kvHeads, headDim/4] vec4<f32>
@group(0) @binding(4) var<storage, read_write> cacheV: array<vec4<f32>>;  // [numSlots, kvHeads, headDim/4] vec4<f32>
#endif

#if F16
#include _kv_half
// A vec4 of k or v as stored in the cache.
fn kvEl(x: vec4<f32>) -> vec2<u32> { return half4(x); }
#else
fn kvEl(x: vec4<f32>) -> vec4<f32> { return x; }
#endif

const WG: u32 = {{WG}}u;
const INV127: f32 = 0.007874015718698502;  // f32(1/127)

// Four int8 codes round(x * inv), clamped to +-127, packed into one word (x.b in byte b).
fn pack8(x: vec4<f32>, inv: f32) -> u32 {
  let q = clamp(vec4<i32>(round(x * inv)), vec4<i32>(-127), vec4<i32>(127));
  let b = bitcast<vec4<u32>>(q) & vec4<u32>(0xffu);
  return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}

// 1 / scale, or 0 for an all-zero row (codes 0).
fn invScale(scale: f32) -> f32 {
  return select(0.0, 1.0 / scale, scale > 0.0);
}

fn max4(v: vec4<f32>) -> f32 {
  return max(max(v.x, v.y), max(v.z, v.w));
}

#if SHARED && Q8
var<workgroup> red: array<vec2<f32>, WG>;  // per thread: (k absmax, v absmax), then the tree reduction

// One workgroup per (token, kv head). No early return after the id check: barriers
// need uniform control flow, so a NO_SLOT token only skips the stores.
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let id = wid.x + wid.y * 65535u;  // t * kvHeads + h
  if (id >= p.tokens * p.kvHeads) { return; }
  let t = id / p.kvHeads;
  let h = id % p.kvHeads;
  let slot = slots[t];
  let src = t * p.rowStride4 + h * p.hd4;
  var m = vec2<f32>(0.0);
  for (var d = lid; d < p.hd4; d += WG) {
    m = max(m, vec2<f32>(max4(abs(qkv[src + p.kOff4 + d])), max4(abs(qkv[src + p.vOff4 + d]))));
  }
  red[lid] = m;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride) { red[lid] = max(red[lid], red[lid + stride]); }
    workgroupBarrier();
  }
  let scale = red[0] * INV127;
  let ik = invScale(scale.x);
  let iv = invScale(scale.y);
  if (slot != 0xffffffffu) {
    let dst = (slot * p.kvHeads + h) * (p.hd4 + 1u);
    for (var d = lid; d < p.hd4; d += WG) {
      cacheK[dst + d] = pack8(qkv[src + p.kOff4 + d], ik);
      cacheV[dst + d] = pack8(qkv[src + p.vOff4 + d], iv);
    }
    if (lid == 0u) {
      cacheK[dst + p.hd4] = bitcast<u32>(scale.x);
      cacheV[dst + p.hd4] = bitcast<u32>(scale.y);
    }
  }
}
#else
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let id = gid.x + gid.y * nwg.x * WG;
#if SHARED
  // id = (t * kvHeads + h) * hd4 + d
  if (id >= p.tokens * p.kvHeads * p.hd4) { return; }
  let d = id % p.hd4;
  let th = id / p.hd4;
  let t = th / p.kvHeads;
  let h = th % p.kvHeads;
  let slot = slots[t];
  if (slot == 0xffffffffu) { return; }
  let src = t * p.rowStride4 + h * p.hd4 + d;
  let dst = (slot * p.kvHeads + h) * p.hd4 + d;
  cacheK[dst] = kvEl(qkv[src + p.kOff4]);
  cacheV[dst] = kvEl(qkv[src + p.vOff4]);
#else
  // id = t * kvHeads + h
  if (id >= p.tokens * p.kvHeads) { return; }
  let t = id / p.kvHeads;
  let h = id % p.kvHeads;
  let slot = slots[t];
  if (slot == 0xffffffffu) { return; }
  let src = t * p.rowStride4 + h * p.hd4;
#if Q8
  var mk = vec4<f32>(0.0);
  var mv = vec4<f32>(0.0);
  for (var d = 0u; d < p.hd4; d++) {
    mk = max(mk, abs(qkv[src + p.kOff4 + d]));
    mv = max(mv, abs(qkv[src + p.vOff4 + d]));
  }
  let sk = max4(mk) * INV127;
  let sv = max4(mv) * INV127;
  let ik = invScale(sk);
  let iv = invScale(sv);
  let dst = (slot * p.kvHeads + h) * (p.hd4 + 1u);
  for (var d = 0u; d < p.hd4; d++) {
    cacheK[dst + d] = pack8(qkv[src + p.kOff4 + d], ik);
    cacheV[dst + d] = pack8(qkv[src + p.vOff4 + d], iv);
  }
  cacheK[dst + p.hd4] = bitcast<u32>(sk);
  cacheV[dst + p.hd4] = bitcast<u32>(sv);
#else
  let dst = (slot * p.kvHeads + h) * p.hd4;
  for (var d = 0u; d < p.hd4; d++) {
    cacheK[dst + d] = kvEl(qkv[src + p.kOff4 + d]);
    cacheV[dst + d] = kvEl(qkv[src + p.vOff4 + d]);
  }
#endif
#endif
}
#endif
