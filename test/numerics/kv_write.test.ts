/**
 * kv_write vs kv_write.ref, f32, f16 and q8 caches: tokens scattered to random
 * distinct slots of a cache pre-filled with noise (untouched slots must
 * survive), odd token counts, GQA ratios 1..8, padded rows and a NO_SLOT
 * padding token. f32 is a copy (bit-exact). q8: scales bit-exact (one
 * correctly rounded f32 product) and codes exact except where the GPU's
 * x * (1/scale) and the reference's x / scale round to different sides of a
 * .5 boundary (|diff| 1, rare: checked to be under 0.1% of codes). f16: every
 * half within one f16 step of the reference's round-to-nearest-even (WGSL leaves
 * pack2x16float's rounding direction to the implementation), values past ±65504
 * clamped, and untouched words unchanged.
 */
import { describe, expect, it } from 'vitest';
import { kvRowWords, kvWrite, NO_SLOT, type KvDtype } from '../../core/ops/kv_write.ts';
import { dequantKvRef, kvWriteRef, unpackKvF16Ref } from '../../core/ops/kv_write.ref.ts';
import { assertClose, BACKEND_VARIANTS, gpuFor, randn, rng } from '../helpers/gpu.ts';
import { assertQ8Cache } from '../helpers/kv_q8.ts';

// [T, nH, nKv, hd, row padding (elements), skip one token]
const CASES: [number, number, number, number, number, boolean][] = [
  [1, 1, 1, 8, 0, false],
  [7, 4, 2, 16, 0, true],
  [13, 8, 1, 64, 8, false],
  [5, 8, 8, 128, 0, true],
  [3, 4, 1, 256, 4, false],
];

describe.each(BACKEND_VARIANTS)('kv_write on %s, %s variant', (backend, variant) => {
  it.each(CASES.flatMap((c) => (['f32', 'f16', 'q8'] as KvDtype[]).map((d) => [...c, d] as const)))(
    'T=%i nH=%i nKv=%i hd=%i pad=%i skip=%s %s',
    async (T, nH, nKv, hd, pad, skip, kvDtype) => {
      const ctx = await gpuFor(backend);
      const rowStride = (nH + 2 * nKv) * hd + pad;
      const numSlots = 2 * T + 5;
      const seed = T * 977 + hd;
      const qkv = randn(T * rowStride, seed);
      if (kvDtype === 'q8') qkv.fill(0, (nH + nKv) * hd, (nH + nKv + 1) * hd); // an all-zero v head: scale 0, codes 0
      if (kvDtype === 'f16') {
        qkv[nH * hd] = 1e6; // past f16's range: clamped to 65504
        qkv[nH * hd + 1] = -7e4;
        qkv[nH * hd + 2] = 3e-6; // an f16 subnormal
      }
      const words = numSlots * nKv * kvRowWords(hd, kvDtype);
      const noise = (s: number) => (kvDtype !== 'f32' ? Uint32Array.from(randn(words, s), (x) => (x * 2 ** 31) >>> 0) : randn(words, s));
      const k0 = noise(seed + 1);
      const v0 = noise(seed + 2);
      // Distinct random slots (a shuffled prefix of 0..numSlots-1).
      const r = rng(seed + 3);
      const perm = Array.from({ length: numSlots }, (_, i) => i);
      for (let i = numSlots - 1; i > 0; i--) {
        const j = Math.floor(r() * (i + 1));
        [perm[i], perm[j]] = [perm[j]!, perm[i]!];
      }
      const slots = Uint32Array.from(perm.slice(0, T));
      if (skip) slots[T >> 1] = NO_SLOT;
      const opts = { tokens: T, qHeads: nH, kvHeads: nKv, headDim: hd, rowStride, kvDtype };

      const cdt = kvDtype === 'f32' ? 'f32' : 'u32';
      const tq = ctx.tensor(qkv, [T, rowStride], 'f32');
      const ts = ctx.tensor(slots, [T], 'u32');
      const tk = ctx.tensor(k0, [words], cdt);
      const tv = ctx.tensor(v0, [words], cdt);
      const rec = ctx.recorder();
      await kvWrite(rec, tq, ts, tk, tv, { ...opts, variant });
      expect(rec.dispatches).toBe(1);
      const gk = rec.readback(tk);
      const gv = rec.readback(tv);
      rec.submit();
      const wk = k0.slice();
      const wv = v0.slice();
      kvWriteRef(qkv, slots, wk, wv, opts);
      if (kvDtype === 'q8') {
        const [k, v] = [new Uint32Array(await gk), new Uint32Array(await gv)];
        assertQ8Cache(k, wk as Uint32Array, hd, 'cacheK');
        assertQ8Cache(v, wv as Uint32Array, hd, 'cacheV');
        // Round trip: every written element within half a step (scale / 2) of its source.
        const dk = dequantKvRef(k, hd);
        for (let t = 0; t < T; t++) {
          if (slots[t] === NO_SLOT) continue;
          const src = qkv.subarray(t * rowStride + nH * hd, t * rowStride + (nH + nKv) * hd);
          const got = dk.subarray(slots[t]! * nKv * hd, (slots[t]! + 1) * nKv * hd);
          for (let h = 0; h < nKv; h++) {
            const amax = Math.max(...src.subarray(h * hd, (h + 1) * hd).map(Math.abs));
            assertClose(got.subarray(h * hd, (h + 1) * hd), src.subarray(h * hd, (h + 1) * hd), { atol: (amax / 127) * 0.5001, rtol: 0, nmse: 1e-3 }, 'k round trip');
          }
        }
      } else if (kvDtype === 'f16') {
        for (const [got, want, what] of [[new Uint32Array(await gk), wk as Uint32Array, 'cacheK'], [new Uint32Array(await gv), wv as Uint32Array, 'cacheV']] as const) {
          const g = unpackKvF16Ref(got);
          const w = unpackKvF16Ref(want);
          for (let i = 0; i < w.length; i++) {
            // One f16 step at w's magnitude (2^-24 for subnormals); NaN noise in untouched words compares by bits.
            const step = 2 ** (Math.max(-14, Math.floor(Math.log2(Math.abs(w[i]!) || 2 ** -14))) - 10);
            const same = got[i >> 1] === want[i >> 1] || Math.abs(g[i]! - w[i]!) <= step;
            if (!same) throw new Error(`${what}: half ${i} is ${g[i]}, expected ${w[i]}; got ${Array.from(g.subarray(i - (i % hd), i - (i % hd) + hd))} want ${Array.from(w.subarray(i - (i % hd), i - (i % hd) + hd))}`);
          }
        }
        const k16 = unpackKvF16Ref(new Uint32Array(await gk));
        const s0 = slots[0] === NO_SLOT ? null : slots[0]!;
        if (s0 !== null) expect([k16[s0 * nKv * hd], k16[s0 * nKv * hd + 1]]).toEqual([65504, -65504]);
      } else {
        // A copy must be bit-exact: tolerance zero.
        const exact = { atol: 0, rtol: 0, nmse: 0 };
        assertClose(new Float32Array(await gk), wk as Float32Array, exact, 'cacheK');
        assertClose(new Float32Array(await gv), wv as Float32Array, exact, 'cacheV');
      }
      for (const t of [tq, ts, tk, tv]) t.buffer.destroy();
    },
  );
});
