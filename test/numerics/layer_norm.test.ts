/**
 * layer_norm.ts against layer_norm.ref.ts on every backend × variant: awkward shapes,
 * with and without bias, the fused residual (with sumOut) and every in-place
 * arrangement (y = x; sumOut = residual; sumOut = x with y = residual), plus a large
 * common offset that a one-pass E[x^2] - E[x]^2 variance would lose.
 */
import { describe, expect, it } from 'vitest';
import { layerNorm } from '../../core/ops/layer_norm.ts';
import { layerNormRef } from '../../core/ops/layer_norm.ref.ts';
import type { Tensor } from '../../core/gpu/tensor.ts';
import { assertClose, BACKEND_VARIANTS, gpuFor, randn, TOL_F32 } from '../helpers/gpu.ts';

const SHAPES: [number, number][] = [
  [1, 1],
  [1, 3],
  [3, 7],
  [5, 130],
  [2, 511],
  [4097, 3],
  [2, 4097],
  [70, 64],
];

// Which tensors the outputs are: fresh buffers, or the inputs themselves.
const MODES = ['plain', 'y=x', 'res', 'res y=x', 'res s=r', 'res s=x y=r'] as const;

describe.each(BACKEND_VARIANTS)('layer_norm on %s, %s variant', (backend, variant) => {
  it.each(SHAPES)('rows=%i dim=%i matches the reference in every mode', async (rows, dim) => {
    const ctx = await gpuFor(backend);
    const x = randn(rows * dim, rows * 1000 + dim);
    const res = randn(rows * dim, rows + dim, 2);
    const w = randn(dim, dim + 7);
    const bias = randn(dim, dim + 9);
    for (const [k, mode] of MODES.entries()) {
      const withRes = mode.startsWith('res');
      const b = k % 2 ? null : bias;
      const fresh = (): Tensor => ctx.tensor(new Float32Array(rows * dim), [rows, dim], 'f32');
      const tx = ctx.tensor(x, [rows, dim], 'f32');
      const tr = ctx.tensor(res, [rows, dim], 'f32');
      const tw = ctx.tensor(w, [dim], 'f32');
      const tb = b && ctx.tensor(b, [dim], 'f32');
      const ty = mode.includes('y=x') ? tx : mode.includes('y=r') ? tr : fresh();
      const ts = !withRes || mode === 'res y=x' ? undefined : mode.includes('s=r') ? tr : mode.includes('s=x') ? tx : fresh();
      const rec = ctx.recorder();
      await layerNorm(rec, tx, tw, tb, ty, { eps: 1e-5, variant, ...(withRes ? { residual: tr } : {}), ...(ts ? { sumOut: ts } : {}) });
      const gotY = rec.readback(ty);
      const gotS = ts && rec.readback(ts);
      rec.submit();
      const want = layerNormRef(x, w, b, dim, 1e-5, withRes ? res : undefined);
      assertClose(new Float32Array(await gotY), want.y, TOL_F32, `${mode} y`);
      if (gotS) assertClose(new Float32Array(await gotS), want.sum, TOL_F32, `${mode} sumOut`);
      for (const t of new Set([tx, tr, tw, tb, ty, ts])) t?.buffer.destroy();
    }
  });

  it('covers > 65535 rows (the gpu variant folds its grid into 2-D)', async () => {
    const ctx = await gpuFor(backend);
    const [rows, dim] = [66000, 2];
    const x = randn(rows * dim, 21);
    const w = randn(dim, 22);
    const b = randn(dim, 23);
    const tx = ctx.tensor(x, [rows, dim], 'f32');
    const tw = ctx.tensor(w, [dim], 'f32');
    const tb = ctx.tensor(b, [dim], 'f32');
    const rec = ctx.recorder();
    await layerNorm(rec, tx, tw, tb, tx, { eps: 1e-5, variant });
    const got = rec.readback(tx);
    rec.submit();
    assertClose(new Float32Array(await got), layerNormRef(x, w, b, dim, 1e-5).y, TOL_F32);
    for (const t of [tx, tw, tb]) t.buffer.destroy();
  });

  it('keeps precision under a large common offset', async () => {
    const ctx = await gpuFor(backend);
    const [rows, dim] = [3, 4097];
    const x = randn(rows * dim, 11).map((v) => v + 1000);
    const w = randn(dim, 12);
    const tx = ctx.tensor(x, [rows, dim], 'f32');
    const tw = ctx.tensor(w, [dim], 'f32');
    const rec = ctx.recorder();
    await layerNorm(rec, tx, tw, null, tx, { eps: 1e-6, variant });
    expect(rec.dispatches).toBe(1);
    const got = rec.readback(tx);
    rec.submit();
    assertClose(new Float32Array(await got), layerNormRef(x, w, null, dim, 1e-6).y, TOL_F32);
    tx.buffer.destroy();
    tw.buffer.destroy();
  });

  it('rejects sumOut without residual and y aliasing sumOut', async () => {
    const ctx = await gpuFor(backend);
    const t = ctx.tensor(new Float32Array(8), [2, 4], 'f32');
    const w = ctx.tensor(new Float32Array(4), [4], 'f32');
    const o = ctx.scratch([2, 4]);
    await expect(layerNorm(ctx.recorder(), t, w, null, o, { eps: 1e-5, sumOut: ctx.scratch([2, 4]), variant })).rejects.toThrow(/residual/);
    await expect(layerNorm(ctx.recorder(), t, w, null, o, { eps: 1e-5, residual: t, sumOut: o, variant })).rejects.toThrow(/different/);
    t.buffer.destroy();
    w.buffer.destroy();
  });
});
