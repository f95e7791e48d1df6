/**
 * matmul (shaders/matmul.wgsl) against matmulRef on the dequantized weight, for every weight
 * dtype, backend and variant: awkward M/N/K (1, odd, K % 4 != 0 for f32/f16), bias and
 * accumulate; quantization error is excluded by comparing with the dequantized weight.
 * Shapes are chosen so each kernel path (cpu MR 1..4, decode kernel MR 1..8, prefill tile; vec4
 * and scalar K) is hit while keeping distinct pipelines few: SwiftShader compiles each for ~0.5 s.
 * The gpu variant runs the adapter's kernels (kernel_select.ts: sgemv where the backend has
 * subgroups, else gemv; tile64); matmul_gpu_kernels.test.ts forces each one.
 */
import { describe, expect, it } from 'vitest';
import { renderSource, type Kernel } from '../../core/gpu/pipelines.ts';
import type { DType } from '../../core/gpu/tensor.ts';
import { matmul, matmulPlan } from '../../core/ops/matmul.ts';
import { grid1d } from '../../core/ops/grid.ts';
import { matmulRef } from '../../core/ops/matmul.ref.ts';
import { dequantize, encodeWeight, f16ToF32, f32ToF16, uploadEncoded } from '../../core/ops/quant.ts';
import { assertClose, BACKEND_VARIANTS, gpuFor, randn, TOL_F32 } from '../helpers/gpu.ts';

type Shape = [number, number, number]; // M, K, N

// [M, K, N]. cpu MR = 1, 2, 3, 3, 4 and gpu decode kernel 1, 2, 4, 8 rows, prefill tile for M = 1, 2, 3, 5, 17.
const F32_SHAPES: Shape[] = [
  [1, 1, 1],
  [1, 7, 3],
  [2, 64, 64],
  [3, 33, 130],
  [5, 96, 513],
  [17, 33, 513],
  [17, 64, 3],
];
const F16_SHAPES: Shape[] = [
  [1, 96, 130],
  [2, 7, 64],
  [5, 64, 513],
  [17, 33, 3],
];
const Q8_SHAPES: Shape[] = [
  [1, 32, 1],
  [2, 64, 3],
  [3, 96, 130],
  [17, 64, 513],
];
const Q4_SHAPES: Shape[] = [
  [1, 128, 130],
  [3, 64, 64],
  [5, 32, 513],
  [17, 96, 3],
];
const CASES: [DType, Shape][] = [
  ...F32_SHAPES.map((sh) => ['f32', sh] as [DType, Shape]),
  ...F16_SHAPES.map((sh) => ['f16', sh] as [DType, Shape]),
  ...Q8_SHAPES.map((sh) => ['q8_0', sh] as [DType, Shape]),
  ...Q4_SHAPES.map((sh) => ['q4_0', sh] as [DType, Shape]),
];

