/**
 * Elementwise add: out = a + b, all f32 of the same element count (residual adds).
 * `out` may be the very tensor `a` or `b` (in-place residual add): WebGPU forbids
 * binding one buffer both read-only and read_write in a dispatch, so the aliased
 * operand is then bound once, as `out`, and read from there (shader define ALIAS).
 * Reference: add.ref.ts.
 */
import type { Recorder } from '../gpu/recorder.ts';
import { numel, type Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { ceilDiv, grid1d } from './grid.ts';
import type { Variant } from './variant.ts';

const layout = uniformLayout([['count', 'u32']] as const); // elements, or vec4s when VEC4

/** Which of `inputs` shares `out`'s buffer (-1: none); throws on a partial overlap. */
function aliasOf(out: Tensor, inputs: readonly Tensor[]): number {
  const i = inputs.findIndex((t) => t.buffer === out.buffer);
  if (i >= 0 && inputs[i]!.offset !== out.offset) throw new Error('add: an input shares the output buffer at a different offset');
  if (i >= 0 && inputs.slice(i + 1).some((t) => t.buffer === out.buffer)) throw new Error('add: a and b may not both be the output buffer');
  return i;
}

export async function add(rec: Recorder, a: Tensor, b: Tensor, out: Tensor, opts: { variant?: Variant } = {}): Promise<void> {
  const n = numel(out.shape);
  if (numel(a.shape) !== n || numel(b.shape) !== n) throw new Error(`add: shapes ${a.shape} + ${b.shape} -> ${out.shape}`);
  const variant = opts.variant ?? rec.ctx.variant;
  const vec4 = variant === 'cpu' && n % 4 === 0;
  const alias = aliasOf(out, [a, b]);
  const WG = variant === 'gpu' ? 256 : 64;
  const kernel = await rec.ctx.pipelines.get({
    shader: 'add',
    defines: { WG, VARIANT: variant, VEC4: vec4, ALIAS: ['none', 'a', 'b'][alias + 1]! },
    layout,
  });
  const buffers = alias === 0 ? [b, out] : alias === 1 ? [a, out] : [a, b, out];
  const items = variant === 'gpu' ? n : ceilDiv(n, 4); // invocations
  rec.dispatch(kernel, { count: vec4 ? n / 4 : n }, buffers, grid1d(ceilDiv(items, WG)));
}
