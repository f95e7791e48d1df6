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
// Q8 8-bit KV rows (layouts in core/ops/kv_write.ts); VEC_I intermediate % 4 == 0; ARGMAX the
// greedy id of every row into `ids` instead of its logits (the sampler's dispatch saved).
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
@group(0) @binding(2) var<storage, read> inp: array<u32>;             // step inputs: tokens, positions, slots, tokenSeq, out rows [T + 1]; block tables [seqs, maxBlocks]; wave rows [rows]
@group(0) @binding(3) var<storage, read> invFreq: array<f32>;         // [headDim / 2] radians per position
#if KV_TEX && Q8
// q8 rows in r32uint textures (core/ops/kv_write.ts KvTexture), all layers: u32 word w at (w % 4096, w / 4096).
@group(0) @binding(4) var cacheK: texture_storage_2d<r32uint, read_write>;
@group(0) @binding(5) var cacheV: texture_storage_2d<r32uint, read_write>;
#elif KV_TEX
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
#if ARGMAX
@group(0) @binding(6) var<storage, read_write> ids: array<u32>;       // [R] greedy ids, sample.wgsl argmax_plain's rules
#else
@group(0) @binding(6) var<storage, read_write> logits: array<f32>;    // [R, V]
#endif

#if KV_TEX
// Cache row indices carry the layer offset (kvOff), so the region starts at vec4 0.
fn kvBase4() -> u32 { return 0u; }
#include _kv_texture
#endif

// The SYNC placeholder ends a phase: workgroupBarrier(), preceded by textureBarrier() with SCRATCH_TEX (the
// activations are texels then). Written inline, not as a helper: llvmpipe mishandles barriers in
// helper functions.
const WG: u32 = {{WG}}u;
const TW: u32 = {{TW}}u;  // texels per weight-texture row (power of two)
const TW_LOG2: u32 = {{TW_LOG2}}u;
const GC: u32 = {{GC}}u;
const HD4: u32 = {{HD4}}u;  // head dim / 4
const MR: u32 = {{MR}}u;
const NO_ROW: u32 = 0xffffffffu;  // out-row map: the token needs no logits
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
#if ARGMAX
// Per (row, invocation): the invocation's first maximum over its LM-head columns and its id.
var<workgroup> amM: array<f32, 4u * WG>;
var<workgroup> amI: array<u32, 4u * WG>;
const ARG_NEG: f32 = -0x1.fffffep+127f;  // sample.wgsl's NEG (-FLT_MAX): it and NaN, -inf never win
const NO_ID: u32 = 0xffffffffu;          // NO_TOKEN: no logit beat ARG_NEG
#endif

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

#include _megakernel_matmul

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

#include _megakernel_rope

#include _megakernel_attention

#if ARGMAX
// The running greedy choice of the 4 row slots (row i in component i; slots past MR hold
// zeros and are never written out): the largest logit so far and its id.
struct Best4 {
  m: vec4<f32>,
  i: vec4<u32>,
}

// b after column `id` with logits l (one per row); ids >= V ignored. Branch-free and with
// constant indices only: SwiftShader's compiler hung on the per-row, branching form.
fn better(b: Best4, l: vec4<f32>, id: u32, V: u32) -> Best4 {
  let t = (l > b.m) & vec4<bool>(id < V);
  return Best4(select(b.m, l, t), select(b.i, vec4<u32>(id), t));
}

// b after the octet's columns nj..nj+7, in order (o.a[i] / o.b[i] = row i's columns nj.. / nj+4..).
fn bestOct(b: Best4, o: Oct, nj: u32, V: u32) -> Best4 {
  let a = transpose(o.a);  // a[q] = column nj + q over the rows
  let c = transpose(o.b);
  var r = better(b, a[0], nj, V);
  r = better(r, a[1], nj + 1u, V);
  r = better(r, a[2], nj + 2u, V);
  r = better(r, a[3], nj + 3u, V);
  r = better(r, c[0], nj + 4u, V);
  r = better(r, c[1], nj + 5u, V);
  r = better(r, c[2], nj + 6u, V);
  return better(r, c[3], nj + 7u, V);
}
#endif

// activation.wgsl's silu.
fn silu(v: vec4<f32>) -> vec4<f32> {
  return v / (vec4<f32>(1.0) + exp(min(-v, vec4<f32>(80.0))));
}

