/**
 * activation.ts against activation.ref.ts on every backend × variant: each Act,
 * plain (with and without bias, in place and out of place) and gated, on awkward
 * shapes (n % 4 != 0 takes the scalar cpu path); extreme inputs must stay finite;
 * the erf-form GELU is checked tightly enough to pin erf's |error| < 1e-6.
 */
import { describe, expect, it } from 'vitest';
import { act, gatedAct, type Act } from '../../core/ops/activation.ts';
import { actRef, gatedActRef } from '../../core/ops/activation.ref.ts';
import type { GpuContext } from '../../core/gpu/context.ts';
import type { Tensor } from '../../core/gpu/tensor.ts';
import { assertClose, BACKEND_VARIANTS, gpuFor, randn, TOL_F32 } from '../helpers/gpu.ts';

const ACTS: Act[] = ['silu', 'gelu', 'gelu_tanh', 'relu', 'quick_gelu'];
const SHAPES: [number, number][] = [
  [1, 1],
  [1, 3],
  [3, 7],
  [5, 130],
  [2, 511],
  [4097, 3],
  [70, 64],
];

async function readAndFree(_ctx: GpuContext, rec: ReturnType<GpuContext['recorder']>, t: Tensor, free: Tensor[]): Promise<Float32Array> {
  const out = rec.readback(t);
  rec.submit();
  const got = new Float32Array(await out);
  for (const f of free) f.buffer.destroy();
  return got;
}

describe.each(BACKEND_VARIANTS)('activation on %s, %s variant', (backend, variant) => {
  describe.each(ACTS)('%s', (a) => {
    it.each(SHAPES)('plain rows=%i n=%i, bias / none / in place', async (rows, n) => {
      const ctx = await gpuFor(backend);
      const x = randn(rows * n, rows * 7 + n, 3);
      const bias = randn(n, n + 1);
      for (const mode of ['none', 'bias', 'inplace'] as const) {
        const tx = ctx.tensor(x, [rows, n], 'f32');
        const tb = ctx.tensor(bias, [n], 'f32');
        const ty = mode === 'inplace' ? tx : ctx.tensor(new Float32Array(rows * n), [rows, n], 'f32');
        const rec = ctx.recorder();
        await act(rec, tx, ty, { act: a, variant, ...(mode !== 'none' ? { bias: tb } : {}) });
        const got = await readAndFree(ctx, rec, ty, mode === 'inplace' ? [tx, tb] : [tx, tb, ty]);
        assertClose(got, actRef(a, x, n, mode !== 'none' ? bias : undefined), TOL_F32, `${a} ${mode}`);
      }
    });

    it.each([
      [1, 1],
      [3, 7],
      [5, 130],
      [70, 64],
      [2, 511],
    ])('gated T=%i I=%i', async (T, I) => {
      const ctx = await gpuFor(backend);
      const gu = randn(T * 2 * I, T * 13 + I, 3);
      const tg = ctx.tensor(gu, [T, 2 * I], 'f32');
      const ty = ctx.tensor(new Float32Array(T * I), [T, I], 'f32');
      const rec = ctx.recorder();
      await gatedAct(rec, tg, ty, { act: a, inter: I, variant });
      assertClose(await readAndFree(ctx, rec, ty, [tg, ty]), gatedActRef(a, gu, I), TOL_F32, `gated ${a}`);
    });

    it('stays finite and correct for extreme inputs', async () => {
      const ctx = await gpuFor(backend);
      const x = new Float32Array([-1e4, -200, -100, -88, -20, -1e-30, 0, 1e-30, 20, 88, 100, 200, 1e4, -3.5, 3.5, -0]);
      const tx = ctx.tensor(x, [4, 4], 'f32');
      const rec = ctx.recorder();
      await act(rec, tx, tx, { act: a, variant });
      assertClose(await readAndFree(ctx, rec, tx, [tx]), actRef(a, x, 4), TOL_F32, a);
    });
  });

  it('gelu (erf form) is exact to ~1e-6 over [-8, 8]', async () => {
    const ctx = await gpuFor(backend);
    const x = Float32Array.from({ length: 4001 }, (_, i) => -8 + i * 0.004);
    const tx = ctx.tensor(x, [4001], 'f32');
    const rec = ctx.recorder();
    await act(rec, tx, tx, { act: 'gelu', variant });
    assertClose(await readAndFree(ctx, rec, tx, [tx]), actRef('gelu', x, 4001), { atol: 1e-6, rtol: 1e-6, nmse: 1e-12 });
  });

  it('records one dispatch; rejects bad shapes and gu aliasing', async () => {
    const ctx = await gpuFor(backend);
    const gu = ctx.tensor(new Float32Array(16), [2, 8], 'f32');
    const rec = ctx.recorder();
    await gatedAct(rec, gu, ctx.scratch([2, 4]), { act: 'silu', inter: 4, variant });
    expect(rec.dispatches).toBe(1);
    rec.submit();
    await expect(gatedAct(ctx.recorder(), gu, ctx.scratch([2, 3]), { act: 'silu', inter: 3, variant })).rejects.toThrow(/shapes/);
    await expect(gatedAct(ctx.recorder(), gu, gu, { act: 'silu', inter: 8, variant })).rejects.toThrow();
    gu.buffer.destroy();
  });
});
