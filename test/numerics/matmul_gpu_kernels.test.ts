/**
 * The gpu-variant matmul kernels picked by adapter features and limits (core/ops/kernel_select.ts):
 * sgemv (subgroup reduction, M 1..16), gemv (workgroup-memory reduction, now up to M 16) and
 * tile64 (64x64 tiles, register-blocked 4x4), each forced through MatmulOptions.kernels, against
 * matmul.ref.ts on the dequantized weight, for every weight format the models load natively
 * (f32, f16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) on random, awkward shapes (M not a power of two,
 * N not a multiple of the quads or tiles, K not a multiple of 4 for float weights).
 * sgemv needs `subgroups`: Dawn's SwiftShader reports it; a backend without it skips only that kernel.
 */
import { describe, expect, it } from 'vitest';
import type { DType } from '../../core/gpu/tensor.ts';
import { matmulKernelsFor, type MatmulKernels } from '../../core/ops/kernel_select.ts';
import { matmul, matmulPlan } from '../../core/ops/matmul.ts';
import { matmulRef } from '../../core/ops/matmul.ref.ts';
import { gatedActRef } from '../../core/ops/activation.ref.ts';
import { rmsNormRef } from '../../core/ops/rms_norm.ref.ts';
import { assertClose, gpuFor, randn, TEST_BACKENDS, TOL_F32 } from '../helpers/gpu.ts';
import type { GpuContext } from '../../core/gpu/context.ts';
import { randomWeight } from '../helpers/random_weight.ts';

type Shape = [number, number, number]; // M, K, N

// Decode shapes: M over every MR (1, 2, 4, 8, 16) and in between; N past one workgroup's quads.
const DECODE: [DType, Shape][] = [
  ['f32', [1, 7, 3]],
  ['f32', [3, 130, 67]],
  ['f32', [16, 64, 40]],
  ['f16', [1, 96, 130]],
  ['f16', [5, 33, 37]],
  ['f16', [12, 64, 9]],
  ['q8_0', [2, 64, 35]],
  ['q8_0', [9, 96, 8]],
  ['q4_0', [1, 128, 33]],
  ['q4_0', [16, 32, 5]],
  ['q4_k', [1, 512, 36]],
  ['q5_k', [6, 256, 9]],
  ['q6_k', [16, 256, 5]],
];
// Prefill shapes: partial 64x64 tiles in both directions, K not a multiple of the 16-element stage.
const PREFILL: [DType, Shape][] = [
  ['f32', [17, 33, 65]],
  ['f32', [70, 68, 130]],
  ['f16', [65, 7, 3]],
  ['f16', [40, 96, 64]],
  ['q8_0', [33, 64, 70]],
  ['q4_0', [64, 96, 17]],
  ['q4_k', [20, 256, 66]],
  ['q6_k', [66, 256, 7]],
];

describe('kernel selection by features and limits', () => {
  const base = { f16: false, maxComputeInvocationsPerWorkgroup: 256, maxComputeWorkgroupStorageSize: 16384 };
  it('subgroups pick sgemv for decode; limits pick the prefill tile', () => {
    expect(matmulKernelsFor({ ...base, subgroups: true })).toEqual({ decode: 'sgemv', prefill: 'tile64' });
    expect(matmulKernelsFor({ ...base, subgroups: false })).toEqual({ decode: 'gemv', prefill: 'tile64' });
    // Compatibility-mode minimums (128 invocations, 8 KiB): the 32x32 tile.
    expect(matmulKernelsFor({ ...base, subgroups: false, maxComputeInvocationsPerWorkgroup: 128 }).prefill).toBe('tile');
    expect(matmulKernelsFor({ ...base, subgroups: false, maxComputeWorkgroupStorageSize: 8192 }).prefill).toBe('tile');
  });
  it('matmulPlan routes M <= 16 to the decode kernel and larger M to the prefill kernel', () => {
    const k: MatmulKernels = { decode: 'sgemv', prefill: 'tile64' };
    expect(matmulPlan('f16', 16, 100, 64, 'gpu', false, false, {}, k).key.defines!.KIND).toBe('sgemv');
    expect(matmulPlan('f16', 16, 100, 64, 'gpu', false, false, {}, k).groups).toBe(4); // 32 columns per workgroup
    expect(matmulPlan('f16', 17, 100, 64, 'gpu', false, false, {}, k).key.defines!.KIND).toBe('tile64');
    expect(matmulPlan('f16', 17, 100, 64, 'gpu', false, false, {}, k).groups).toBe(2);
    expect(matmulPlan('f16', 12, 100, 64, 'gpu').key.defines!.KIND).toBe('gemv');
    expect(matmulPlan('f16', 12, 100, 64, 'gpu').key.defines!.MR).toBe(16);
  });
});

