// Decode megakernel for small Llama-family decoders on CPU emulation (SwiftShader, llvmpipe):
// the WHOLE decoder stack for a decode-only step in ONE dispatch, one workgroup per sequence
// (= per token: every sequence contributes exactly one token and needs its logits).
// Per-dispatch fixed cost (~0.5 ms inside the software rasterisers) dominates small models,
// so a step is this dispatch + the sampler instead of 9 per layer + 5.
//
// Workgroup s handles token s (sequence s of the step): embedding lookup; per layer RMSNorm,
// fused qkv (+bias), RoPE (+Qwen3 q/k norms), the paged KV-cache store of this position, paged
// GQA attention through the sequence's block table (sliding window), o-proj + residual,
// RMSNorm, gate/up, SiLU·up, down + residual; final RMSNorm and the LM head into
// logits [seqs, V]. All activations of the token live in workgroup memory `sm`; phases are
// separated by barriers in this entry point only (llvmpipe mishandles barriers in helpers).
//
// Arithmetic mirrors the `cpu` kernel variants op for op (same expression trees, same
// accumulation order: sequential fma chains over k in matmul.wgsl, sequential sums of squares
// in rms_norm.wgsl, rope.wgsl's sincos and rotation, attention.wgsl's 8-key tiles with online
// softmax, activation.wgsl's silu), so a token's logits do not depend on which path computed
// them (batch invariance across decode-only and mixed steps).
//
// Defines: WG workgroup size; SM floats of workgroup memory; GC query heads per attention
// invocation (as attention.ts picks it); BIAS qkv bias; QK_NORM Qwen3 q/k RMSNorm;
// Q8 8-bit KV rows (layouts in core/ops/kv_write.ts); VEC_I intermediate % 4 == 0.
// Weight offsets (Params w*/l*) are in f32 elements of the packed weight buffer, multiples of
// 64 (256-byte aligned), so rows of K % 4 == 0 matrices are vec4-aligned.

@group(0) @binding(0) var<uniform> p: Params;
#if TEX
// The packed weights as an rgba32float texture, vec4 i at texel (i % TW, i / TW), bound as a
// read-only storage texture: on llvmpipe such a texel load costs ~4 ns against ~43 ns for a
// vec4 storage-buffer load (Mesa loops those lane by lane) and ~7 ns for a sampled fetch.
@group(0) @binding(1) var wt: texture_storage_2d<rgba32float, read>;
#else
@group(0) @binding(1) var<storage, read> w4: array<vec4<f32>>;        // packed f32 weights (core/models/llama/weights.ts)
#endif
@group(0) @binding(2) var<storage, read> inp: array<u32>;             // step inputs: tokens, positions, slots [seqs]; block tables [seqs, maxBlocks]
@group(0) @binding(3) var<storage, read> invFreq: array<f32>;         // [headDim / 2] radians per position
#if KV_TEX
// f32 rows in r32float textures (core/ops/kv_write.ts KvTexture), all layers: float f at (f % 4096, f / 4096).
@group(0) @binding(4) var cacheK: texture_storage_2d<r32float, read_write>;
@group(0) @binding(5) var cacheV: texture_storage_2d<r32float, read_write>;
#elif Q8
@group(0) @binding(4) var<storage, read_write> cacheK: array<u32>;    // [layers][numSlots, nKv, headDim/4 + 1] int8 x4 words, f32 scale
@group(0) @binding(5) var<storage, read_write> cacheV: array<u32>;    // [layers][numSlots, nKv, headDim/4 + 1]
#else
@group(0) @binding(4) var<storage, read_write> cacheK: array<vec4<f32>>;  // [layers][numSlots, nKv, headDim/4]
@group(0) @binding(5) var<storage, read_write> cacheV: array<vec4<f32>>;  // [layers][numSlots, nKv, headDim/4]
#endif
@group(0) @binding(6) var<storage, read_write> logits: array<f32>;    // [seqs, V]

