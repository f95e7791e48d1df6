/**
 * rope_kv_write (one dispatch) vs its reference, the composition ropeRef then
 * kvWriteRef, with f32, f16 and q8 caches: both rope styles, partial rotary,
 * llama3 scaling, Qwen3 q/k norm, padded rows, GQA, a NO_SLOT token, caches
 * pre-filled with noise (untouched rows must survive).
 * qkv (q and k rotated in place, v untouched) within TOL_F32 of ropeRef, as
 * rope.test.ts. f32 caches within TOL_F32 (k is the GPU's rotation). q8 caches:
 * k scales within 1e-5 relative (absmax of a GPU-rotated row), v scales
 * bit-exact, codes within 1 and rarely off (see test/helpers/kv_q8.ts). f16
 * caches: v within one f16 step of the reference's rounding, k within that plus
 * TOL_F32 of the GPU's rotation.
 */
import { describe, expect, it } from 'vitest';
import { kvRowWords, NO_SLOT, type KvDtype } from '../../core/ops/kv_write.ts';
import { ropeKvWrite } from '../../core/ops/rope_kv_write.ts';
import { packRowF16, unpackKvF16Ref } from '../../core/ops/kv_write.ref.ts';
import { ropeKvWriteRef } from '../../core/ops/rope_kv_write.ref.ts';
import type { RopeScaling } from '../../core/ops/rope.ts';
import { assertClose, BACKEND_VARIANTS, gpuFor, randn, rng, TOL_F32 } from '../helpers/gpu.ts';
import { assertQ8Cache } from '../helpers/kv_q8.ts';

interface Case {
  name: string;
  T: number;
  nH: number;
  nKv: number;
  hd: number;
  rot?: number;
  pad?: number;
  style: 'half' | 'interleaved';
  theta: number;
  scaling?: RopeScaling;
  qkNorm?: boolean;
  maxPos: number;
  skip?: boolean;
}

const LLAMA3: RopeScaling = { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 };

const CASES: Case[] = [
  { name: 'single token, hd 8', T: 1, nH: 1, nKv: 1, hd: 8, style: 'half', theta: 10000, maxPos: 7 },
  { name: 'stories260K shape, skip one', T: 5, nH: 8, nKv: 4, hd: 8, style: 'half', theta: 10000, maxPos: 500, skip: true },
  { name: 'interleaved, partial rotary', T: 5, nH: 4, nKv: 2, hd: 16, rot: 8, style: 'interleaved', theta: 10000, maxPos: 300 },
  { name: 'half, partial rotary, padded rows', T: 3, nH: 3, nKv: 1, hd: 64, rot: 32, pad: 12, style: 'half', theta: 10000, maxPos: 2000 },
  { name: 'llama3 scaling, GQA 4', T: 7, nH: 8, nKv: 2, hd: 128, style: 'half', theta: 500000, scaling: LLAMA3, maxPos: 20000, skip: true },
  { name: 'qwen3 qk-norm', T: 3, nH: 4, nKv: 2, hd: 128, style: 'half', theta: 1000000, qkNorm: true, maxPos: 4000 },
  { name: 'qk-norm + partial rotary, hd 256', T: 2, nH: 2, nKv: 1, hd: 256, rot: 64, style: 'interleaved', theta: 10000, qkNorm: true, maxPos: 100 },
];

