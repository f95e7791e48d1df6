// Part of decode_megakernel.wgsl (#include _megakernel_attention): paged GQA attention of one
// token row; uses the main file's bindings, ld4/st4 and the KV load helpers.
// ---- attention (attention.wgsl, cpu variant: the same tile of 8 keys, _attention_tile8) ----

// capped4 (identity: no SOFTCAP here), codes (Q8), firstPos: shared with attention.wgsl.
#include _attention_common

#if Q8
#if !KV_TEX
fn kwK(w: u32) -> u32 { return cacheK[w]; }
fn kwV(w: u32) -> u32 { return cacheV[w]; }
fn swK(w: u32, v: u32) { cacheK[w] = v; }
fn swV(w: u32, v: u32) { cacheV[w] = v; }
#endif
// (kwK / kwV / swK / swV from _kv_texture with KV_TEX.)
fn ldK(r: u32, d: u32) -> vec4<f32> { return codes(kwK(r + d)); }
fn ldV(r: u32, d: u32) -> vec4<f32> { return codes(kwV(r + d)); }
fn scK(r: u32) -> f32 { return bitcast<f32>(kwK(r + p.hd / 4u)); }
fn scV(r: u32) -> f32 { return bitcast<f32>(kwV(r + p.hd / 4u)); }
#elif KV_TEX
// ldK / ldV: _kv_texture, included by the main file.
#else
fn ldK(r: u32, d: u32) -> vec4<f32> { return cacheK[r + d]; }
fn ldV(r: u32, d: u32) -> vec4<f32> { return cacheV[r + d]; }
#endif

// Cache row (first vec4 / word) of key position j, kv head kvh (bt: block-table start in inp).
fn kvRow(bt: u32, j: u32, kvh: u32, kvOff: u32) -> u32 {
  let slot = inp[bt + j / p.blockSize] * p.blockSize + j % p.blockSize;
  return kvOff + (slot * p.nKv + kvh) * p.kvStride;
}

// Cache rows of positions j .. j + 7 (clamped to pos). With blocks of >= 8 slots the 8
// positions span at most two blocks: two block-table reads instead of eight.
struct Rows8 {
  a: vec4<u32>,
  b: vec4<u32>,
}

fn kvRows8(bt: u32, j: u32, pos: u32, kvh: u32, kvOff: u32) -> Rows8 {
  let ja = min(vec4<u32>(j) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(pos));
  let jb = min(vec4<u32>(j) + vec4<u32>(4u, 5u, 6u, 7u), vec4<u32>(pos));
  let bs = p.blockSize;
#if BLOCK8
  let j0 = j / bs;
  let blk0 = inp[bt + j0];
  let blk1 = inp[bt + jb.w / bs];
  let ba = select(vec4<u32>(blk1), vec4<u32>(blk0), ja / bs == vec4<u32>(j0));
  let bb = select(vec4<u32>(blk1), vec4<u32>(blk0), jb / bs == vec4<u32>(j0));
#else
  let ba = vec4<u32>(inp[bt + ja.x / bs], inp[bt + ja.y / bs], inp[bt + ja.z / bs], inp[bt + ja.w / bs]);
  let bb = vec4<u32>(inp[bt + jb.x / bs], inp[bt + jb.y / bs], inp[bt + jb.z / bs], inp[bt + jb.w / bs]);
#endif
  let sa = ba * bs + ja % bs;
  let sb = bb * bs + jb % bs;
  return Rows8(vec4<u32>(kvOff) + (sa * p.nKv + kvh) * p.kvStride, vec4<u32>(kvOff) + (sb * p.nKv + kvh) * p.kvStride);
}

// Invocation `id` = (kv head, chunk of GC query heads): q from region B, output into region H.
// q, the running max / sum and the output accumulators of the GC heads live in private arrays
// indexed by compile-time loop bounds (GC, HD4), which the shader compilers unroll into
// registers: workgroup-memory traffic per key tile is what this loop would otherwise pay for.
fn attend(r: u32, id: u32, pos: u32, bt: u32, kvOff: u32) {
  let chunks = p.group / GC;
  let kvh = id / chunks;
  let h0 = kvh * p.group + (id % chunks) * GC;
  let qBase = 4u * (r * PS + p.oB) + h0 * p.hd;  // q of head h0 + g at qBase + g * hd (float index)
  let oBase = 4u * (r * PS + p.oH) + h0 * p.hd;  // out of head h0 + g at oBase + g * hd
  var qr: array<vec4<f32>, GC * HD4>;   // q of the GC heads (QREG layout of _attention_tile8)
  var acr: array<vec4<f32>, GC * HD4>;  // their output accumulators
  var m: array<f32, GC>;
  var l: array<f32, GC>;
  var sa: array<vec4<f32>, GC>;
  var sb: array<vec4<f32>, GC>;
  var cf: array<f32, GC>;
  for (var g = 0u; g < GC; g++) {
    m[g] = NEG;
    l[g] = 0.0;
    for (var d = 0u; d < HD4; d++) {
      qr[g * HD4 + d] = ld4(qBase + g * p.hd + 4u * d);
      acr[g * HD4 + d] = vec4<f32>(0.0);
    }
  }
  for (var j = firstPos(pos); j <= pos; j += 8u) {
    let rows = kvRows8(bt, j, pos, kvh, kvOff);
    let r0 = rows.a.x;
    let r1 = rows.a.y;
    let r2 = rows.a.z;
    let r3 = rows.a.w;
    let r4 = rows.b.x;
    let r5 = rows.b.y;
    let r6 = rows.b.z;
    let r7 = rows.b.w;
#include _attention_tile8
  }
  for (var g = 0u; g < GC; g++) {
    let inv = 1.0 / l[g];
    for (var d = 0u; d < HD4; d++) {
      st4(oBase + g * p.hd + 4u * d, acr[g * HD4 + d] * inv);
    }
  }
}