// The SYNC placeholder ends a phase: workgroupBarrier(), preceded by textureBarrier() with SCRATCH_TEX (the
// activations are texels then). Written inline, not as a helper: llvmpipe mishandles barriers in
// helper functions.
const WG: u32 = {{WG}}u;
const TW: u32 = {{TW}}u;  // texels per weight-texture row (power of two)
const TW_LOG2: u32 = {{TW_LOG2}}u;
const GC: u32 = {{GC}}u;
const HD4: u32 = {{HD4}}u;  // head dim / 4
const MR: u32 = {{MR}}u;
const NO: u32 = {{NO}}u;  // octets (8 columns) per invocation per matmul pass, 1 | 2 | 4
const CPL: u32 = 8u * NO;  // columns per invocation per pass  // token rows (sequences) per workgroup, 1..4
const PS: u32 = {{PS}}u;  // vec4s of workgroup memory per row
const NEG: f32 = -1e30;
const INV127: f32 = 0.007874015718698502;  // f32(1/127)

// Token activations, vec4s of f32 (all widths multiples of 4): x [D/4] residual at 0; region H
// at p.oH: h [D/4] (normed x), then att [nH * hd / 4]; region B at p.oB: qkv [qkvCols / 4],
// then act [ceil(I / 4)] (zero-padded past I).
#if SCRATCH_TEX
// The activations in an r32float read-write storage texture instead of workgroup memory
// (llvmpipe: ~3.5 ns per texel load vs ~11 ns per f32 of workgroup memory): workgroup w owns
// floats [w * MR * PS * 4, (w + 1) * MR * PS * 4), float f at texel (f % 4096, f / 4096).
@group(0) @binding(7) var scr: texture_storage_2d<r32float, read_write>;
var<private> wbase: u32;  // this workgroup's first float
#else
var<workgroup> sm: array<vec4<f32>, {{SM}}>;  // MR row regions of PS vec4s
#endif
var<workgroup> red: array<f32, 4>;  // per row: RMSNorm 1/rms

// ---- weight access ----

// The weight vec4 at vec4 index i.
fn wv(i: u32) -> vec4<f32> {
#if TEX
  return textureLoad(wt, vec2<u32>(i & (TW - 1u), i >> TW_LOG2));
#else
  return w4[i];
#endif
}

fn ws(e: u32) -> f32 {
  return wv(e >> 2u)[e & 3u];
}

#if SCRATCH_TEX
fn sAt(f: u32) -> vec2<u32> {
  let g = wbase + f;
  return vec2<u32>(g & 4095u, g >> 12u);
}

// Activation vec4 at vec4 index i / store.
fn smv(i: u32) -> vec4<f32> {
  let c = sAt(4u * i);
  return vec4<f32>(textureLoad(scr, c).x, textureLoad(scr, c + vec2<u32>(1u, 0u)).x, textureLoad(scr, c + vec2<u32>(2u, 0u)).x, textureLoad(scr, c + vec2<u32>(3u, 0u)).x);
}

fn smw(i: u32, v: vec4<f32>) {
  let c = sAt(4u * i);
  textureStore(scr, c, vec4<f32>(v.x));
  textureStore(scr, c + vec2<u32>(1u, 0u), vec4<f32>(v.y));
  textureStore(scr, c + vec2<u32>(2u, 0u), vec4<f32>(v.z));
  textureStore(scr, c + vec2<u32>(3u, 0u), vec4<f32>(v.w));
}

fn smGet(i: u32) -> f32 {
  return textureLoad(scr, sAt(i)).x;
}

fn smSet(i: u32, v: f32) {
  textureStore(scr, sAt(i), vec4<f32>(v));
}
#else
fn smv(i: u32) -> vec4<f32> {
  return sm[i];
}

fn smw(i: u32, v: vec4<f32>) {
  sm[i] = v;
}

fn smGet(i: u32) -> f32 {
  return sm[i >> 2u][i & 3u];
}

fn smSet(i: u32, v: f32) {
  sm[i >> 2u][i & 3u] = v;
}
#endif

// The vec4 at float index i (i % 4 == 0).
fn ld4(i: u32) -> vec4<f32> {
  return smv(i >> 2u);
}

fn st4(i: u32, v: vec4<f32>) {
  smw(i >> 2u, v);
}

