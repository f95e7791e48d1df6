// Adds per-request logit biases in place before sampling: one invocation per (row, token, bias)
// entry; entries are unique per (row, token), so no two invocations write one logit.
// Reference: core/ops/logit_bias.ts (logitBiasRef).

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;  // [rows, vocab] logits
@group(0) @binding(2) var<storage, read> e: array<u32>;        // [count, 3]: row, token, bias as f32 bits

const WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.count) { return; }
  let row = e[3u * i];
  let tok = e[3u * i + 1u];
  if (tok >= p.vocab) { return; }
  x[row * p.vocab + tok] += bitcast<f32>(e[3u * i + 2u]);
}
