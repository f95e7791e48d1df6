// Row scatter: x[at[i], :] = rows[i, :] for i < R (the inverse of gather_rows). Writes
// image feature rows over the token embeddings of image placeholder positions in a
// ragged decoder step. An index >= T is skipped (its row is dropped).
// Variants (PipelineKey defines):
//   VARIANT=cpu: one invocation per 4-element chunk of a source row; VEC4=1 binds rows
//                and x as vec4<f32> (D % 4 == 0), else four bounds-checked scalar copies.
//   VARIANT=gpu: one workgroup per source row, threads stride the row (coalesced).

@group(0) @binding(0) var<uniform> p: Params;
alias S = {{S}};  // storage element: vec4<f32> when VEC4, else f32
@group(0) @binding(1) var<storage, read> rows: array<S>;    // [R, D] f32
@group(0) @binding(2) var<storage, read> at: array<u32>;    // [R] u32, row indices into x
@group(0) @binding(3) var<storage, read_write> x: array<S>; // [T, D] f32

const WG: u32 = {{WG}}u;

#if VARIANT == gpu
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = wid.x + wid.y * 65535u;
  if (i >= p.R) { return; }
  let r = at[i];
  if (r >= p.T) { return; }
  for (var c = lid; c < p.D; c += WG) {
    x[r * p.D + c] = rows[i * p.D + c];
  }
}
#else
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let k = gid.x + gid.y * nwg.x * WG;  // chunk of 4 elements
  let nc = (p.D + 3u) / 4u;            // chunks per row
  let i = k / nc;
  if (i >= p.R) { return; }
  let r = at[i];
  if (r >= p.T) { return; }
#if VEC4
  x[r * nc + k % nc] = rows[k];
#else
  let c = (k % nc) * 4u;               // first column of the chunk
  for (var j = c; j < min(c + 4u, p.D); j++) {
    x[r * p.D + j] = rows[i * p.D + j];
  }
#endif
}
#endif
