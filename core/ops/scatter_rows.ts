/**
 * Row scatter: x[at[i], :] = rows[i, :], in place (the inverse of gather_rows).
 * Image-to-text models use it to put projected image features over the token
 * embeddings of the image placeholder positions of a ragged step.
 * Shapes: rows [R, D] f32, at [R] u32 (distinct indices; an index >= T is
 * skipped), x [T, D] f32 (not aliasing rows or at). Reference: scatter_rows.ref.ts.
 */
import type { Recorder } from '../gpu/recorder.ts';
import { numel, type Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { ceilDiv, grid1d } from './grid.ts';
import type { Variant } from './variant.ts';

const layout = uniformLayout([
  ['T', 'u32'], // rows of x
  ['D', 'u32'], // row length, in elements
  ['R', 'u32'], // rows scattered
] as const);

export async function scatterRows(rec: Recorder, rows: Tensor, at: Tensor, x: Tensor, opts: { variant?: Variant } = {}): Promise<void> {
  const D = x.shape[x.shape.length - 1]!;
  const T = numel(x.shape) / D;
  const R = numel(at.shape);
  if (numel(rows.shape) !== R * D) throw new Error(`scatterRows: rows ${rows.shape}, at ${at.shape} -> x ${x.shape}`);
  if (x.buffer === rows.buffer || x.buffer === at.buffer) throw new Error('scatterRows: x may not share an input buffer');
  if (R === 0) return;
  const variant = opts.variant ?? rec.ctx.variant;
  const vec4 = variant === 'cpu' && D % 4 === 0;
  const WG = 64;
  const kernel = await rec.ctx.pipelines.get({
    shader: 'scatter_rows',
    defines: { WG, VARIANT: variant, VEC4: vec4, S: vec4 ? 'vec4<f32>' : 'f32' },
    layout,
  });
  const groups = variant === 'gpu' ? R : ceilDiv(R * ceilDiv(D, 4), WG);
  rec.dispatch(kernel, { T, D, R }, [rows, at, x], grid1d(groups));
}
