// Token sampling per batch row, each row with its own parameters (host side: core/ops/sample.ts,
// reference: core/ops/sample.ref.ts). For row r:
//   z[v] = mask(logits[r, v]) (disallowed or non-finite -> NEG), then the (token, count) history
//   pairs get the HF repetition penalty and OpenAI presence/frequency penalties, then / temperature.
//   Greedy rows (temperature 0): lowest-id argmax; without penalties one pass over the logits.
//   Sampled rows: top-k keeps z >= k-th largest z; w = exp(z - max z) (top token w = 1); top-p
//   keeps w >= Tp, Tp the largest threshold whose kept mass is >= topP * mass; min-p keeps
//   w >= minP. Thresholds are found by bisection on f32 bit patterns (~20-32 counting passes),
//   never by sorting. Then pick the first id (ascending) whose cumulative kept weight exceeds
//   u * (kept mass), u = uniform01(seed, step) (pcg2d hash, see below).
//   No allowed token -> NONE (0xFFFFFFFF).
// Variants (PipelineKey defines):
//   SHARED=0: one invocation per row, sequential passes, no workgroup memory or barriers.
//   SHARED=1: one workgroup of WG invocations per row, strided passes, tree reductions in
//             workgroup memory, chunked prefix walk for the draw.
//   The host picks SHARED=0 only while the batch's worst-case loop count fits llvmpipe's silent
//   cap of 65535 loop iterations per invocation (cpuLoops in sample.ts); else SHARED=1.
// z holds 4 ids per vec4 so every pass over the vocabulary is ceil(V/4) loop iterations.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;       // [rows, vocab] f32
@group(0) @binding(2) var<storage, read> mask: array<u32>;         // [rows, maskWords] u32: bit v%32 of word v/32 = allowed; 4-byte dummy unless p.hasMask
@group(0) @binding(3) var<storage, read> rowinfo: array<u32>;      // [rows, ROW_WORDS] u32/f32 params (layout in sample.ts), then [pairs, 2] u32 (token, count)
@group(0) @binding(4) var<storage, read_write> z: array<vec4<f32>>; // [zRows, ceil(vocab/4)] vec4<f32> scratch: processed logits, then weights (pad lanes: NEG, then 0)
@group(0) @binding(5) var<storage, read_write> ids: array<u32>;    // [rows] u32 sampled token ids

const WG: u32 = {{WG}}u;
const ROW_WORDS: u32 = 12u;
const NONE: u32 = 0xffffffffu;
const NEG: f32 = -0x1.fffffep+127f; // -FLT_MAX marks disallowed tokens: finite, no inf arithmetic (a literal: naga has no const bitcast)
const BLOCKQ: u32 = 256u;                   // quads per partial sum (keeps f32 sums accurate at V=152k)

struct CM { c: u32, m: f32 }             // count, mass
struct Best { m: f32, am: u32, n: u32, lo: f32 } // max, lowest argmax (NONE: nothing allowed), allowed count, min allowed

fn quads() -> u32 { return (p.vocab + 3u) / 4u; }
fn rf(r: u32, i: u32) -> f32 { return bitcast<f32>(rowinfo[r * ROW_WORDS + i]); }
fn ru(r: u32, i: u32) -> u32 { return rowinfo[r * ROW_WORDS + i]; }

// The logit with the mask applied; disallowed, out of range, -inf and NaN -> NEG.
fn masked(r: u32, v: u32) -> f32 {
  if (v >= p.vocab) { return NEG; }
  let l = logits[r * p.vocab + v];
  var ok = l > NEG;
  if (p.hasMask != 0u) { ok = ok && ((mask[r * p.maskWords + (v >> 5u)] >> (v & 31u)) & 1u) == 1u; }
  return select(NEG, l, ok);
}
fn masked4(r: u32, i: u32) -> vec4<f32> {
  let v = 4u * i;
  return vec4<f32>(masked(r, v), masked(r, v + 1u), masked(r, v + 2u), masked(r, v + 3u));
}

