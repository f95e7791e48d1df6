/**
 * Row gather: out[i, :] = x[rows[i], :]. Picks the last-token rows of a ragged
 * batch before the LM head so logits are computed only where they are sampled.
 * Shapes: x [T, D] f32, rows [R] u32, out [R, D] f32 (not aliasing x). A row
 * index >= T gives a zero row. Reference: gather_rows.ref.ts.
 */
import type { Recorder } from '../gpu/recorder.ts';
import { numel, type Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { ceilDiv, grid1d } from './grid.ts';
import type { Variant } from './variant.ts';

const layout = uniformLayout([
  ['T', 'u32'], // rows of x
  ['D', 'u32'], // row length, in elements
  ['R', 'u32'], // rows gathered
] as const);

export async function gatherRows(rec: Recorder, x: Tensor, rows: Tensor, out: Tensor, opts: { variant?: Variant } = {}): Promise<void> {
  const D = x.shape[x.shape.length - 1]!;
  const T = numel(x.shape) / D;
  const R = numel(rows.shape);
  if (numel(out.shape) !== R * D) throw new Error(`gatherRows: x ${x.shape}, rows ${rows.shape} -> out ${out.shape}`);
  if (out.buffer === x.buffer || out.buffer === rows.buffer) throw new Error('gatherRows: out may not share an input buffer');
  if (R === 0) return;
  const variant = opts.variant ?? rec.ctx.variant;
  const vec4 = variant === 'cpu' && D % 4 === 0;
  const WG = 64;
  const kernel = await rec.ctx.pipelines.get({
    shader: 'gather_rows',
    defines: { WG, VARIANT: variant, VEC4: vec4, S: vec4 ? 'vec4<f32>' : 'f32' },
    layout,
  });
  const groups = variant === 'gpu' ? R : ceilDiv(R * ceilDiv(D, 4), WG);
  rec.dispatch(kernel, { T, D, R }, [x, rows, out], grid1d(groups));
}
