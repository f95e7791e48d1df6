/**
 * gather_rows.ts against gather_rows.ref.ts on every backend × variant: awkward
 * widths (D % 4 != 0 takes the scalar cpu path), repeated and out-of-range row
 * indices, and more than 65535 rows (the gpu variant's folded 2-D grid).
 */
import { describe, expect, it } from 'vitest';
import { gatherRows } from '../../core/ops/gather_rows.ts';
import { gatherRowsRef } from '../../core/ops/gather_rows.ref.ts';
import { assertClose, BACKEND_VARIANTS, gpuFor, randn, rng, TOL_F32 } from '../helpers/gpu.ts';

// [T, D, R]
const SHAPES: [number, number, number][] = [
  [1, 1, 1],
  [3, 7, 2],
  [70, 130, 5],
  [17, 511, 17],
  [4097, 3, 9],
  [10, 64, 70],
  [70000, 1, 70000],
];

describe.each(BACKEND_VARIANTS)('gather_rows on %s, %s variant', (backend, variant) => {
  it.each(SHAPES)('T=%i D=%i R=%i matches the reference', async (T, D, R) => {
    const ctx = await gpuFor(backend);
    const x = randn(T * D, T + D);
    const r = rng(R + 5);
    const rows = Uint32Array.from({ length: R }, (_, i) => (R === T ? T - 1 - i : Math.floor(r() * T)));
    rows[R - 1] = T - 1; // the last row of a batch is always gathered
    const tx = ctx.tensor(x, [T, D], 'f32');
    const tr = ctx.tensor(rows, [R], 'u32');
    const ty = ctx.tensor(new Float32Array(R * D), [R, D], 'f32');
    const rec = ctx.recorder();
    await gatherRows(rec, tx, tr, ty, { variant });
    const out = rec.readback(ty);
    rec.submit();
    assertClose(new Float32Array(await out), gatherRowsRef(x, rows, D), TOL_F32);
    for (const t of [tx, tr, ty]) t.buffer.destroy();
  });

  it('gives zero rows for indices >= T and records one dispatch', async () => {
    const ctx = await gpuFor(backend);
    const x = randn(12, 3);
    const rows = new Uint32Array([2, 3, 99, 0]);
    const tx = ctx.tensor(x, [3, 4], 'f32');
    const tr = ctx.tensor(rows, [4], 'u32');
    const ty = ctx.tensor(new Float32Array(16).fill(7), [4, 4], 'f32');
    const rec = ctx.recorder();
    await gatherRows(rec, tx, tr, ty, { variant });
    expect(rec.dispatches).toBe(1);
    const out = rec.readback(ty);
    rec.submit();
    assertClose(new Float32Array(await out), gatherRowsRef(x, rows, 4), TOL_F32);
    await expect(gatherRows(ctx.recorder(), tx, tr, tx, { variant })).rejects.toThrow();
    for (const t of [tx, tr, ty]) t.buffer.destroy();
  });
});