describe.each(TEST_BACKENDS)('gpu matmul kernels on %s', (backend) => {
  const run = async (ctx: GpuContext, kernels: MatmulKernels, dtype: DType, [M, K, N]: Shape): Promise<void> => {
    const seed = M * 1_000_003 + K * 1009 + N + dtype.charCodeAt(1) * 7;
    const x = randn(M * K, seed);
    const b = randn(N, seed + 2);
    const y0 = randn(M * N, seed + 3);
    const { tw, wd } = randomWeight(ctx, dtype, N, K, seed + 1);
    const tx = ctx.tensor(x, [M, K], 'f32');
    const tb = ctx.tensor(b, [N], 'f32');
    const tyPlain = ctx.scratch([M, N]);
    const tyAcc = ctx.tensor(y0, [M, N], 'f32');
    const rec = ctx.recorder();
    await matmul(rec, tx, { w: tw }, tyPlain, { variant: 'gpu', kernels });
    await matmul(rec, tx, { w: tw, bias: tb }, tyAcc, { variant: 'gpu', kernels, accumulate: true });
    const outs = [rec.readback(tyPlain), rec.readback(tyAcc)];
    rec.submit();
    const [plain, acc] = (await Promise.all(outs)).map((a) => new Float32Array(a));
    assertClose(plain!, matmulRef(x, M, K, wd, N), TOL_F32, 'y');
    assertClose(acc!, matmulRef(x, M, K, wd, N, b, y0), TOL_F32, 'y (bias, accumulate)');
    for (const t of [tx, tw, tb, tyAcc]) t.buffer.destroy();
    ctx.free(tyPlain);
  };

  it.each(DECODE)('sgemv %s M,K,N=%j matches the reference', async (dtype, shape) => {
    const ctx = await gpuFor(backend);
    if (!ctx.gpu.caps.subgroups) return; // this backend cannot run it; SwiftShader does
    await run(ctx, { decode: 'sgemv', prefill: 'tile64' }, dtype, shape);
  });
  it.each(DECODE.filter(([, [M]]) => M > 8))('gemv %s M,K,N=%j (MR 16) matches the reference', async (dtype, shape) => {
    await run(await gpuFor(backend), { decode: 'gemv', prefill: 'tile' }, dtype, shape);
  });
  it.each(PREFILL)('tile64 %s M,K,N=%j matches the reference', async (dtype, shape) => {
    await run(await gpuFor(backend), { decode: 'gemv', prefill: 'tile64' }, dtype, shape);
  });

  // Fusions of the decode kernel: the input RMSNorm as its prologue and the SiLU gate as its
  // epilogue, against rmsNorm -> matmul -> gated activation references. N = output columns.
  const FUSED: [DType, Shape, boolean, boolean][] = [
    ['f32', [1, 64, 37], true, false],
    ['f16', [5, 96, 9], true, true],
    ['q8_0', [16, 64, 33], false, true],
    ['q4_k', [3, 256, 8], true, true],
    ['q6_k', [9, 256, 4], true, false],
  ];
  it.each(FUSED)('sgemv %s M,K,N=%j prenorm=%s gated=%s matches the unfused reference', async (dtype, [M, K, N], prenorm, gated) => {
    const ctx = await gpuFor(backend);
    if (!ctx.gpu.caps.subgroups) return;
    const seed = M * 7919 + K * 31 + N + (prenorm ? 1 : 0) + (gated ? 2 : 0);
    const x = randn(M * K, seed, 3);
    const wn = randn(K, seed + 4);
    const rows = gated ? 2 * N : N;
    const { tw, wd } = randomWeight(ctx, dtype, rows, K, seed + 1);
    const kernels: MatmulKernels = { decode: 'sgemv', prefill: 'tile64' };
    const tx = ctx.tensor(x, [M, K], 'f32');
    const twn = ctx.tensor(wn, [K], 'f32');
    const ty = ctx.scratch([M, N]);
    const rec = ctx.recorder();
    await matmul(rec, tx, { w: tw }, ty, { variant: 'gpu', kernels, ...(prenorm ? { prenorm: { weight: twn, eps: 1e-5 } } : {}), ...(gated ? { gated: true } : {}) });
    const back = rec.readback(ty);
    rec.submit();
    const h = prenorm ? rmsNormRef(x, wn, K, 1e-5) : x;
    const z = matmulRef(h, M, K, wd, rows);
    const want = gated ? gatedActRef('silu', z, N) : z;
    assertClose(new Float32Array(await back), want, TOL_F32, 'y');
    for (const t of [tx, tw, twn]) t.buffer.destroy();
    ctx.free(ty);
  });
  it('refuses the fusions where the sgemv kernel does not run', async () => {
    const ctx = await gpuFor(backend);
    const tx = ctx.tensor(randn(17 * 64, 1), [17, 64], 'f32');
    const tw = ctx.tensor(randn(8 * 64, 2), [8, 64], 'f32');
    const ty = ctx.scratch([17, 4]);
    const rec = ctx.recorder();
    await expect(matmul(rec, tx, { w: tw }, ty, { variant: 'gpu', kernels: { decode: 'sgemv', prefill: 'tile64' }, gated: true })).rejects.toThrow(/sgemv/);
    await expect(matmul(rec, tx, { w: tw }, ty, { variant: 'gpu', kernels: { decode: 'gemv', prefill: 'tile64' }, gated: true })).rejects.toThrow(/sgemv/);
    rec.submit();
    for (const t of [tx, tw]) t.buffer.destroy();
    ctx.free(ty);
  });
});