// HF repetition penalty, then OpenAI presence/frequency; `cnt` = occurrences in the history.
fn penalized(r: u32, l: f32, cnt: u32) -> f32 {
  let rp = rf(r, 4u);
  let x = select(l * rp, l / rp, l > 0.0);
  return x - (rf(r, 5u) + rf(r, 6u) * f32(cnt));
}

// Order-preserving f32 -> u32 map (a < b  <=>  fkey(a) < fkey(b)).
fn fkey4(x: vec4<f32>) -> vec4<u32> {
  let b = bitcast<vec4<u32>>(x);
  return select(b | vec4<u32>(0x80000000u), ~b, (b >> vec4<u32>(31u)) == vec4<u32>(1u));
}
fn fkey(x: f32) -> u32 { return fkey4(vec4<f32>(x)).x; }
fn count4(b: vec4<bool>) -> u32 { return dot(vec4<u32>(b), vec4<u32>(1u)); }

// pcg2d (Jarzynski & Olano, "Hash Functions for GPU Rendering", JCGT 2020); u32 wrapping math.
fn pcg2d(a: vec2<u32>) -> vec2<u32> {
  var v = a * 1664525u + vec2<u32>(1013904223u);
  v.x += v.y * 1664525u;
  v.y += v.x * 1664525u;
  v = v ^ (v >> vec2<u32>(16u));
  v.x += v.y * 1664525u;
  v.y += v.x * 1664525u;
  v = v ^ (v >> vec2<u32>(16u));
  return v;
}
// u in [0, 1) with 24 bits, exact in f32: (pcg2d(seed, step).x >> 8) / 2^24.
fn uniform01(seed: u32, step: u32) -> f32 {
  return f32(pcg2d(vec2<u32>(seed, step)).x >> 8u) * (1.0 / 16777216.0);
}

// ---- passes over quads first, first + stride, ... (SHARED=0: 0, 1; SHARED=1: lid, WG) ----

