/**
 * LayerNorm (GPT-2, BERT): y = (h - mean(h)) * rsqrt(var(h) + eps) * w + b over the last
 * dim, biased variance, f32 accumulation (shifted two-pass: exact for large offsets).
 * h = x, or x + residual when `residual` is given (BERT post-norm LayerNorm(x + residual));
 * `sumOut` then also receives h (pre-norm residual stream). Shapes: x, residual, y, sumOut
 * [rows, dim] f32; w, b [dim] f32. Outputs may be the very tensors x or residual (in place):
 * such an input is bound once, as the output, and read from there (defines X_SRC / R_SRC).
 * Reference: layer_norm.ref.ts.
 */
import type { Recorder } from '../gpu/recorder.ts';
import { numel, type Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { ceilDiv, grid1d } from './grid.ts';
import type { Variant } from './variant.ts';

const layout = uniformLayout([
  ['rows', 'u32'],
  ['dim', 'u32'], // in elements
  ['eps', 'f32'],
] as const);

export interface LayerNormOptions {
  eps: number;
  /** Added to x before normalising: h = x + residual. */
  residual?: Tensor;
  /** Receives h = x + residual (needs `residual`); may be x or residual itself. */
  sumOut?: Tensor;
  /** Kernel variant; defaults to the context's (see variant.ts). */
  variant?: Variant;
}

/** Which output binding ('y' | 's') input `t` must be read from, else its own name. */
function source(t: Tensor, own: string, y: Tensor, s: Tensor | undefined): string {
  const hit = t.buffer === y.buffer ? y : s && t.buffer === s.buffer ? s : null;
  if (!hit) return own;
  if (hit.offset !== t.offset) throw new Error('layerNorm: an input shares an output buffer at a different offset');
  return hit === y ? 'y' : 's';
}

export async function layerNorm(rec: Recorder, x: Tensor, w: Tensor, b: Tensor | null, y: Tensor, opts: LayerNormOptions): Promise<void> {
  const dim = x.shape[x.shape.length - 1]!;
  const rows = numel(x.shape) / dim;
  const { residual: r, sumOut: s } = opts;
  for (const t of [y, r, s]) if (t && numel(t.shape) !== rows * dim) throw new Error(`layerNorm: shape ${t.shape} != x ${x.shape}`);
  if (numel(w.shape) !== dim || (b && numel(b.shape) !== dim)) throw new Error(`layerNorm: w/b must have ${dim} elements`);
  if (s && !r) throw new Error('layerNorm: sumOut needs a residual');
  if (s && s.buffer === y.buffer) throw new Error('layerNorm: y and sumOut must be different buffers');
  for (const t of [w, b]) if (t && (t.buffer === y.buffer || t.buffer === s?.buffer)) throw new Error('layerNorm: w/b may not share an output buffer');
  const X_SRC = source(x, 'x', y, s);
  const R_SRC = r ? source(r, 'r', y, s) : 'r';

  // Storage bindings in order: x?, residual?, w, b?, y, sumOut?  (numbered from 1).
  const bound: Tensor[] = [];
  const slot = (t: Tensor): number => bound.push(t);
  const B_X = X_SRC === 'x' ? slot(x) : 0;
  const B_R = r && R_SRC === 'r' ? slot(r) : 0;
  const B_W = slot(w);
  const B_B = b ? slot(b) : 0;
  const B_Y = slot(y);
  const B_S = s ? slot(s) : 0;

  const shared = (opts.variant ?? rec.ctx.variant) === 'gpu';
  // gpu: 64 threads per row, fewer (a power of two >= dim) for narrow rows.
  const WG = shared ? Math.min(64, 2 ** Math.ceil(Math.log2(dim))) : 64;
  const kernel = await rec.ctx.pipelines.get({
    shader: 'layer_norm',
    defines: { WG, SHARED: shared, RES: !!r, SUM: !!s, BIAS: !!b, X_SRC, R_SRC, B_X, B_R, B_W, B_B, B_Y, B_S },
    layout,
  });
  rec.dispatch(kernel, { rows, dim, eps: opts.eps }, bound, grid1d(shared ? rows : ceilDiv(rows, WG)));
}