describe.each(BACKEND_VARIANTS)('matmul on %s, %s variant', (backend, variant) => {
  it.each(CASES)('%s M,K,N=%j matches the reference (plain, bias, bias+accumulate)', async (dtype, [M, K, N]) => {
    const ctx = await gpuFor(backend);
    const seed = M * 1_000_003 + K * 1009 + N;
    const x = randn(M * K, seed);
    const wf = randn(N * K, seed + 1, 0.5);
    const b = randn(N, seed + 2);
    const y0 = randn(M * N, seed + 3);
    const enc = encodeWeight(wf, N, K, dtype);
    const wd = dequantize(dtype, enc, N, K);
    const tx = ctx.tensor(x, [M, K], 'f32');
    const tw = uploadEncoded(ctx, enc, N, K, dtype);
    const tb = ctx.tensor(b, [N], 'f32');
    const tyPlain = ctx.scratch([M, N]);
    const tyBias = ctx.scratch([M, N]);
    const tyAcc = ctx.tensor(y0, [M, N], 'f32');
    const rec = ctx.recorder();
    await matmul(rec, tx, { w: tw }, tyPlain, { variant });
    await matmul(rec, tx, { w: tw, bias: tb }, tyBias, { variant });
    await matmul(rec, tx, { w: tw, bias: tb }, tyAcc, { variant, accumulate: true });
    const outs = [rec.readback(tyPlain), rec.readback(tyBias), rec.readback(tyAcc)];
    rec.submit();
    const [plain, withBias, acc] = (await Promise.all(outs)).map((a) => new Float32Array(a));
    assertClose(plain!, matmulRef(x, M, K, wd, N), TOL_F32, 'y');
    assertClose(withBias!, matmulRef(x, M, K, wd, N, b), TOL_F32, 'y (bias)');
    assertClose(acc!, matmulRef(x, M, K, wd, N, b, y0), TOL_F32, 'y (bias, accumulate)');
    ctx.free(tyPlain);
    ctx.free(tyBias);
    for (const t of [tx, tw, tb, tyAcc]) {
      t.buffer.destroy();
      t.scales?.destroy();
    }
  });

  it('f16 subnormal halves are exact (OpenGL ES) or flushed as a whole (SwiftShader)', async () => {
    const ctx = await gpuFor(backend);
    const [M, K, N] = [1, 96, 130]; // an F16_SHAPES shape: no extra pipelines
    const x = randn(M * K, 41);
    const enc = encodeWeight(randn(N * K, 42, 2e-5), N, K, 'f16'); // mostly |w| < 2^-14
    const wd = dequantize('f16', enc, N, K);
    const tx = ctx.tensor(x, [M, K], 'f32');
    const tw = uploadEncoded(ctx, enc, N, K, 'f16');
    const ty = ctx.scratch([M, N]);
    const rec = ctx.recorder();
    await matmul(rec, tx, { w: tw }, ty, { variant });
    const out = rec.readback(ty);
    rec.submit();
    const got = new Float32Array(await out);
    const tol = { atol: 1e-9, rtol: 1e-4, nmse: 1e-9 };
    if (backend === 'swiftshader') {
      // SwiftShader's worker threads do not agree on denormal handling: a run
      // may flush f16 subnormals to zero (seen in CI). Each output must equal
      // either the exact result or the fully flushed one — never anything else.
      const flushed = matmulRef(x, M, K, wd.map((w) => (Math.abs(w) < 2 ** -14 ? 0 : w)), N);
      const exact = matmulRef(x, M, K, wd, N);
      got.forEach((g, i) => {
        const ok = [exact[i]!, flushed[i]!].some((e) => Math.abs(g - e) <= tol.atol + tol.rtol * Math.abs(e));
        expect(ok, `column ${i}: ${g} is neither ${exact[i]} nor ${flushed[i]}`).toBe(true);
      });
    } else assertClose(got, matmulRef(x, M, K, wd, N), tol);
    ctx.free(ty);
    tx.buffer.destroy();
    tw.buffer.destroy();
  });

  it('x with leading batch dims [2, 3, K] is M = 6 rows; one dispatch per call', async () => {
    const ctx = await gpuFor(backend);
    const [M, K, N] = [6, 32, 5];
    const x = randn(M * K, 11);
    const wf = randn(N * K, 12);
    const tx = ctx.tensor(x, [2, 3, K], 'f32');
    const tw = ctx.tensor(wf, [N, K], 'f32');
    const ty = ctx.scratch([2, 3, N]);
    const rec = ctx.recorder();
    await matmul(rec, tx, { w: tw }, ty, { variant });
    expect(rec.dispatches).toBe(1);
    const out = rec.readback(ty);
    rec.submit();
    assertClose(new Float32Array(await out), matmulRef(x, M, K, wf, N), TOL_F32);
    ctx.free(ty);
    tx.buffer.destroy();
    tw.buffer.destroy();
  });

  it('rejects quantized weights with K % 32 != 0 and mismatched shapes', async () => {
    const ctx = await gpuFor(backend);
    const rec = ctx.recorder();
    const x = ctx.tensor(new Float32Array(48), [1, 48], 'f32');
    const w = ctx.tensor(new Uint8Array(48 * 2), [2, 48], 'q8_0', new Float32Array(4));
    await expect(matmul(rec, x, { w }, ctx.scratch([1, 2]), { variant })).rejects.toThrow(/K % 32 == 0/);
    const wf = ctx.tensor(new Float32Array(2 * 47), [2, 47], 'f32');
    await expect(matmul(rec, x, { w: wf }, ctx.scratch([1, 2]), { variant })).rejects.toThrow(/does not match/);
    rec.submit();
    for (const t of [x, w, wf]) t.buffer.destroy();
  });
});