fn take4(b: Best, x: vec4<f32>, v: u32) -> Best {
  var o = b;
  if (x.x > o.m) { o.m = x.x; o.am = v; }
  if (x.y > o.m) { o.m = x.y; o.am = v + 1u; }
  if (x.z > o.m) { o.m = x.z; o.am = v + 2u; }
  if (x.w > o.m) { o.m = x.w; o.am = v + 3u; }
  let ok = x > vec4<f32>(NEG);
  o.n += count4(ok);
  let lo4 = select(vec4<f32>(-NEG), x, ok);
  o.lo = min(o.lo, min(min(lo4.x, lo4.y), min(lo4.z, lo4.w)));
  return o;
}
// Argmax of the masked logits (greedy rows without penalties: no scratch needed).
fn argmax_logits(r: u32, first: u32, stride: u32) -> Best {
  var b = Best(NEG, NONE, 0u, -NEG);
  for (var i = first; i < quads(); i += stride) { b = take4(b, masked4(r, i), 4u * i); }
  return b;
}
fn argmax_z(zb: u32, first: u32, stride: u32) -> Best {
  var b = Best(NEG, NONE, 0u, -NEG);
  for (var i = first; i < quads(); i += stride) { b = take4(b, z[zb + i], 4u * i); }
  return b;
}
// argmax_logits(r, 0, 1).am for a row without a mask, as one compare per logit: `l > m` from
// m = NEG alone keeps masked()'s rules (NaN, -inf and NEG never win, ties keep the lowest id).
fn argmax_plain(r: u32) -> u32 {
  var m = NEG;
  var am = NONE;
  let b = r * p.vocab;
  let full = p.vocab / 4u;
  for (var i = 0u; i < full; i++) {
    let v = 4u * i;
    let l0 = logits[b + v];
    let l1 = logits[b + v + 1u];
    let l2 = logits[b + v + 2u];
    let l3 = logits[b + v + 3u];
    let g0 = l0 > m;
    m = select(m, l0, g0);
    am = select(am, v, g0);
    let g1 = l1 > m;
    m = select(m, l1, g1);
    am = select(am, v + 1u, g1);
    let g2 = l2 > m;
    m = select(m, l2, g2);
    am = select(am, v + 2u, g2);
    let g3 = l3 > m;
    m = select(m, l3, g3);
    am = select(am, v + 3u, g3);
  }
  for (var v = 4u * full; v < p.vocab; v++) {
    let l = logits[b + v];
    if (l > m) { m = l; am = v; }
  }
  return am;
}
// z = masked logits / T (T = 1 for greedy rows).
fn fill(r: u32, zb: u32, T: f32, first: u32, stride: u32) {
  for (var i = first; i < quads(); i += stride) {
    let x = masked4(r, i);
    z[zb + i] = select(vec4<f32>(NEG), x / T, x > vec4<f32>(NEG));
  }
}
// Then the penalised history tokens (distinct, so no two invocations write one element).
fn fill_pairs(r: u32, zb: u32, T: f32, first: u32, stride: u32) {
  let off = ru(r, 9u);
  for (var i = first; i < ru(r, 10u); i += stride) {
    let tok = rowinfo[off + 2u * i];
    if (tok < p.vocab) {
      let l = masked(r, tok);
      z[zb + tok / 4u][tok % 4u] = select(NEG, penalized(r, l, rowinfo[off + 2u * i + 1u]) / T, l > NEG);
    }
  }
}
// Number of ids with fkey(z) >= t.
fn count_keys(zb: u32, t: u32, first: u32, stride: u32) -> u32 {
  var c = 0u;
  for (var i = first; i < quads(); i += stride) { c += count4(fkey4(z[zb + i]) >= vec4<u32>(t)); }
  return c;
}
// z = exp(z - m) where fkey(z) >= tk, else 0.
fn weights(zb: u32, m: f32, tk: u32, first: u32, stride: u32) {
  for (var i = first; i < quads(); i += stride) {
    let x = z[zb + i];
    z[zb + i] = select(vec4<f32>(0.0), exp(x - vec4<f32>(m)), fkey4(x) >= vec4<u32>(tk));
  }
}
fn kept4(w: vec4<f32>, t: u32) -> vec4<bool> { return bitcast<vec4<u32>>(w) >= vec4<u32>(t); }
// Sum over one quad of the weights with bit pattern >= t.
fn qmass(w: vec4<f32>, t: u32) -> f32 { return dot(select(vec4<f32>(0.0), w, kept4(w, t)), vec4<f32>(1.0)); }
// Count and mass of the weights with bit pattern >= t (t >= 1 excludes zeros), in blocks of BLOCKQ visits.
fn mass(zb: u32, t: u32, first: u32, stride: u32) -> CM {
  var c = 0u;
  var total = 0.0;
  var i = first;
  loop {
    if (i >= quads()) { break; }
    var s = 0.0;
    for (var j = 0u; j < BLOCKQ && i < quads(); j++) {
      let w = z[zb + i];
      s += qmass(w, t);
      c += count4(kept4(w, t));
      i += stride;
    }
    total += s;
  }
  return CM(c, total);
}
// First id in quads [q0, q1) at which cum (starting at `cum0`) exceeds `t`; else the last kept id.
fn walk(zb: u32, tw: u32, q0: u32, q1: u32, cum0: f32, t: f32, fallback: u32) -> u32 {
  var cum = cum0;
  var pick = fallback;
  for (var i = q0; i < q1; i++) {
    let w = z[zb + i];
    for (var c = 0u; c < 4u; c++) {
      if (bitcast<u32>(w[c]) >= tw) {
        pick = 4u * i + c;
        cum += w[c];
        if (cum > t) { return pick; }
      }
    }
  }
  return pick;
}

#if SHARED
var<workgroup> red_f: array<f32, WG>;
var<workgroup> red_u: array<u32, WG>;
var<workgroup> red_n: array<u32, WG>;
var<workgroup> red_lo: array<f32, WG>;
var<workgroup> total_w: f32;
var<workgroup> pick_w: u32;

