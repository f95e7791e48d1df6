import { describe, expect, it } from 'vitest';
import { rmsNorm } from '../../core/ops/rms_norm.ts';
import { rmsNormRef } from '../../core/ops/rms_norm.ref.ts';
import { assertClose, BACKEND_VARIANTS, gpuFor, randn, TOL_F32 } from '../helpers/gpu.ts';

const SHAPES: [number, number][] = [
  [1, 1],
  [1, 64],
  [3, 7],
  [5, 130],
  [17, 511],
  [70, 33],
  [2, 2048],
];

describe.each(BACKEND_VARIANTS)('rms_norm on %s, %s variant', (backend, variant) => {
  it.each(SHAPES)('rows=%i dim=%i matches the reference', async (rows, dim) => {
    const ctx = await gpuFor(backend);
    const x = randn(rows * dim, rows * 1000 + dim);
    const w = randn(dim, dim + 7);
    for (const addOne of [false, true]) {
      const tx = ctx.tensor(x, [rows, dim], 'f32');
      const tw = ctx.tensor(w, [dim], 'f32');
      const ty = ctx.scratch([rows, dim]);
      const rec = ctx.recorder();
      await rmsNorm(rec, tx, tw, ty, { eps: 1e-5, addOne, variant });
      const out = rec.readback(ty);
      rec.submit();
      assertClose(new Float32Array(await out), rmsNormRef(x, w, dim, 1e-5, addOne), TOL_F32);
      ctx.free(ty);
      tx.buffer.destroy();
      tw.buffer.destroy();
    }
  });

  it('records one dispatch per call', async () => {
    const ctx = await gpuFor(backend);
    const rec = ctx.recorder();
    const t = ctx.tensor(new Float32Array(8), [2, 4], 'f32');
    await rmsNorm(rec, t, ctx.tensor(new Float32Array(4), [4], 'f32'), ctx.scratch([2, 4]), { eps: 1e-6, variant });
    expect(rec.dispatches).toBe(1);
    rec.submit();
  });
});