// ---- matmul: MR rows x 8 columns per invocation, exactly matmul.wgsl's cpu kernel ----
// Row i of the MR token rows has its activations at vec4 offset i * PS. Per (row, column) one
// fma chain over k ascending; each loaded W chunk serves the MR rows (on CPU emulation every
// per-lane load is a scalar gather, the dominant cost), each x chunk 8 columns. Tail columns
// re-read row N - 1 and are dropped by the caller.

struct Oct {
  a: mat4x4<f32>,  // a[i] = row i, columns n0..n0+3
  b: mat4x4<f32>,  // b[i] = row i, columns n0+4..n0+7
}

// a + Σ_k xk[k] · wt[k]  (matmul.wgsl fma4).
fn fma4(a: vec4<f32>, xk: vec4<f32>, wt: mat4x4<f32>) -> vec4<f32> {
  return fma(vec4<f32>(xk.w), wt[3], fma(vec4<f32>(xk.z), wt[2], fma(vec4<f32>(xk.y), wt[1], fma(vec4<f32>(xk.x), wt[0], a))));
}

// acc[i] += X[i] · wt for the MR rows (matmul.wgsl step).
fn mstep(acc: mat4x4<f32>, wt: mat4x4<f32>, X: mat4x4<f32>) -> mat4x4<f32> {
  var r = acc;
  r[0] = fma4(r[0], X[0], wt);
#if MR == 2 || MR == 3 || MR == 4
  r[1] = fma4(r[1], X[1], wt);
#endif
#if MR == 3 || MR == 4
  r[2] = fma4(r[2], X[2], wt);
#endif
#if MR == 4
  r[3] = fma4(r[3], X[3], wt);
#endif
  return r;
}

// x chunk c of the MR rows (region offset xo within each row) as matrix columns.
fn xload(xo: u32, c: u32) -> mat4x4<f32> {
  let z = vec4<f32>(0.0);
#if MR == 1
  return mat4x4<f32>(smv(xo + c), z, z, z);
#elif MR == 2
  return mat4x4<f32>(smv(xo + c), smv(PS + xo + c), z, z);
#elif MR == 3
  return mat4x4<f32>(smv(xo + c), smv(PS + xo + c), smv(2u * PS + xo + c), z);
#else
  return mat4x4<f32>(smv(xo + c), smv(PS + xo + c), smv(2u * PS + xo + c), smv(3u * PS + xo + c));
#endif
}

// W rows r.x..r.w (vec4 indices of their starts) at k chunk c, as matrix columns.
fn wquad(r: vec4<u32>, c: u32) -> mat4x4<f32> {
  return transpose(mat4x4<f32>(wv(r.x + c), wv(r.y + c), wv(r.z + c), wv(r.w + c)));
}

// Row starts (vec4 indices) of W rows n..n+3 clamped to N - 1 (tail columns re-read row N - 1).
fn rowStarts(w4o: u32, k4: u32, n: u32, nl: vec4<u32>) -> vec4<u32> {
  return vec4<u32>(w4o) + min(vec4<u32>(n) + vec4<u32>(0u, 1u, 2u, 3u), nl) * k4;
}

// NO octets (columns n0 .. n0 + 8 NO - 1) of the MR rows: octet j = columns n0 + 8j ...
struct Octs {
  o: array<Oct, NO>,
}

