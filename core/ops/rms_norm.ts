/**
 * RMSNorm (Llama, Mistral, Qwen): y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * w.
 * Shapes: x [rows, dim] f32, w [dim] f32, y [rows, dim] f32. `y` may alias nothing in `x`.
 * Reference: rms_norm.ref.ts.
 */
import type { Recorder } from '../gpu/recorder.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { ceilDiv, grid1d } from './grid.ts';
import type { Variant } from './variant.ts';

const layout = uniformLayout([
  ['rows', 'u32'],
  ['dim', 'u32'],
  ['eps', 'f32'],
] as const);

export interface RmsNormOptions {
  eps: number;
  /** Weight stored as (w - 1): multiply by (1 + w) (Gemma convention). */
  addOne?: boolean;
  /** Kernel variant; defaults to the context's (see variant.ts). */
  variant?: Variant;
}

export async function rmsNorm(rec: Recorder, x: Tensor, w: Tensor, y: Tensor, opts: RmsNormOptions): Promise<void> {
  const dim = x.shape[x.shape.length - 1]!;
  const rows = x.shape.reduce((a, b) => a * b, 1) / dim;
  const shared = (opts.variant ?? rec.ctx.variant) === 'gpu';
  const WG = 64;
  const kernel = await rec.ctx.pipelines.get({
    shader: 'rms_norm',
    defines: { WG, SHARED: shared, ADD_ONE: !!opts.addOne },
    layout,
  });
  rec.dispatch(kernel, { rows, dim, eps: opts.eps }, [x, w, y], grid1d(shared ? rows : ceilDiv(rows, WG)));
}
