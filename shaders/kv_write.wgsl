// Paged KV-cache write: copies each token's k and v heads out of the fused qkv row
// into its cache slot. cache[slot, h, :] = qkv[t, off + h*headDim : ...] for the k
// (off = kOff4) and v (off = vOff4) heads. Slot 0xffffffff marks a padding token: skipped.
// All offsets are in vec4 units (headDim and rowStride are multiples of 4).
// Variants: SHARED=0 one invocation per (token, kv head) looping over headDim/4
//           (CPU emulation); SHARED=1 one invocation per (token, kv head, vec4),
//           consecutive threads on consecutive vec4s (coalesced, real GPUs).
// No workgroup memory in either: a copy needs none.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<vec4<f32>>;           // [tokens, rowStride/4] vec4<f32>
@group(0) @binding(2) var<storage, read> slots: array<u32>;               // [tokens] u32 cache slot per token
@group(0) @binding(3) var<storage, read_write> cacheK: array<vec4<f32>>;  // [numSlots, kvHeads, headDim/4] vec4<f32>
@group(0) @binding(4) var<storage, read_write> cacheV: array<vec4<f32>>;  // [numSlots, kvHeads, headDim/4] vec4<f32>

const WG: u32 = {{WG}}u;

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
  cacheK[dst] = qkv[src + p.kOff4];
  cacheV[dst] = qkv[src + p.vOff4];
#else
  // id = t * kvHeads + h
  if (id >= p.tokens * p.kvHeads) { return; }
  let t = id / p.kvHeads;
  let h = id % p.kvHeads;
  let slot = slots[t];
  if (slot == 0xffffffffu) { return; }
  let src = t * p.rowStride4 + h * p.hd4;
  let dst = (slot * p.kvHeads + h) * p.hd4;
  for (var d = 0u; d < p.hd4; d++) {
    cacheK[dst + d] = qkv[src + p.kOff4 + d];
    cacheV[dst + d] = qkv[src + p.vOff4 + d];
  }
#endif
}