// Rows n0.. of W [N, K] at element offset wo (K % 4 == 0, wo % 4 == 0) times the MR x rows:
// NO octets per call, so each x chunk read from workgroup memory serves 8 NO columns (on
// llvmpipe a workgroup-memory load costs ~6x a texel fetch; NO is chosen per adapter).
fn octDot(xo: u32, wo: u32, K: u32, n0: u32, N: u32) -> Octs {
  let nl = vec4<u32>(N - 1u);
  let k4 = K / 4u;
  let w4o = wo >> 2u;
  let r0 = rowStarts(w4o, k4, n0, nl);
  let r1 = rowStarts(w4o, k4, n0 + 4u, nl);
  var a0 = mat4x4<f32>();
  var b0 = mat4x4<f32>();
#if NO == 2 || NO == 4
  let r2 = rowStarts(w4o, k4, n0 + 8u, nl);
  let r3 = rowStarts(w4o, k4, n0 + 12u, nl);
  var a1 = mat4x4<f32>();
  var b1 = mat4x4<f32>();
#endif
#if NO == 4
  let r4 = rowStarts(w4o, k4, n0 + 16u, nl);
  let r5 = rowStarts(w4o, k4, n0 + 20u, nl);
  let r6 = rowStarts(w4o, k4, n0 + 24u, nl);
  let r7 = rowStarts(w4o, k4, n0 + 28u, nl);
  var a2 = mat4x4<f32>();
  var b2 = mat4x4<f32>();
  var a3 = mat4x4<f32>();
  var b3 = mat4x4<f32>();
#endif
  for (var c = 0u; c < k4; c++) {
    let X = xload(xo, c);
    a0 = mstep(a0, wquad(r0, c), X);
    b0 = mstep(b0, wquad(r1, c), X);
#if NO == 2 || NO == 4
    a1 = mstep(a1, wquad(r2, c), X);
    b1 = mstep(b1, wquad(r3, c), X);
#endif
#if NO == 4
    a2 = mstep(a2, wquad(r4, c), X);
    b2 = mstep(b2, wquad(r5, c), X);
    a3 = mstep(a3, wquad(r6, c), X);
    b3 = mstep(b3, wquad(r7, c), X);
#endif
  }
  var r: Octs;
  r.o[0] = Oct(a0, b0);
#if NO == 2 || NO == 4
  r.o[1] = Oct(a1, b1);
#endif
#if NO == 4
  r.o[2] = Oct(a2, b2);
  r.o[3] = Oct(a3, b3);
#endif
  return r;
}

// Stores the NO octets of octDot at vec4 offset o4 (+ old value when `acc`); columns >= N dropped.
fn putOcts(o4: u32, n0: u32, N: u32, v: Octs, acc: bool) {
  for (var j = 0u; j < NO; j++) { putOct(o4, n0 + 8u * j, N, v.o[j], acc); }
}

#if !VEC_I
// W row elements 4c..4c+3 at element offset b, zero past K (matmul.wgsl wat, f32, !VEC).
fn wS(b: u32, c: u32, K: u32) -> vec4<f32> {
  let k = 4u * c;
  return vec4<f32>(select(0.0, ws(b + k), k < K), select(0.0, ws(b + k + 1u), k + 1u < K),
                   select(0.0, ws(b + k + 2u), k + 2u < K), select(0.0, ws(b + k + 3u), k + 3u < K));
}

// As octDot for any K (rows not vec4-aligned); x rows are zero-padded past K.
fn octDotS(xo: u32, wo: u32, K: u32, n0: u32, N: u32) -> Oct {
  let nl = vec4<u32>(N - 1u);
  let ba = vec4<u32>(wo) + min(vec4<u32>(n0) + vec4<u32>(0u, 1u, 2u, 3u), nl) * K;
  let bb = vec4<u32>(wo) + min(vec4<u32>(n0) + vec4<u32>(4u, 5u, 6u, 7u), nl) * K;
  var acc = mat4x4<f32>();
  var acd = mat4x4<f32>();
  for (var c = 0u; c < (K + 3u) / 4u; c++) {
    let X = xload(xo, c);
    acc = mstep(acc, transpose(mat4x4<f32>(wS(ba.x, c, K), wS(ba.y, c, K), wS(ba.z, c, K), wS(ba.w, c, K))), X);
    acd = mstep(acd, transpose(mat4x4<f32>(wS(bb.x, c, K), wS(bb.y, c, K), wS(bb.z, c, K), wS(bb.w, c, K))), X);
  }
  return Oct(acc, acd);
}
#endif

// Stores an octet (columns n0..n0+7 of the MR rows) at vec4 offset o4 of each row region
// (+ the old value when `acc`: the residual add); columns >= N dropped.
fn putOct(o4: u32, n0: u32, N: u32, v: Oct, acc: bool) {
  let i0 = o4 + n0 / 4u;
  for (var i = 0u; i < MR; i++) {
    let o = i * PS + i0;
    if (n0 < N) { smw(o, select(v.a[i], v.a[i] + smv(o), acc)); }
    if (n0 + 4u < N) { smw(o + 1u, select(v.b[i], v.b[i] + smv(o + 1u), acc)); }
  }
}