// Workgroup max / lowest argmax, count sum and min; the result is workgroup-uniform.
fn reduce_best(lid: u32, b: Best) -> Best {
  workgroupBarrier();
  red_f[lid] = b.m;
  red_u[lid] = b.am;
  red_n[lid] = b.n;
  red_lo[lid] = b.lo;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) {
      let o = red_f[lid + s];
      let oi = red_u[lid + s];
      if (o > red_f[lid] || (o == red_f[lid] && oi < red_u[lid])) { red_f[lid] = o; red_u[lid] = oi; }
      red_n[lid] += red_n[lid + s];
      red_lo[lid] = min(red_lo[lid], red_lo[lid + s]);
    }
    workgroupBarrier();
  }
  return Best(workgroupUniformLoad(&red_f[0]), workgroupUniformLoad(&red_u[0]), workgroupUniformLoad(&red_n[0]), workgroupUniformLoad(&red_lo[0]));
}
fn reduce_cm(lid: u32, a: CM) -> CM {
  workgroupBarrier();
  red_f[lid] = a.m;
  red_n[lid] = a.c;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red_f[lid] += red_f[lid + s]; red_n[lid] += red_n[lid + s]; }
    workgroupBarrier();
  }
  return CM(workgroupUniformLoad(&red_n[0]), workgroupUniformLoad(&red_f[0]));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = wid.x + wid.y * 65535u;
  if (r >= p.rows) { return; }
  let temp = rf(r, 0u);
  let greedy = temp == 0.0;
  if (greedy && ru(r, 10u) == 0u) { // fast path: one argmax pass over the logits
    let b = reduce_best(lid, argmax_logits(r, lid, WG));
    if (lid == 0u) { ids[r] = b.am; }
    return;
  }
  let zb = ru(r, 11u) * quads();
  let T = select(temp, 1.0, greedy);
  fill(r, zb, T, lid, WG);
  storageBarrier();
  fill_pairs(r, zb, T, lid, WG);
  storageBarrier();
  let st = reduce_best(lid, argmax_z(zb, lid, WG));
  if (st.am == NONE || greedy) { if (lid == 0u) { ids[r] = st.am; } return; }

  // top-k: tk = key of the k-th largest z, bisecting [min, max]; stops once exactly k keys are >= mid.
  let k = ru(r, 1u);
  var tk = fkey(NEG) + 1u;
  if (k > 0u && k < st.n) {
    var lo = fkey(st.lo); // all n >= k allowed keys are >= lo
    var hi = fkey(st.m) + 1u;
    loop {
      if (hi - lo <= 1u) { break; }
      let mid = lo + (hi - lo) / 2u;
      let c = reduce_cm(lid, CM(count_keys(zb, mid, lid, WG), 0.0)).c;
      if (c >= k) { lo = mid; if (c == k) { break; } } else { hi = mid; }
    }
    tk = lo;
  }
  weights(zb, st.m, tk, lid, WG); // same strided quads as before: no barrier needed
  // top-p: bisection on weight bits for the largest threshold with mass >= topP * mass.
  var tw = 1u;
  let tp = rf(r, 2u);
  if (tp < 1.0) {
    let all = reduce_cm(lid, mass(zb, 1u, lid, WG));
    let goal = tp * all.m;
    var lo = 1u;
    var hi = 0x3f800001u; // bits(1.0) + 1: nothing is above
    var cLo = all.c;
    var cHi = 0u;
    loop {
      if (hi - lo <= 1u || cLo - cHi <= 1u) { break; }
      let mid = lo + (hi - lo) / 2u;
      let a = reduce_cm(lid, mass(zb, mid, lid, WG));
      if (a.m >= goal) { lo = mid; cLo = a.c; } else { hi = mid; cHi = a.c; }
    }
    tw = lo;
  }
  tw = max(tw, bitcast<u32>(rf(r, 3u))); // min-p: keep w >= minP (top weight is 1)
  storageBarrier();

  // Draw: invocation lid owns quads [q0, q1); lid 0 scans the chunk sums; the owner of t walks.
  let C = (quads() + WG - 1u) / WG;
  let q0 = min(quads(), lid * C);
  let q1 = min(quads(), q0 + C);
  var own = 0.0;
  for (var i = q0; i < q1; i++) { own += qmass(z[zb + i], tw); }
  workgroupBarrier();
  red_f[lid] = own;
  workgroupBarrier();
  if (lid == 0u) {
    var acc = 0.0;
    for (var i = 0u; i < WG; i++) { let o = red_f[i]; red_f[i] = acc; acc += o; }
    total_w = acc;
    pick_w = st.am; // fallback if rounding leaves t unclaimed
  }
  let t = uniform01(ru(r, 7u), ru(r, 8u)) * workgroupUniformLoad(&total_w);
  let pre = red_f[lid];
  if (own > 0.0 && pre <= t && t < pre + own) { pick_w = walk(zb, tw, q0, q1, pre, t, st.am); }
  workgroupBarrier();
  if (lid == 0u) { ids[r] = pick_w; }
}

