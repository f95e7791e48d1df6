/**
 * The sgemv decode kernel with rope_kv_write as its epilogue (MatmulOptions.rope on the gpu
 * variant: one dispatch for the qkv projection, the rotation of q and k and the KV store)
 * against the composition it replaces, on the CPU references: rmsNormRef (with the fused
 * prenorm) → matmulRef (+ bias) → ropeKvWriteRef. Random shapes: several heads of 8..128
 * elements, GQA, M from 1 to 16 (every MR), f32 / f16 / Q8_0 / Q4_K weights, f32 and f16
 * caches pre-filled with noise (rows not written must survive), a padding token (NO_SLOT).
 * y must hold what ropeKvWrite leaves in qkv (q and k rotated, v as computed).
 * Needs `subgroups` (Dawn's SwiftShader reports it); a backend without it skips.
 */
import { describe, expect, it } from 'vitest';
import type { DType } from '../../core/gpu/tensor.ts';
import type { MatmulKernels } from '../../core/ops/kernel_select.ts';
import { kvRowWords, NO_SLOT } from '../../core/ops/kv_write.ts';
import { packRowF16, unpackKvF16Ref } from '../../core/ops/kv_write.ref.ts';
import { matmul, sgemvRopeProblem } from '../../core/ops/matmul.ts';
import { matmulRef } from '../../core/ops/matmul.ref.ts';
import { rmsNormRef } from '../../core/ops/rms_norm.ref.ts';
import { invFreqTensor } from '../../core/ops/rope.ts';
import { ropeKvWriteRef } from '../../core/ops/rope_kv_write.ref.ts';
import { randomWeight } from '../helpers/random_weight.ts';
import type { Tensor } from '../../core/gpu/tensor.ts';
import { assertClose, gpuFor, randn, rng, TEST_BACKENDS, TOL_F32 } from '../helpers/gpu.ts';

const SGEMV: MatmulKernels = { decode: 'sgemv', prefill: 'tile64' };

interface Case {
  wdt: DType;
  M: number;
  K: number;
  nH: number;
  nKv: number;
  hd: number;
  kv: 'f32' | 'f16';
  prenorm: boolean;
  bias: boolean;
  theta: number;
}

const CASES: Case[] = [
  { wdt: 'f32', M: 1, K: 64, nH: 2, nKv: 1, hd: 8, kv: 'f32', prenorm: true, bias: false, theta: 10000 },
  { wdt: 'f16', M: 3, K: 96, nH: 4, nKv: 2, hd: 16, kv: 'f16', prenorm: true, bias: true, theta: 10000 },
  { wdt: 'f16', M: 5, K: 128, nH: 3, nKv: 1, hd: 64, kv: 'f32', prenorm: false, bias: true, theta: 500000 },
  { wdt: 'q8_0', M: 16, K: 64, nH: 8, nKv: 2, hd: 32, kv: 'f16', prenorm: true, bias: false, theta: 10000 },
  { wdt: 'q4_k', M: 2, K: 256, nH: 2, nKv: 1, hd: 128, kv: 'f32', prenorm: true, bias: true, theta: 1000000 },
  { wdt: 'f32', M: 9, K: 36, nH: 1, nKv: 1, hd: 24, kv: 'f16', prenorm: false, bias: false, theta: 10000 },
];