// 1 / rms of row r's x as rms_norm.wgsl's cpu kernel: sequential sum of squares.
fn rmsInv(r: u32) -> f32 {
  var s: f32 = 0.0;
  for (var c = 0u; c < p.D / 4u; c++) {
    let v = smv(r * PS + c);
    s += v.x * v.x;
    s += v.y * v.y;
    s += v.z * v.z;
    s += v.w * v.w;
  }
  return inverseSqrt(s / f32(p.D) + p.eps);
}

// h = x * inv[row] * w (w at element offset wo, vec4-aligned) over (row, vec4) items.
fn normRows(lid: u32, wo: u32) {
  let D4 = p.D / 4u;
  for (var k = lid; k < MR * D4; k += WG) {
    let r = k / D4;
    let c = k % D4;
    smw(r * PS + p.oH + c, smv(r * PS + c) * red[r] * wv((wo >> 2u) + c));
  }
}

// ---- rope (rope.wgsl, KV=1, cpu variant) on the qkv rows in region B ----

// (sin a, cos a): rope.wgsl's sincos, verbatim.
fn sincos(a: f32) -> vec2<f32> {
  let k = round(a * 0.6366197723675814);
  let r = ((a - k * 1.5703125) - k * 4.84466552734375e-4) + k * 6.397578431460715e-7;
  let z = r * r;
  let s = r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
  let c = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
  let q = u32(i32(k)) & 3u;
  let odd = (q & 1u) == 1u;
  let sn = select(s, c, odd);
  let cs = select(c, s, odd);
  return vec2<f32>(select(sn, -sn, (q & 2u) != 0u), select(cs, -cs, ((q + 1u) & 2u) != 0u));
}

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
  let sc = sincos(pos * invFreq[i]);
  let c = sc.y;
  let s = sc.x;
  let i0 = i;
  let i1 = i + p.hd / 2u;
  let x0 = smGet(base + i0) * nmul(isQ, i0, inv, lb);
  let x1 = smGet(base + i1) * nmul(isQ, i1, inv, lb);
  smSet(base + i0, x0 * c - x1 * s);
  smSet(base + i1, x1 * c + x0 * s);
}

#if Q8
fn pack8(x: vec4<f32>, inv: f32) -> u32 {
  let q = clamp(vec4<i32>(round(x * inv)), vec4<i32>(-127), vec4<i32>(127));
  let b = bitcast<vec4<u32>>(q) & vec4<u32>(0xffu);
  return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}
#endif

#if KV_TEX
// Texel of vec4 d of the cache row at vec4 index r (layer offset included).
fn kvAt(r: u32, d: u32) -> vec2<u32> {
  let f = 4u * (r + d);
  return vec2<u32>(f & 4095u, f >> 12u);
}
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
    cacheK[dst + d] = pack8(ld4(kb + 4u * d), ik);
    cacheV[dst + d] = pack8(ld4(vb + 4u * d), iv);
  }
  cacheK[dst + hd4] = bitcast<u32>(sc.x);
  cacheV[dst + hd4] = bitcast<u32>(sc.y);
#elif KV_TEX
  let dst = kvOff + (slot * p.nKv + kvh) * hd4;
  for (var d = 0u; d < hd4; d++) {
    let c = kvAt(dst, d);
    let k = ld4(kb + 4u * d);
    let v = ld4(vb + 4u * d);
    for (var i = 0u; i < 4u; i++) {
      textureStore(cacheK, c + vec2<u32>(i, 0u), vec4<f32>(k[i]));
      textureStore(cacheV, c + vec2<u32>(i, 0u), vec4<f32>(v[i]));
    }
  }
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

// ---- attention (attention.wgsl, cpu variant) ----