#else
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let r = gid.x + gid.y * nwg.x * WG;
  if (r >= p.rows) { return; }
  let temp = rf(r, 0u);
  let greedy = temp == 0.0;
  if (greedy && ru(r, 10u) == 0u) { // fast path
    if (p.hasMask == 0u) { ids[r] = argmax_plain(r); } else { ids[r] = argmax_logits(r, 0u, 1u).am; }
    return;
  }
  let zb = ru(r, 11u) * quads();
  let T = select(temp, 1.0, greedy);
  fill(r, zb, T, 0u, 1u);
  fill_pairs(r, zb, T, 0u, 1u);
  let st = argmax_z(zb, 0u, 1u);
  if (st.am == NONE || greedy) { ids[r] = st.am; return; }

  // top-k: tk = key of the k-th largest z, bisecting [min, max]; stops once exactly k keys are >= mid.
  let k = ru(r, 1u);
  var tk = fkey(NEG) + 1u;
  if (k > 0u && k < st.n) {
    var lo = fkey(st.lo); // all n >= k allowed keys are >= lo
    var hi = fkey(st.m) + 1u;
    loop {
      if (hi - lo <= 1u) { break; }
      let mid = lo + (hi - lo) / 2u;
      let c = count_keys(zb, mid, 0u, 1u);
      if (c >= k) { lo = mid; if (c == k) { break; } } else { hi = mid; }
    }
    tk = lo;
  }
  weights(zb, st.m, tk, 0u, 1u);
  // top-p: bisection on weight bits for the largest threshold with mass >= topP * mass.
  var tw = 1u;
  let tp = rf(r, 2u);
  if (tp < 1.0) {
    let all = mass(zb, 1u, 0u, 1u);
    let goal = tp * all.m;
    var lo = 1u;
    var hi = 0x3f800001u; // bits(1.0) + 1: nothing is above
    var cLo = all.c;
    var cHi = 0u;
    loop {
      if (hi - lo <= 1u || cLo - cHi <= 1u) { break; }
      let mid = lo + (hi - lo) / 2u;
      let a = mass(zb, mid, 0u, 1u);
      if (a.m >= goal) { lo = mid; cLo = a.c; } else { hi = mid; cHi = a.c; }
    }
    tw = lo;
  }
  tw = max(tw, bitcast<u32>(rf(r, 3u))); // min-p: keep w >= minP (top weight is 1)

  // Draw: block sums as in mass(); walk the block whose running sum passes t = u * (kept mass).
  let t = uniform01(ru(r, 7u), ru(r, 8u)) * mass(zb, tw, 0u, 1u).m;
  var cum = 0.0;
  var pick = st.am;
  for (var b0 = 0u; b0 < quads(); b0 += BLOCKQ) {
    let b1 = min(quads(), b0 + BLOCKQ);
    var s = 0.0;
    for (var i = b0; i < b1; i++) { s += qmass(z[zb + i], tw); }
    if (cum + s > t) { pick = walk(zb, tw, b0, b1, cum, t, st.am); break; }
    cum += s;
  }
  ids[r] = pick;
}
#endif