describe.each(BACKEND_VARIANTS)('rope_kv_write on %s, %s variant', (backend, variant) => {
  it.each(CASES.flatMap((c) => (['f32', 'f16', 'q8'] as KvDtype[]).map((kvDtype) => ({ ...c, kvDtype }))))('$name, $kvDtype cache', async (c) => {
    const ctx = await gpuFor(backend);
    const rowStride = (c.nH + 2 * c.nKv) * c.hd + (c.pad ?? 0);
    const seed = c.T * 131 + c.hd + c.nH;
    const x = randn(c.T * rowStride, seed);
    const r = rng(seed + 1);
    const pos = Uint32Array.from({ length: c.T }, () => Math.floor(r() * (c.maxPos + 1)));
    const numSlots = 2 * c.T + 3;
    const perm = Array.from({ length: numSlots }, (_, i) => i);
    for (let i = numSlots - 1; i > 0; i--) {
      const j = Math.floor(r() * (i + 1));
      [perm[i], perm[j]] = [perm[j]!, perm[i]!];
    }
    const slots = Uint32Array.from(perm.slice(0, c.T));
    if (c.skip) slots[c.T >> 1] = NO_SLOT;
    const q8 = c.kvDtype === 'q8';
    const words = numSlots * c.nKv * kvRowWords(c.hd, c.kvDtype);
    const f16 = c.kvDtype === 'f16';
    const packed = (s: number) => {
      const w = new Uint32Array(words);
      packRowF16(randn(2 * words, s), w, 0);
      return w;
    };
    const noise = (s: number) => (q8 ? Uint32Array.from(randn(words, s), (v) => (v * 2 ** 31) >>> 0) : f16 ? packed(s) : randn(words, s));
    const k0 = noise(seed + 4);
    const v0 = noise(seed + 5);
    const qw = randn(c.hd, seed + 2);
    const kw = randn(c.hd, seed + 3);
    const base = { tokens: c.T, qHeads: c.nH, kvHeads: c.nKv, headDim: c.hd, rowStride, theta: c.theta, style: c.style, kvDtype: c.kvDtype };
    const extra = { ...(c.rot ? { rotaryDim: c.rot } : {}), ...(c.scaling ? { scaling: c.scaling } : {}) };

    const tx = ctx.tensor(x, [c.T, rowStride], 'f32');
    const tp = ctx.tensor(pos, [c.T], 'u32');
    const ts = ctx.tensor(slots, [c.T], 'u32');
    const tk = ctx.tensor(k0, [words], q8 || f16 ? 'u32' : 'f32');
    const tv = ctx.tensor(v0, [words], q8 || f16 ? 'u32' : 'f32');
    const tqw = ctx.tensor(qw, [c.hd], 'f32');
    const tkw = ctx.tensor(kw, [c.hd], 'f32');
    const rec = ctx.recorder();
    await ropeKvWrite(rec, tx, tp, ts, tk, tv, { ...base, ...extra, ...(c.qkNorm ? { qkNorm: { q: tqw, k: tkw, eps: 1e-6 } } : {}), variant });
    expect(rec.dispatches).toBe(1);
    const [gx, gk, gv] = [rec.readback(tx), rec.readback(tk), rec.readback(tv)];
    rec.submit();

    const wk = k0.slice();
    const wv = v0.slice();
    const want = ropeKvWriteRef(x, pos, slots, wk, wv, { ...base, ...extra, ...(c.qkNorm ? { qkNorm: { q: qw, k: kw, eps: 1e-6 } } : {}) });
    assertClose(new Float32Array(await gx), want, TOL_F32, 'qkv');
    if (q8) {
      assertQ8Cache(new Uint32Array(await gk), wk as Uint32Array, c.hd, 'cacheK', 1e-5);
      assertQ8Cache(new Uint32Array(await gv), wv as Uint32Array, c.hd, 'cacheV');
    } else if (f16) {
      // One f16 step is 2^-10 relative at most (rounding either way).
      assertClose(unpackKvF16Ref(new Uint32Array(await gk)), unpackKvF16Ref(wk as Uint32Array), { atol: 1e-4, rtol: 2 ** -10 + 1e-4, nmse: 1e-6 }, 'cacheK');
      assertClose(unpackKvF16Ref(new Uint32Array(await gv)), unpackKvF16Ref(wv as Uint32Array), { atol: 2 ** -24, rtol: 2 ** -10, nmse: 1e-6 }, 'cacheV');
    } else {
      assertClose(new Float32Array(await gk), wk as Float32Array, TOL_F32, 'cacheK');
      assertClose(new Float32Array(await gv), wv as Float32Array, { atol: 0, rtol: 0, nmse: 0 }, 'cacheV');
    }
    for (const t of [tx, tp, ts, tk, tv, tqw, tkw]) t.buffer.destroy();
  });
});