#if Q8
fn codes(w: u32) -> vec4<f32> {
  return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(w) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
}
fn ldK(r: u32, d: u32) -> vec4<f32> { return codes(cacheK[r + d]); }
fn ldV(r: u32, d: u32) -> vec4<f32> { return codes(cacheV[r + d]); }
fn scK(r: u32) -> f32 { return bitcast<f32>(cacheK[r + p.hd / 4u]); }
fn scV(r: u32) -> f32 { return bitcast<f32>(cacheV[r + p.hd / 4u]); }
#elif KV_TEX
fn ldK(r: u32, d: u32) -> vec4<f32> {
  let c = kvAt(r, d);
  return vec4<f32>(textureLoad(cacheK, c).x, textureLoad(cacheK, c + vec2<u32>(1u, 0u)).x, textureLoad(cacheK, c + vec2<u32>(2u, 0u)).x, textureLoad(cacheK, c + vec2<u32>(3u, 0u)).x);
}
fn ldV(r: u32, d: u32) -> vec4<f32> {
  let c = kvAt(r, d);
  return vec4<f32>(textureLoad(cacheV, c).x, textureLoad(cacheV, c + vec2<u32>(1u, 0u)).x, textureLoad(cacheV, c + vec2<u32>(2u, 0u)).x, textureLoad(cacheV, c + vec2<u32>(3u, 0u)).x);
}
#else
fn ldK(r: u32, d: u32) -> vec4<f32> { return cacheK[r + d]; }
fn ldV(r: u32, d: u32) -> vec4<f32> { return cacheV[r + d]; }
#endif

fn firstPos(pos: u32) -> u32 {
  if (p.window != 0u && pos + 1u > p.window) { return pos + 1u - p.window; }
  return 0u;
}

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
  var q: array<vec4<f32>, GC * HD4>;
  var o: array<vec4<f32>, GC * HD4>;
  var m: array<f32, GC>;
  var l: array<f32, GC>;
  var sa: array<vec4<f32>, GC>;
  var sb: array<vec4<f32>, GC>;
  var cf: array<f32, GC>;
  for (var g = 0u; g < GC; g++) {
    m[g] = NEG;
    l[g] = 0.0;
    for (var d = 0u; d < HD4; d++) {
      q[g * HD4 + d] = ld4(qBase + g * p.hd + 4u * d);
      o[g * HD4 + d] = vec4<f32>(0.0);
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
    for (var g = 0u; g < GC; g++) {
      sa[g] = vec4<f32>(0.0);
      sb[g] = vec4<f32>(0.0);
    }
    for (var d = 0u; d < HD4; d++) {
      let k0 = ldK(r0, d);
      let k1 = ldK(r1, d);
      let k2 = ldK(r2, d);
      let k3 = ldK(r3, d);
      let k4 = ldK(r4, d);
      let k5 = ldK(r5, d);
      let k6 = ldK(r6, d);
      let k7 = ldK(r7, d);
      for (var g = 0u; g < GC; g++) {
        let qd = q[g * HD4 + d];
        sa[g] += vec4<f32>(dot(qd, k0), dot(qd, k1), dot(qd, k2), dot(qd, k3));
        sb[g] += vec4<f32>(dot(qd, k4), dot(qd, k5), dot(qd, k6), dot(qd, k7));
      }
    }
#if Q8
    let qa = p.qScale * vec4<f32>(scK(r0), scK(r1), scK(r2), scK(r3));
    let qb = p.qScale * vec4<f32>(scK(r4), scK(r5), scK(r6), scK(r7));
    let sva = vec4<f32>(scV(r0), scV(r1), scV(r2), scV(r3));
    let svb = vec4<f32>(scV(r4), scV(r5), scV(r6), scV(r7));
#else
    let qa = vec4<f32>(p.qScale);
    let qb = qa;
#endif
    let va = vec4<u32>(j, j + 1u, j + 2u, j + 3u) <= vec4<u32>(pos);
    let vb = vec4<u32>(j + 4u, j + 5u, j + 6u, j + 7u) <= vec4<u32>(pos);
    for (var g = 0u; g < GC; g++) {
      let xa = select(vec4<f32>(NEG), sa[g] * qa, va);
      let xb = select(vec4<f32>(NEG), sb[g] * qb, vb);
      let mx = max(xa, xb);
      let mt = max(m[g], max(max(mx.x, mx.y), max(mx.z, mx.w)));
      let corr = exp(m[g] - mt);
      let wa = exp(xa - mt);
      let wb = exp(xb - mt);
      let wsum = wa + wb;
      l[g] = l[g] * corr + (wsum.x + wsum.y + wsum.z + wsum.w);
      m[g] = mt;
      cf[g] = corr;
#if Q8
      sa[g] = wa * sva;
      sb[g] = wb * svb;
#else
      sa[g] = wa;
      sb[g] = wb;
#endif
    }
    for (var d = 0u; d < HD4; d++) {
      let v0 = ldV(r0, d);
      let v1 = ldV(r1, d);
      let v2 = ldV(r2, d);
      let v3 = ldV(r3, d);
      let v4 = ldV(r4, d);
      let v5 = ldV(r5, d);
      let v6 = ldV(r6, d);
      let v7 = ldV(r7, d);
      for (var g = 0u; g < GC; g++) {
        let wa = sa[g];
        let wb = sb[g];
        let i = g * HD4 + d;
        o[i] = o[i] * cf[g] + (wa.x * v0 + wa.y * v1 + wa.z * v2 + wa.w * v3) + (wb.x * v4 + wb.y * v5 + wb.z * v6 + wb.w * v7);
      }
    }
  }
  for (var g = 0u; g < GC; g++) {
    let inv = 1.0 / l[g];
    for (var d = 0u; d < HD4; d++) {
      st4(oBase + g * p.hd + 4u * d, o[g * HD4 + d] * inv);
    }
  }
}

