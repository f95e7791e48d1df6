/**
 * scatter_rows.ts against scatter_rows.ref.ts on every backend × variant: awkward
 * widths (D % 4 != 0 takes the scalar cpu path), out-of-range indices (skipped),
 * rows that are not scattered keep their values, and more than 65535 rows (the gpu
 * variant's folded 2-D grid).
 */
import { describe, expect, it } from 'vitest';
import { scatterRows } from '../../core/ops/scatter_rows.ts';
import { scatterRowsRef } from '../../core/ops/scatter_rows.ref.ts';
import { assertClose, BACKEND_VARIANTS, gpuFor, randn, rng, TOL_F32 } from '../helpers/gpu.ts';

// [T, D, R]
const SHAPES: [number, number, number][] = [
  [1, 1, 1],
  [3, 7, 2],
  [70, 130, 5],
  [17, 511, 16],
  [40, 32, 33],
  [4097, 3, 9],
  [70000, 1, 70000],
];

/** R distinct indices in [0, T), shuffled (a permutation prefix). */
function distinct(T: number, R: number, seed: number): Uint32Array {
  const r = rng(seed);
  const all = Uint32Array.from({ length: T }, (_, i) => i);
  for (let i = T - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [all[i], all[j]] = [all[j]!, all[i]!];
  }
  return all.slice(0, R);
}

describe.each(BACKEND_VARIANTS)('scatter_rows on %s, %s variant', (backend, variant) => {
  it.each(SHAPES)('T=%i D=%i R=%i matches the reference', async (T, D, R) => {
    const ctx = await gpuFor(backend);
    const x = randn(T * D, T + D);
    const rows = randn(R * D, R + 3, 2);
    const at = distinct(T, R, T * 7 + R);
    const tx = ctx.tensor(x, [T, D], 'f32');
    const ta = ctx.tensor(at, [R], 'u32');
    const tr = ctx.tensor(rows, [R, D], 'f32');
    const rec = ctx.recorder();
    await scatterRows(rec, tr, ta, tx, { variant });
    const out = rec.readback(tx);
    rec.submit();
    assertClose(new Float32Array(await out), scatterRowsRef(x, rows, at, D), TOL_F32);
    for (const t of [tx, ta, tr]) t.buffer.destroy();
  });

  it('skips indices >= T, leaves other rows alone, records one dispatch', async () => {
    const ctx = await gpuFor(backend);
    const x = randn(12, 3);
    const rows = randn(8, 4, 5);
    const at = new Uint32Array([2, 99]);
    const tx = ctx.tensor(x, [3, 4], 'f32');
    const ta = ctx.tensor(at, [2], 'u32');
    const tr = ctx.tensor(rows, [2, 4], 'f32');
    const rec = ctx.recorder();
    await scatterRows(rec, tr, ta, tx, { variant });
    expect(rec.dispatches).toBe(1);
    const out = rec.readback(tx);
    rec.submit();
    const got = new Float32Array(await out);
    assertClose(got, scatterRowsRef(x, rows, at, 4), TOL_F32);
    expect(Array.from(got.subarray(0, 8))).toEqual(Array.from(x.subarray(0, 8)));
    await expect(scatterRows(ctx.recorder(), tx, ta, tx, { variant })).rejects.toThrow();
    for (const t of [tx, ta, tr]) t.buffer.destroy();
  });
});
