// Part of decode_megakernel.wgsl (#include _megakernel_rope): rope (+ q/k norms) and the KV
// store of this position; uses the main file's bindings, ld4/st4 and _kv_texture.
// ---- rope (rope.wgsl, KV=1, cpu variant) on the qkv rows in region B ----

#include _sincos

// Norm multiplier for element d of a head: inv * weight (1 without QK_NORM).
fn nmul(isQ: bool, d: u32, inv: f32, lb: u32) -> f32 {
#if QK_NORM
  if (isQ) { return inv * ws(lb + p.lQn + d); }
  return inv * ws(lb + p.lKn + d);
#else
  return 1.0;
#endif
}

fn rotate(base: u32, i: u32, pos: f32, isQ: bool, inv: f32, lb: u32) {
  let i0 = i;
  let i1 = i + p.hd / 2u;
  let y = rotPair(smGet(base + i0) * nmul(isQ, i0, inv, lb), smGet(base + i1) * nmul(isQ, i1, inv, lb), sincos(pos * invFreq[i]));
  smSet(base + i0, y.x);
  smSet(base + i1, y.y);
}

#if Q8
#include _kv_pack8
#endif


// Stores kv head kvh's rotated k (sm at kb) and its v (sm at vb) at `slot` of layer cache
// offset kvOff (vec4s for f32, words for q8), as rope.wgsl's storeRow.
fn storeKv(slot: u32, kvh: u32, kb: u32, vb: u32, kvOff: u32) {
  if (slot == 0xffffffffu) { return; }
  let hd4 = p.hd / 4u;
#if Q8
  var mk = vec4<f32>(0.0);
  var mv = vec4<f32>(0.0);
  for (var d = 0u; d < hd4; d++) {
    mk = max(mk, abs(ld4(kb + 4u * d)));
    mv = max(mv, abs(ld4(vb + 4u * d)));
  }
  let sc = vec2<f32>(max(max(mk.x, mk.y), max(mk.z, mk.w)), max(max(mv.x, mv.y), max(mv.z, mv.w))) * INV127;
  let dst = kvOff + (slot * p.nKv + kvh) * (hd4 + 1u);
  let ik = select(0.0, 1.0 / sc.x, sc.x > 0.0);
  let iv = select(0.0, 1.0 / sc.y, sc.y > 0.0);
  for (var d = 0u; d < hd4; d++) {
    swK(dst + d, pack8(ld4(kb + 4u * d), ik));
    swV(dst + d, pack8(ld4(vb + 4u * d), iv));
  }
  swK(dst + hd4, bitcast<u32>(sc.x));
  swV(dst + hd4, bitcast<u32>(sc.y));
#elif KV_TEX
  let dst = kvOff + (slot * p.nKv + kvh) * hd4;
  for (var d = 0u; d < hd4; d++) { stKV(dst, d, ld4(kb + 4u * d), ld4(vb + 4u * d)); }
#else
  let dst = kvOff + (slot * p.nKv + kvh) * hd4;
  for (var d = 0u; d < hd4; d++) {
    cacheK[dst + d] = ld4(kb + 4u * d);
    cacheV[dst + d] = ld4(vb + 4u * d);
  }
#endif
}

// Head h (q heads, then k heads) of this token: q/k norm, rotation; k heads also stored.
fn ropeHead(r: u32, h: u32, posu: u32, slot: u32, lb: u32, kvOff: u32) {
  let isQ = h < p.nH;
  let rb = 4u * (r * PS + p.oB);  // row r's qkv, float index
  let base = rb + h * p.hd;
  let pos = f32(posu);
  var inv = 1.0;
#if QK_NORM
  var s = 0.0;
  for (var d = 0u; d < p.hd; d++) {
    let v = smGet(base + d);
    s += v * v;
  }
  inv = inverseSqrt(s / f32(p.hd) + p.eps);
#endif
  for (var i = 0u; i < p.hd / 2u; i++) {
    rotate(base, i, pos, isQ, inv, lb);
  }
  if (!isQ) {
    let kvh = h - p.nH;
    storeKv(slot, kvh, base, rb + (p.nH + p.nKv + kvh) * p.hd, kvOff);
  }
}