// Token of row r of this workgroup: the dispatch's row map (core/models/llama/megakernel_waves.ts)
// gives a token index of the step, or the sentinel token T (token 0, position 0, no KV slot, no
// output row) for padding; rows past the dispatch's rows repeat its last row and store nothing.
fn tokOf(wid: u32, r: u32) -> u32 {
  return inp[p.inRows + min(wid * MR + r, p.seqs - 1u)];
}

fn rowValid(wid: u32, r: u32) -> bool {
  return wid * MR + r < p.seqs;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid3: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let wid = wid3.x;  // rows wid * MR .. of the dispatch
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
    let tok = inp[p.inTokens + tokOf(wid, r)];
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
      let t = tokOf(wid, r);
      let slot = select(0xffffffffu, inp[p.inSlots + t], rowValid(wid, r));
      ropeHead(r, k % heads, inp[p.inPositions + t], slot, lb, kvOff);
    }
    storageBarrier();
#if KV_TEX && !SCRATCH_TEX
    textureBarrier();
#endif
    {{SYNC}}

    // att = softmax(q kᵀ) v over positions lo..pos through the block table (a row's own chunk's
    // keys were stored above, its earlier chunks' by earlier dispatches)
    for (var k = lid; k < MR * items; k += WG) {
      let r = k / items;
      let t = tokOf(wid, r);
      attend(r, k % items, inp[p.inPositions + t], p.inBlockTables + inp[p.inTokSeq + t] * p.maxBlocks, kvOff);
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
#if ARGMAX
  // Greedy ids without storing logits. Each invocation walks its columns in ascending order
  // keeping the first strict maximum (sample.wgsl argmax_plain's compare, from -FLT_MAX); the
  // rows' winners are then the largest of the invocations' maxima, ties to the lowest id: the
  // same id as argmax_plain over the row's logits.
  var best = Best4(vec4<f32>(ARG_NEG), vec4<u32>(NO_ID));
#endif
#if !ARGMAX
  // Each row's logit row (NO_ROW: none, or a row past the dispatch's), read once.
  var orows = vec4<u32>(NO_ROW);
  for (var i = 0u; i < MR; i++) {
    if (rowValid(wid, i)) { orows[i] = inp[p.inOut + tokOf(wid, i)]; }
  }
#endif
  for (var n0 = CPL * lid; n0 < p.V; n0 += CPL * WG) {
    let v = octDot(oH, p.wHead, D, n0, p.V);
#if ARGMAX
    best = bestOct(best, v.o[0], n0, p.V);
#if NO == 2 || NO == 4
    best = bestOct(best, v.o[1], n0 + 8u, p.V);
#endif
#if NO == 4
    best = bestOct(best, v.o[2], n0 + 16u, p.V);
    best = bestOct(best, v.o[3], n0 + 24u, p.V);
#endif
#else
    for (var j = 0u; j < NO; j++) {
      let nj = n0 + 8u * j;
      for (var i = 0u; i < MR; i++) {
        let orow = orows[i];
        if (orow == NO_ROW) { continue; }
        let o = orow * p.V + nj;
        for (var q = 0u; q < 4u; q++) {
          if (nj + q < p.V) { logits[o + q] = v.o[j].a[i][q]; }
          if (nj + 4u + q < p.V) { logits[o + 4u + q] = v.o[j].b[i][q]; }
        }
      }
    }
#endif
  }
#if ARGMAX
  amM[lid] = best.m.x;
  amI[lid] = best.i.x;
  amM[WG + lid] = best.m.y;
  amI[WG + lid] = best.i.y;
  amM[2u * WG + lid] = best.m.z;
  amI[2u * WG + lid] = best.i.z;
  amM[3u * WG + lid] = best.m.w;
  amI[3u * WG + lid] = best.i.w;
  workgroupBarrier();
  if (lid < MR && rowValid(wid, lid)) {
    var m = ARG_NEG;
    var a = NO_ID;
    for (var l = 0u; l < WG; l++) {
      let x = amM[lid * WG + l];
      let k = amI[lid * WG + l];
      if (x > m || (x == m && k < a)) {
        m = x;
        a = k;
      }
    }
    let orow = inp[p.inOut + tokOf(wid, lid)];
    if (orow != NO_ROW) { ids[orow] = a; }
  }
#endif
}
