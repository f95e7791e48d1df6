/**
 * rope vs rope.ref on both styles, partial rotary, linear / llama3 scaling,
 * Qwen3 q/k norm and padded row strides; positions go up to ~20k so the
 * in-shader cos/sin see large angles. Also pins ropeInvFreq's llama3 values
 * against HF transformers' formula (numbers computed with numpy in f64).
 */
import { describe, expect, it } from 'vitest';
import { rope, ropeInvFreq, type RopeScaling } from '../../core/ops/rope.ts';
import { ropeRef } from '../../core/ops/rope.ref.ts';
import { assertClose, BACKEND_VARIANTS, gpuFor, randn, rng, TOL_F32 } from '../helpers/gpu.ts';

interface Case {
  name: string;
  T: number;
  nH: number;
  nKv: number;
  hd: number;
  rot?: number;
  pad?: number; // extra elements per row beyond (nH + 2*nKv) * hd
  style: 'half' | 'interleaved';
  theta: number;
  scaling?: RopeScaling;
  qkNorm?: boolean;
  maxPos: number;
}

const LLAMA3: RopeScaling = { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 };

const CASES: Case[] = [
  { name: 'single token, hd 8', T: 1, nH: 1, nKv: 1, hd: 8, style: 'half', theta: 10000, maxPos: 7 },
  { name: 'interleaved, partial rotary', T: 5, nH: 4, nKv: 2, hd: 16, rot: 8, style: 'interleaved', theta: 10000, maxPos: 300 },
  { name: 'half, partial rotary, padded rows', T: 3, nH: 3, nKv: 1, hd: 64, rot: 32, pad: 12, style: 'half', theta: 10000, maxPos: 2000 },
  { name: 'llama3 scaling', T: 7, nH: 8, nKv: 2, hd: 128, style: 'half', theta: 500000, scaling: LLAMA3, maxPos: 20000 },
  { name: 'linear scaling, interleaved', T: 9, nH: 6, nKv: 3, hd: 64, style: 'interleaved', theta: 10000, scaling: { type: 'linear', factor: 4 }, maxPos: 5000 },
  { name: 'qwen3 qk-norm', T: 3, nH: 4, nKv: 2, hd: 128, style: 'half', theta: 1000000, qkNorm: true, maxPos: 4000 },
  { name: 'qk-norm + partial rotary, hd 256', T: 2, nH: 2, nKv: 1, hd: 256, rot: 64, style: 'interleaved', theta: 10000, qkNorm: true, maxPos: 100 },
];

describe('ropeInvFreq', () => {
  it('matches HF _compute_llama3_parameters (Llama 3.1, hd 128)', () => {
    const f = ropeInvFreq({ headDim: 128, theta: 500000, scaling: LLAMA3 });
    expect(f.length).toBe(64);
    // [index, value] from transformers' formula evaluated with numpy in f64, rounded to f32.
    const want: [number, number][] = [
      [0, 1.0],
      [20, 0.016560440883040428],
      [29, 0.0021665708627551794], // medium band (smoothed)
      [31, 0.0008567514014430344],
      [34, 0.00017850780568551272],
      [46, 1.0017868589784484e-5], // low band: divided by factor
      [63, 3.068925877869333e-7],
    ];
    for (const [i, v] of want) expect(f[i]).toBe(Math.fround(v));
  });

  it('linear scaling divides, partial rotary uses rotaryDim', () => {
    const a = ropeInvFreq({ headDim: 64, rotaryDim: 32, theta: 10000 });
    const b = ropeInvFreq({ headDim: 64, rotaryDim: 32, theta: 10000, scaling: { type: 'linear', factor: 4 } });
    expect(a.length).toBe(16);
    expect(a[1]).toBe(Math.fround(10000 ** (-2 / 32)));
    for (let i = 0; i < 16; i++) expect(b[i]).toBe(Math.fround(10000 ** (-(2 * i) / 32) / 4));
  });
});

describe.each(BACKEND_VARIANTS)('rope on %s, %s variant', (backend, variant) => {
  it.each(CASES)('$name', async (c) => {
    const ctx = await gpuFor(backend);
    const rowStride = (c.nH + 2 * c.nKv) * c.hd + (c.pad ?? 0);
    const seed = c.T * 131 + c.hd;
    const x = randn(c.T * rowStride, seed);
    const r = rng(seed + 1);
    const pos = Uint32Array.from({ length: c.T }, () => Math.floor(r() * (c.maxPos + 1)));
    const qw = randn(c.hd, seed + 2);
    const kw = randn(c.hd, seed + 3);
    const base = { tokens: c.T, qHeads: c.nH, kHeads: c.nKv, headDim: c.hd, rowStride, theta: c.theta, style: c.style };
    const extra = { ...(c.rot ? { rotaryDim: c.rot } : {}), ...(c.scaling ? { scaling: c.scaling } : {}) };

    const tx = ctx.tensor(x, [c.T, rowStride], 'f32');
    const tp = ctx.tensor(pos, [c.T], 'u32');
    const tq = ctx.tensor(qw, [c.hd], 'f32');
    const tk = ctx.tensor(kw, [c.hd], 'f32');
    const rec = ctx.recorder();
    await rope(rec, tx, tp, { ...base, ...extra, ...(c.qkNorm ? { qkNorm: { q: tq, k: tk, eps: 1e-6 } } : {}), variant });
    expect(rec.dispatches).toBe(1);
    const out = rec.readback(tx);
    rec.submit();
    const want = ropeRef(x, pos, { ...base, ...extra, ...(c.qkNorm ? { qkNorm: { q: qw, k: kw, eps: 1e-6 } } : {}) });
    // Values are O(1) (O(|w|) with qk-norm); f32 cos/sin of angles up to ~2e4 rad stay within TOL_F32.
    assertClose(new Float32Array(await out), want, TOL_F32);
    for (const t of [tx, tp, tq, tk]) t.buffer.destroy();
  });
});
