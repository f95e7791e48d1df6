// Log-probabilities of sampled tokens and each row's top-K alternatives, from raw logits:
//   lp(v) = x[v] - (max + log(sum_i exp(x[i] - max)))       (log-softmax, f32 accumulation)
// One workgroup of WG threads per row. Top-K without a sort: K passes, each taking the best
// (value desc, id asc) entry strictly after the previous pick in that order, so ties keep
// ascending ids and nothing is picked twice. Output row [2 + 2K] u32:
//   [lp(sampled) as f32 bits, sampled id, (id_j, lp_j as f32 bits) for j < K].
// Reference: core/ops/logprobs.ref.ts.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;          // [rows, vocab] logits
@group(0) @binding(2) var<storage, read> ids: array<u32>;        // [rows] sampled ids
@group(0) @binding(3) var<storage, read_write> out: array<u32>;  // [rows, 2 + 2 * k]

const WG: u32 = {{WG}}u;
const BIG: f32 = 0x1.fffffep+127f; // the largest finite f32

var<workgroup> fv: array<f32, WG>;
var<workgroup> iv: array<u32, WG>;

// (v, i) ranks before (w, j): larger value first, then smaller id.
fn before(v: f32, i: u32, w: f32, j: u32) -> bool {
  return v > w || (v == w && i < j);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * 65535u;
  if (row >= p.rows) { return; }
  let V = p.vocab;
  let base = row * V;
  var m: f32 = -BIG;
  for (var i = lid; i < V; i += WG) { m = max(m, x[base + i]); }
  fv[lid] = m;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s /= 2u) {
    if (lid < s) { fv[lid] = max(fv[lid], fv[lid + s]); }
    workgroupBarrier();
  }
  let mx = fv[0];
  workgroupBarrier();
  var sum: f32 = 0.0;
  for (var i = lid; i < V; i += WG) { sum += exp(x[base + i] - mx); }
  fv[lid] = sum;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s /= 2u) {
    if (lid < s) { fv[lid] += fv[lid + s]; }
    workgroupBarrier();
  }
  let lse = mx + log(fv[0]);
  workgroupBarrier();
  let stride = 2u + 2u * p.k;
  let o = row * stride;
  if (lid == 0u) {
    let t = ids[row];
    out[o] = bitcast<u32>(select(-BIG, x[base + min(t, V - 1u)] - lse, t < V));
    out[o + 1u] = t;
  }
  // The previous pick; (BIG, 0) ranks before every finite logit.
  var pv: f32 = BIG;
  var pi: u32 = 0u;
  for (var j = 0u; j < p.k; j++) {
    var bv: f32 = -BIG;
    var bi: u32 = 0xffffffffu;
    for (var i = lid; i < V; i += WG) {
      let v = x[base + i];
      if (before(pv, pi, v, i) && before(v, i, bv, bi)) { bv = v; bi = i; }
    }
    fv[lid] = bv;
    iv[lid] = bi;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s /= 2u) {
      if (lid < s && before(fv[lid + s], iv[lid + s], fv[lid], iv[lid])) {
        fv[lid] = fv[lid + s];
        iv[lid] = iv[lid + s];
      }
      workgroupBarrier();
    }
    pv = fv[0];
    pi = iv[0];
    workgroupBarrier();
    if (lid == 0u) {
      out[o + 2u + 2u * j] = pi;
      out[o + 3u + 2u * j] = bitcast<u32>(pv - lse);
    }
  }
}
