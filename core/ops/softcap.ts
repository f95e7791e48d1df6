/**
 * Soft-capping in place: y = cap * tanh(y / cap) over an f32 tensor of any shape (Gemma 2's
 * final logits, cap 30; attention logits are capped inside attention.ts). cap > 0.
 * Reference: softcap.ref.ts.
 */
import type { Recorder } from '../gpu/recorder.ts';
import { numel, type Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { ceilDiv, grid1d } from './grid.ts';
import type { Variant } from './variant.ts';

const layout = uniformLayout([
  ['count', 'u32'], // elements, or vec4s when VEC4
  ['cap', 'f32'],
  ['inv', 'f32'], // 1 / cap
] as const);

export async function softcap(rec: Recorder, y: Tensor, cap: number, opts: { variant?: Variant } = {}): Promise<void> {
  if (!(cap > 0) || !Number.isFinite(cap)) throw new Error(`softcap: cap must be a positive number, got ${cap}`);
  if (y.dtype !== 'f32') throw new Error(`softcap: f32 only, got ${y.dtype}`);
  const n = numel(y.shape);
  if (n === 0) return;
  const variant = opts.variant ?? rec.ctx.variant;
  const vec4 = variant === 'cpu' && n % 4 === 0 && y.offset % 16 === 0;
  const WG = variant === 'gpu' ? 256 : 64;
  const kernel = await rec.ctx.pipelines.get({ shader: 'softcap', defines: { WG, VARIANT: variant, VEC4: vec4 }, layout });
  const items = variant === 'gpu' ? n : ceilDiv(n, 4);
  rec.dispatch(kernel, { count: vec4 ? n / 4 : n, cap, inv: 1 / cap }, [y], grid1d(ceilDiv(items, WG)));
}
