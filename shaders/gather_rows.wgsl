// Row gather: out[i, :] = x[rows[i], :] (last-token rows of a ragged batch before the
// LM head). A row index >= T yields a zero row.
// Variants (PipelineKey defines):
//   VARIANT=cpu: one invocation per 4-element chunk of an output row; VEC4=1 binds x and
//                out as vec4<f32> (D % 4 == 0), else four bounds-checked scalar copies.
//   VARIANT=gpu: one workgroup per output row, threads stride the row (coalesced).

@group(0) @binding(0) var<uniform> p: Params;
alias S = {{S}};  // storage element: vec4<f32> when VEC4, else f32
@group(0) @binding(1) var<storage, read> x: array<S>;         // [T, D] f32
@group(0) @binding(2) var<storage, read> rows: array<u32>;    // [R] u32, row indices into x
@group(0) @binding(3) var<storage, read_write> out: array<S>; // [R, D] f32

const WG: u32 = {{WG}}u;

#if VARIANT == gpu
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = wid.x + wid.y * 65535u;
  if (i >= p.R) { return; }
  let r = rows[i];
  for (var c = lid; c < p.D; c += WG) {
    out[i * p.D + c] = select(0.0, x[r * p.D + c], r < p.T);
  }
}
#else
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let k = gid.x + gid.y * nwg.x * WG;  // chunk of 4 elements
  let nc = (p.D + 3u) / 4u;            // chunks per row
  let i = k / nc;
  if (i >= p.R) { return; }
  let r = rows[i];
  let c = (k % nc) * 4u;               // first column of the chunk
#if VEC4
  out[k] = select(vec4<f32>(0.0), x[r * nc + k % nc], r < p.T);
#else
  for (var j = c; j < min(c + 4u, p.D); j++) {
    out[i * p.D + j] = select(0.0, x[r * p.D + j], r < p.T);
  }
#endif
}
#endif