// activation.wgsl's silu.
fn silu(v: vec4<f32>) -> vec4<f32> {
  return v / (vec4<f32>(1.0) + exp(min(-v, vec4<f32>(80.0))));
}

// Token row r of this workgroup: sequence index (clamped: rows past the step's sequences
// duplicate the last one and store nothing).
fn seqOf(wid: u32, r: u32) -> u32 {
  return min(wid * MR + r, p.seqs - 1u);
}

fn rowValid(wid: u32, r: u32) -> bool {
  return wid * MR + r < p.seqs;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid3: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let wid = wid3.x;  // rows wid * MR .. of the step (one token per sequence)
#if SCRATCH_TEX
  wbase = wid * MR * PS * 4u;
#endif
  if (wid * MR >= p.seqs) { return; }  // uniform: workgroup id and uniform params only
  let D = p.D;
  let D4 = D / 4u;
  let oH = p.oH;
  let oB = p.oB;
  let AD = p.nH * p.hd;  // attention output width
  let heads = p.nH + p.nKv;
  let items = p.nKv * (p.group / GC);  // attention invocations per row

  // Embedding (ids >= V give a zero row, as embedding.wgsl).
  for (var k = lid; k < MR * D4; k += WG) {
    let r = k / D4;
    let c = k % D4;
    let tok = inp[p.inTokens + seqOf(wid, r)];
    smw(r * PS + c, select(vec4<f32>(0.0), wv((p.wEmbed >> 2u) + min(tok, p.V - 1u) * D4 + c), tok < p.V));
  }
  {{SYNC}}

  for (var layer = 0u; layer < p.layers; layer++) {
    let lb = p.wLayer0 + layer * p.wLayerStride;  // element offset of this layer's weights
    let kvOff = layer * p.kvLayerStride;

    // h = RMSNorm(x) * inNorm
    if (lid < MR) { red[lid] = rmsInv(lid); }
    {{SYNC}}
    normRows(lid, lb + p.lIn);
    {{SYNC}}

    // qkv = h · Wqkvᵀ (+ bias)
    for (var n0 = CPL * lid; n0 < p.qkvCols; n0 += CPL * WG) {
      var v = octDot(oH, lb + p.lQkv, D, n0, p.qkvCols);
#if BIAS
      for (var j = 0u; j < NO; j++) {
        let nj = n0 + 8u * j;
        let bo = lb + p.lQkvB + select(nj, 0u, nj >= p.qkvCols);  // dropped octets: any in-range bias
        let ba = vec4<f32>(ws(bo), ws(bo + 1u), ws(bo + 2u), ws(bo + 3u));
        let bb = vec4<f32>(ws(bo + 4u), ws(bo + 5u), ws(bo + 6u), ws(bo + 7u));
        for (var i = 0u; i < MR; i++) {
          v.o[j].a[i] += ba;
          v.o[j].b[i] += bb;
        }
      }
#endif
      putOcts(oB, n0, p.qkvCols, v, false);
    }
    {{SYNC}}

    // rope (+ q/k norms) in place; k and v of this position into the paged cache
    for (var k = lid; k < MR * heads; k += WG) {
      let r = k / heads;
      let sq = seqOf(wid, r);
      let slot = select(0xffffffffu, inp[p.inSlots + sq], rowValid(wid, r));
      ropeHead(r, k % heads, inp[p.inPositions + sq], slot, lb, kvOff);
    }
    storageBarrier();
#if KV_TEX && !SCRATCH_TEX
    textureBarrier();
#endif
    {{SYNC}}

    // att = softmax(q kᵀ) v over positions lo..pos through the block table
    for (var k = lid; k < MR * items; k += WG) {
      let r = k / items;
      let sq = seqOf(wid, r);
      attend(r, k % items, inp[p.inPositions + sq], p.inBlockTables + sq * p.maxBlocks, kvOff);
    }
    {{SYNC}}

    // x += att · Woᵀ
    for (var n0 = CPL * lid; n0 < D; n0 += CPL * WG) { putOcts(0u, n0, D, octDot(oH, lb + p.lO, AD, n0, D), true); }
    {{SYNC}}

    // h = RMSNorm(x) * postNorm
    if (lid < MR) { red[lid] = rmsInv(lid); }
    {{SYNC}}
    normRows(lid, lb + p.lPost);
    {{SYNC}}

    // act = silu(h · Wgateᵀ) * (h · Wupᵀ), zero past I
    for (var n0 = CPL * lid; n0 < p.I; n0 += CPL * WG) {
      let g = octDot(oH, lb + p.lGu, D, n0, p.I);
      let u = octDot(oH, lb + p.lGu + p.I * D, D, n0, p.I);
      for (var j = 0u; j < NO; j++) {
        let j0 = n0 + 8u * j;
        if (j0 >= p.I) { break; }
        let ja = vec4<u32>(j0) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(p.I);
        let jb = vec4<u32>(j0) + vec4<u32>(4u, 5u, 6u, 7u) < vec4<u32>(p.I);
        let second = j0 + 4u < (p.I + 3u) / 4u * 4u;
        for (var i = 0u; i < MR; i++) {
          let o = i * PS + oB + j0 / 4u;
          smw(o, select(vec4<f32>(0.0), silu(g.o[j].a[i]) * u.o[j].a[i], ja));
          if (second) { smw(o + 1u, select(vec4<f32>(0.0), silu(g.o[j].b[i]) * u.o[j].b[i], jb)); }
        }
      }
    }
    {{SYNC}}

    // x += act · Wdownᵀ
#if VEC_I
    for (var n0 = CPL * lid; n0 < D; n0 += CPL * WG) { putOcts(0u, n0, D, octDot(oB, lb + p.lDown, p.I, n0, D), true); }
#else
    for (var n0 = 8u * lid; n0 < D; n0 += 8u * WG) { putOct(0u, n0, D, octDotS(oB, lb + p.lDown, p.I, n0, D), true); }
#endif
    {{SYNC}}
  }

  // logits = RMSNorm(x) * norm · Wheadᵀ
  if (lid < MR) { red[lid] = rmsInv(lid); }
  {{SYNC}}
  normRows(lid, p.wNorm);
  {{SYNC}}
  for (var n0 = CPL * lid; n0 < p.V; n0 += CPL * WG) {
    let v = octDot(oH, p.wHead, D, n0, p.V);
    for (var j = 0u; j < NO; j++) {
      let nj = n0 + 8u * j;
      for (var i = 0u; i < MR; i++) {
        if (!rowValid(wid, i)) { continue; }
        let o = (wid * MR + i) * p.V + nj;
        for (var q = 0u; q < 4u; q++) {
          if (nj + q < p.V) { logits[o + q] = v.o[j].a[i][q]; }
          if (nj + 4u + q < p.V) { logits[o + 4u + q] = v.o[j].b[i][q]; }
        }
      }
    }
  }
}