// A fused weight whose row blocks keep different dtypes (LinearWeight.parts): each part writes
// its columns of y (MatmulOptions.yColumns), with its own bias, alone or with the gpu decode
// kernel's prenorm; the result is the matmul of the concatenated dequantized blocks.
describe.each(BACKEND_VARIANTS)('matmul of a weight in parts on %s, %s variant', (backend, variant) => {
  it.each([
    [1, 64, [32, 8, 24]],
    [5, 64, [40, 16, 8]],
    [20, 96, [12, 36]],
  ] as const)('M = %i, K = %i, parts of %j rows (q8_0, f16, q4_0, ...) match the reference', async (M, K, rows) => {
    const ctx = await gpuFor(backend);
    const types: DType[] = ['q8_0', 'f16', 'q4_0'];
    const N = rows.reduce((a, b) => a + b, 0);
    const x = randn(M * K, 7 * M + K);
    const wd = new Float32Array(N * K);
    const b = randn(N, 11);
    const y0 = randn(M * N, 13);
    const parts = [];
    let col = 0;
    for (const [i, r] of rows.entries()) {
      const dtype = types[i % types.length]!;
      const enc = encodeWeight(randn(r * K, 100 + i, 0.5), r, K, dtype);
      wd.set(dequantize(dtype, enc, r, K), col * K);
      parts.push({ w: uploadEncoded(ctx, enc, r, K, dtype), bias: ctx.tensor(b.subarray(col, col + r), [r], 'f32'), col });
      col += r;
    }
    const weight = { w: parts[0]!.w, parts };
    const tx = ctx.tensor(x, [M, K], 'f32');
    const tyBias = ctx.scratch([M, N]);
    const tyAcc = ctx.tensor(y0, [M, N], 'f32');
    const rec = ctx.recorder();
    await matmul(rec, tx, weight, tyBias, { variant });
    await matmul(rec, tx, weight, tyAcc, { variant, accumulate: true });
    const outs = [rec.readback(tyBias), rec.readback(tyAcc)];
    rec.submit();
    const [withBias, acc] = (await Promise.all(outs)).map((a) => new Float32Array(a));
    assertClose(withBias!, matmulRef(x, M, K, wd, N, b), TOL_F32, 'y (parts, bias)');
    assertClose(acc!, matmulRef(x, M, K, wd, N, b, y0), TOL_F32, 'y (parts, bias, accumulate)');
    await expect(matmul(ctx.recorder(), tx, weight, tyBias, { variant, gated: true })).rejects.toThrow(/in parts/);
    await expect(matmul(ctx.recorder(), tx, { w: parts[0]!.w }, tyBias, { variant, yColumns: { stride: N, offset: N - 1 } })).rejects.toThrow(/columns/);
    ctx.free(tyBias);
    for (const t of [tx, tyAcc, ...parts.flatMap((p) => [p.w, p.bias])]) {
      t.buffer.destroy();
      t.scales?.destroy();
    }
  });
});

