/**
 * kv_write vs kv_write.ref: tokens scattered to random distinct slots of a
 * cache pre-filled with noise (untouched slots must survive), odd token counts,
 * GQA ratios 1..8, padded rows and a NO_SLOT padding token.
 */
import { describe, expect, it } from 'vitest';
import { kvWrite, NO_SLOT } from '../../core/ops/kv_write.ts';
import { kvWriteRef } from '../../core/ops/kv_write.ref.ts';
import { assertClose, BACKEND_VARIANTS, gpuFor, randn, rng } from '../helpers/gpu.ts';

// [T, nH, nKv, hd, row padding (elements), skip one token]
const CASES: [number, number, number, number, number, boolean][] = [
  [1, 1, 1, 8, 0, false],
  [7, 4, 2, 16, 0, true],
  [13, 8, 1, 64, 8, false],
  [5, 8, 8, 128, 0, true],
  [3, 4, 1, 256, 4, false],
];

describe.each(BACKEND_VARIANTS)('kv_write on %s, %s variant', (backend, variant) => {
  it.each(CASES)('T=%i nH=%i nKv=%i hd=%i pad=%i skip=%s', async (T, nH, nKv, hd, pad, skip) => {
    const ctx = await gpuFor(backend);
    const rowStride = (nH + 2 * nKv) * hd + pad;
    const numSlots = 2 * T + 5;
    const seed = T * 977 + hd;
    const qkv = randn(T * rowStride, seed);
    const k0 = randn(numSlots * nKv * hd, seed + 1);
    const v0 = randn(numSlots * nKv * hd, seed + 2);
    // Distinct random slots (a shuffled prefix of 0..numSlots-1).
    const r = rng(seed + 3);
    const perm = Array.from({ length: numSlots }, (_, i) => i);
    for (let i = numSlots - 1; i > 0; i--) {
      const j = Math.floor(r() * (i + 1));
      [perm[i], perm[j]] = [perm[j]!, perm[i]!];
    }
    const slots = Uint32Array.from(perm.slice(0, T));
    if (skip) slots[T >> 1] = NO_SLOT;
    const opts = { tokens: T, qHeads: nH, kvHeads: nKv, headDim: hd, rowStride };

    const tq = ctx.tensor(qkv, [T, rowStride], 'f32');
    const ts = ctx.tensor(slots, [T], 'u32');
    const tk = ctx.tensor(k0, [numSlots, nKv, hd], 'f32');
    const tv = ctx.tensor(v0, [numSlots, nKv, hd], 'f32');
    const rec = ctx.recorder();
    await kvWrite(rec, tq, ts, tk, tv, { ...opts, variant });
    expect(rec.dispatches).toBe(1);
    const gk = rec.readback(tk);
    const gv = rec.readback(tv);
    rec.submit();
    const wk = new Float32Array(k0);
    const wv = new Float32Array(v0);
    kvWriteRef(qkv, slots, wk, wv, opts);
    // A copy must be bit-exact: tolerance zero.
    const exact = { atol: 0, rtol: 0, nmse: 0 };
    assertClose(new Float32Array(await gk), wk, exact, 'cacheK');
    assertClose(new Float32Array(await gv), wv, exact, 'cacheV');
    for (const t of [tq, ts, tk, tv]) t.buffer.destroy();
  });
});
