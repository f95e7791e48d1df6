/**
 * Activations, f32. `gatedAct` is the SwiGLU/GeGLU tail of a gated MLP: the
 * fused gate|up projection gu [T, 2*I] (gate columns first) -> out [T, I] =
 * act(gate) * up. `act` is the plain form (GPT-2/BERT MLPs): out = act(x + bias?)
 * over x [rows, n] with bias [n]; `out` may be `x` itself (in place, bound once
 * read_write). `gelu` is the exact erf form (erfc to relative error < 1.2e-7),
 * `gelu_tanh` the tanh approximation, `quick_gelu` CLIP's x * sigmoid(1.702 x).
 * Reference: activation.ref.ts.
 */
import type { Recorder } from '../gpu/recorder.ts';
import { numel, type Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { ceilDiv, grid1d } from './grid.ts';
import type { Variant } from './variant.ts';

export type Act = 'silu' | 'gelu' | 'gelu_tanh' | 'relu' | 'quick_gelu';

const layout = uniformLayout([
  ['count', 'u32'], // output elements
  ['n', 'u32'], // row length: n (plain) or I (gated), in elements
] as const);

async function run(rec: Recorder, gated: boolean, a: Act, inputs: Tensor[], out: Tensor, n: number, variant: Variant, inplace: boolean): Promise<void> {
  const count = numel(out.shape);
  const bias = !gated && inputs.length === 2;
  // vec4 storage needs every row-relative index 4-aligned: n % 4, or just count % 4 without a bias.
  const vec4 = variant === 'cpu' && (gated || bias ? n % 4 === 0 : count % 4 === 0);
  const WG = variant === 'gpu' ? 256 : 64;
  const bound = inplace ? inputs.slice(1) : inputs; // x itself is read through `out`
  const kernel = await rec.ctx.pipelines.get({
    shader: 'activation',
    defines: {
      ACT: a, GATED: gated, BIAS: bias, INPLACE: inplace, VARIANT: variant, VEC4: vec4, WG,
      V: variant === 'cpu' ? 'vec4<f32>' : 'f32', S: vec4 ? 'vec4<f32>' : 'f32', SW: vec4 ? 4 : 1,
      B_BIAS: inplace ? 1 : 2, B_Y: bound.length + 1,
    },
    layout,
  });
  const items = variant === 'gpu' ? count : ceilDiv(count, 4);
  rec.dispatch(kernel, { count, n }, [...bound, out], grid1d(ceilDiv(items, WG)));
}

/** Gated: gu [T, 2*I] (gate first, then up, per row) -> out [T, I] = act(gate) * up. */
export async function gatedAct(rec: Recorder, gu: Tensor, out: Tensor, opts: { act: Act; inter: number; variant?: Variant }): Promise<void> {
  const I = opts.inter;
  if (numel(gu.shape) !== 2 * numel(out.shape) || numel(out.shape) % I !== 0) throw new Error(`gatedAct: shapes ${gu.shape} -> ${out.shape} with inter=${I}`);
  if (gu.buffer === out.buffer) throw new Error('gatedAct: out may not share the gu buffer');
  await run(rec, true, opts.act, [gu], out, I, opts.variant ?? rec.ctx.variant, false);
}

/** Plain, in place or out of place: out = act(x + bias?) elementwise, x [rows, n], bias [n] optional. */
export async function act(rec: Recorder, x: Tensor, out: Tensor, opts: { act: Act; bias?: Tensor; variant?: Variant }): Promise<void> {
  const n = x.shape[x.shape.length - 1]!;
  if (numel(x.shape) !== numel(out.shape) || (opts.bias && numel(opts.bias.shape) !== n)) throw new Error(`act: shapes ${x.shape} -> ${out.shape}`);
  const inplace = x.buffer === out.buffer;
  if (inplace && x.offset !== out.offset) throw new Error('act: x shares the output buffer at a different offset');
  if (opts.bias?.buffer === out.buffer) throw new Error('act: bias may not share the output buffer');
  await run(rec, false, opts.act, opts.bias ? [x, opts.bias] : [x], out, n, opts.variant ?? rec.ctx.variant, inplace);
}
