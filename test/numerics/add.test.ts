/**
 * add.ts against add.ref.ts on every backend × variant: awkward shapes (1, odd,
 * 4097 rows; n % 4 != 0 exercises the scalar cpu path), and in-place
 * residual adds where `out` is the very tensor `a` or `b`.
 */
import { describe, expect, it } from 'vitest';
import { add } from '../../core/ops/add.ts';
import { addRef } from '../../core/ops/add.ref.ts';
import { assertClose, BACKEND_VARIANTS, gpuFor, randn, TOL_F32 } from '../helpers/gpu.ts';

const SHAPES: [number, number][] = [
  [1, 1],
  [1, 3],
  [3, 7],
  [5, 130],
  [2, 511],
  [4097, 3],
  [4097, 4],
  [70, 64],
];

describe.each(BACKEND_VARIANTS)('add on %s, %s variant', (backend, variant) => {
  it.each(SHAPES)('rows=%i dim=%i matches the reference', async (rows, dim) => {
    const ctx = await gpuFor(backend);
    const a = randn(rows * dim, rows * 31 + dim);
    const b = randn(rows * dim, rows * 17 + dim + 1);
    const ta = ctx.tensor(a, [rows, dim], 'f32');
    const tb = ctx.tensor(b, [rows, dim], 'f32');
    const ty = ctx.scratch([rows, dim]);
    const rec = ctx.recorder();
    await add(rec, ta, tb, ty, { variant });
    const out = rec.readback(ty);
    rec.submit();
    assertClose(new Float32Array(await out), addRef(a, b), TOL_F32);
    ctx.free(ty);
    ta.buffer.destroy();
    tb.buffer.destroy();
  });

  it.each([
    ['a', 1, 1],
    ['a', 3, 7],
    ['b', 5, 130],
    ['a', 4097, 4],
    ['b', 7, 511],
  ] as const)('in place: out is %s, rows=%i dim=%i', async (which, rows, dim) => {
    const ctx = await gpuFor(backend);
    const a = randn(rows * dim, rows + dim + 3);
    const b = randn(rows * dim, rows + dim + 4);
    const ta = ctx.tensor(a, [rows, dim], 'f32');
    const tb = ctx.tensor(b, [rows, dim], 'f32');
    const rec = ctx.recorder();
    const out = which === 'a' ? ta : tb;
    await add(rec, ta, tb, out, { variant });
    const got = rec.readback(out);
    rec.submit();
    assertClose(new Float32Array(await got), addRef(a, b), TOL_F32);
    ctx.gpu.check();
    ta.buffer.destroy();
    tb.buffer.destroy();
  });

  it('records one dispatch and rejects mismatched shapes', async () => {
    const ctx = await gpuFor(backend);
    const t = ctx.tensor(new Float32Array(8), [2, 4], 'f32');
    const rec = ctx.recorder();
    await add(rec, t, t, ctx.scratch([2, 4]), { variant });
    expect(rec.dispatches).toBe(1);
    rec.submit();
    await expect(add(ctx.recorder(), t, ctx.scratch([3]), ctx.scratch([2, 4]), { variant })).rejects.toThrow(/shapes/);
    t.buffer.destroy();
  });
});