describe.each(TEST_BACKENDS)('sgemv with the rope + KV store epilogue on %s', (backend) => {
  it.each(CASES)('$wdt M=$M K=$K heads $nH/$nKv x $hd, $kv cache, prenorm=$prenorm bias=$bias', async (c) => {
    const ctx = await gpuFor(backend);
    if (!ctx.gpu.caps.subgroups) return; // this backend cannot run sgemv; SwiftShader does
    const N = (c.nH + 2 * c.nKv) * c.hd;
    const seed = c.M * 7919 + c.K * 31 + c.hd * 7 + c.nH;
    const r = rng(seed);
    const x = randn(c.M * c.K, seed + 1, 3);
    const wn = randn(c.K, seed + 2);
    const b = randn(N, seed + 3);
    const { tw, wd } = randomWeight(ctx, c.wdt, N, c.K, seed + 4);
    const numSlots = 2 * c.M + 3;
    const perm = Array.from({ length: numSlots }, (_, i) => i);
    for (let i = numSlots - 1; i > 0; i--) {
      const j = Math.floor(r() * (i + 1));
      [perm[i], perm[j]] = [perm[j]!, perm[i]!];
    }
    const slots = Uint32Array.from(perm.slice(0, c.M));
    if (c.M > 2) slots[c.M >> 1] = NO_SLOT;
    const pos = Uint32Array.from({ length: c.M }, () => Math.floor(r() * 5000));
    const words = numSlots * c.nKv * kvRowWords(c.hd, c.kv);
    const noise = (s: number): Float32Array | Uint32Array => {
      if (c.kv === 'f32') return randn(words, s);
      const w = new Uint32Array(words);
      packRowF16(randn(2 * words, s), w, 0);
      return w;
    };
    const k0 = noise(seed + 5);
    const v0 = noise(seed + 6);

    const tx = ctx.tensor(x, [c.M, c.K], 'f32');
    const twn = ctx.tensor(wn, [c.K], 'f32');
    const tb = ctx.tensor(b, [N], 'f32');
    const tp = ctx.tensor(pos, [c.M], 'u32');
    const ts = ctx.tensor(slots, [c.M], 'u32');
    const tk = ctx.tensor(k0, [words], c.kv === 'f32' ? 'f32' : 'u32');
    const tv = ctx.tensor(v0, [words], c.kv === 'f32' ? 'f32' : 'u32');
    const ty = ctx.scratch([c.M, N]);
    const rope = { positions: tp, slots: ts, invFreq: invFreqTensor(ctx, { headDim: c.hd, theta: c.theta }), cacheK: tk, cacheV: tv, kvDtype: c.kv, headDim: c.hd, qHeads: c.nH, kvHeads: c.nKv };
    expect(sgemvRopeProblem(rope, N, c.K)).toBeNull();
    const rec = ctx.recorder();
    await matmul(rec, tx, { w: tw, ...(c.bias ? { bias: tb } : {}) }, ty, { variant: 'gpu', kernels: SGEMV, rope, ...(c.prenorm ? { prenorm: { weight: twn, eps: 1e-5 } } : {}) });
    expect(rec.dispatches).toBe(1);
    const [gy, gk, gv] = [rec.readback(ty), rec.readback(tk), rec.readback(tv)];
    rec.submit();

    const h = c.prenorm ? rmsNormRef(x, wn, c.K, 1e-5) : x;
    const z = matmulRef(h, c.M, c.K, wd, N, c.bias ? b : undefined);
    const wk = k0.slice();
    const wv = v0.slice();
    const want = ropeKvWriteRef(z, pos, slots, wk, wv, { tokens: c.M, qHeads: c.nH, kvHeads: c.nKv, headDim: c.hd, rowStride: N, theta: c.theta, style: 'half', kvDtype: c.kv });
    assertClose(new Float32Array(await gy), want, TOL_F32, 'qkv');
    if (c.kv === 'f32') {
      assertClose(new Float32Array(await gk), wk as Float32Array, TOL_F32, 'cacheK');
      assertClose(new Float32Array(await gv), wv as Float32Array, TOL_F32, 'cacheV');
    } else {
      // One f16 step is 2^-10 relative at most (rounding either way), plus the matmul's own error.
      const tol = { atol: 2e-4, rtol: 2 ** -10 + 1e-4, nmse: 1e-6 };
      assertClose(unpackKvF16Ref(new Uint32Array(await gk)), unpackKvF16Ref(wk as Uint32Array), tol, 'cacheK');
      assertClose(unpackKvF16Ref(new Uint32Array(await gv)), unpackKvF16Ref(wv as Uint32Array), tol, 'cacheV');
    }
    for (const t of [tx, twn, tb, tp, ts, tk, tv, tw]) t.buffer.destroy();
    ctx.free(ty);
  });

  it('refuses the epilogue where it cannot run', async () => {
    const ctx = await gpuFor(backend);
    const hd = 8;
    const N = 3 * hd;
    const tx = ctx.tensor(randn(2 * 32, 1), [2, 32], 'f32');
    const tw = ctx.tensor(randn(N * 32, 2), [N, 32], 'f32');
    const ty = ctx.scratch([2, N]);
    const u32 = (n: number): Tensor => ctx.tensor(new Uint32Array(n), [n], 'u32');
    const cache = ctx.tensor(new Float32Array(64), [64], 'f32');
    const rope = { positions: u32(2), slots: u32(2), invFreq: invFreqTensor(ctx, { headDim: hd, theta: 10000 }), cacheK: cache, cacheV: cache, headDim: hd, qHeads: 1, kvHeads: 1 };
    expect(sgemvRopeProblem({ ...rope, headDim: 12 }, 36, 32)).toMatch(/multiple of 8/);
    expect(sgemvRopeProblem(rope, N + 8, 32)).toMatch(/columns/);
    expect(sgemvRopeProblem({ ...rope, kvDtype: 'f16' }, N, 32)).toMatch(/not f16 rows/);
    const rec = ctx.recorder();
    // Not on the gemv kernel, nor with an accumulated output.
    await expect(matmul(rec, tx, { w: tw }, ty, { variant: 'gpu', kernels: { decode: 'gemv', prefill: 'tile64' }, rope })).rejects.toThrow(/sgemv/);
    await expect(matmul(rec, tx, { w: tw }, ty, { variant: 'gpu', kernels: SGEMV, rope, accumulate: true })).rejects.toThrow(/rope/);
    expect(rec.dispatches).toBe(0);
    rec.discard();
    ctx.free(ty);
  });
});