describe.each(BACKEND_VARIANTS)('matmul large grid on %s, %s variant', (backend, variant) => {
  // Folding needs > 65535 workgroups: 1M cpu invocations or 65537 gemv workgroups. SwiftShader
  // needs seconds for either (slow gathers; a coroutine per barrier-using workgroup), so the
  // fold (plain WGSL arithmetic, same source on both backends) is checked on opengles only.
  it.skipIf(backend === 'swiftshader')('N large enough that the grid folds into 2-D (grid1d)', async () => {
    const ctx = await gpuFor(backend);
    // gemv: one workgroup per 4 columns; cpu: 16 invocations × 8 columns per workgroup.
    const [M, K, N] = variant === 'gpu' ? [1, 4, 4 * 65535 + 5] : [1, 1, 8 * 16 * 65535 + 9];
    const x = new Float32Array(M * K);
    const wf = new Float32Array(N * K);
    for (let i = 0; i < x.length; i++) x[i] = 0.5 + i;
    for (let i = 0; i < wf.length; i++) wf[i] = (i % 13) - 6; // cheap and exact
    const tx = ctx.tensor(x, [M, K], 'f32');
    const tw = ctx.tensor(wf, [N, K], 'f32');
    const ty = ctx.scratch([M, N]);
    const rec = ctx.recorder();
    await matmul(rec, tx, { w: tw }, ty, { variant });
    const out = rec.readback(ty);
    rec.submit();
    assertClose(new Float32Array(await out), matmulRef(x, M, K, wf, N), TOL_F32);
    ctx.free(ty);
    tx.buffer.destroy();
    tw.buffer.destroy();
  });
});

describe.each(BACKEND_VARIANTS)('matmul native-f16 path on %s, %s variant', (backend, variant) => {
  // No test adapter has shader-f16, so the WDT=f16n source is compiled with f16 spelled f32 and
  // fed an f32 weight in the native-f16 layout (rows padded to even K): this checks its WGSL and
  // indexing on every backend; only the f16 type itself is untested here.
  const shapes: [number, number, number][] = variant === 'cpu' ? [[3, 7, 9]] : [[2, 8, 5]]; // scalar K / vec4 K
  it.each(shapes)('M,K,N = %i,%i,%i', async (M, K, N) => {
    const ctx = await gpuFor(backend);
    const { key, groups } = matmulPlan('f16n', M, N, K, variant);
    const code = renderSource(key).replace(/^\s*enable f16;\s*$/m, '').replace(/\bf16\b/g, 'f32');
    const module = ctx.device.createShaderModule({ code });
    const errors = (await module.getCompilationInfo()).messages.filter((m) => m.type === 'error');
    expect(errors.map((m) => m.message)).toEqual([]);
    const pipeline = await ctx.device.createComputePipelineAsync({ layout: 'auto', compute: { module, entryPoint: 'main' } });
    // An 'auto' layout: the recorder binds its Params at a fixed arena offset (no dynamic offset).
    const kernel: Kernel = { id: 1e6 + M * 1000 + K, pipeline, layout: key.layout, label: 'matmul-f16n-as-f32', bindGroupLayout: pipeline.getBindGroupLayout(0) };
    const x = randn(M * K, 31);
    const wf = randn(N * K, 32).map((v) => f16ToF32(f32ToF16(v)));
    const kp = K + (K & 1);
    const padded = new Float32Array(N * kp);
    for (let n = 0; n < N; n++) padded.set(wf.subarray(n * K, (n + 1) * K), n * kp);
    const b = randn(N, 33);
    const tx = ctx.tensor(x, [M, K], 'f32');
    const tw = ctx.tensor(padded, [N, kp], 'f32');
    const tb = ctx.tensor(b, [N], 'f32');
    const ty = ctx.scratch([M, N]);
    const rec = ctx.recorder();
    rec.dispatch(kernel, { M, N, K, flags: 1, ldy: N, y0: 0 }, [tx, tw, tb, ty], grid1d(groups));
    const out = rec.readback(ty);
    rec.submit();
    assertClose(new Float32Array(await out), matmulRef(x, M, K, wf, N, b), TOL_F32);
    ctx.free(ty);
    for (const t of [tx, tw, tb]) t.buffer.destroy();
  });
});
