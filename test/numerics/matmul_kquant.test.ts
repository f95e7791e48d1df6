/**
 * GGUF K-quant weights (Q4_K, Q5_K, Q6_K) read from their own super-blocks by matmul and
 * embedding (shaders/_kquant.wgsl), against the dequantized reference
 * (core/formats/gguf_quants.ts via quant_k.ts, then matmul.ref.ts / a row gather), on every
 * backend × variant. Random valid blocks (random quants, scales and mins, f16 d / dmin), so
 * every bit of the layouts is exercised; shapes hit cpu MR 1..4, gemv 1/4 rows and tile.
 */
import { describe, expect, it } from 'vitest';
import { embedding } from '../../core/ops/embedding.ts';
import { matmul } from '../../core/ops/matmul.ts';
import { matmulRef } from '../../core/ops/matmul.ref.ts';
import { dequantizeKQuant, kquantBytes, randomKQuantBlocks, repackKQuant, type KQuantDType } from '../../core/ops/quant_k.ts';
import { assertClose, BACKEND_VARIANTS, gpuFor, randn, TOL_F32 } from '../helpers/gpu.ts';

type Shape = [number, number, number]; // M, K, N
const SHAPES: Shape[] = [
  [1, 256, 5],
  [3, 512, 33],
  [17, 256, 9],
];
const TYPES: KQuantDType[] = ['q4_k', 'q5_k', 'q6_k'];
const CASES: [KQuantDType, Shape][] = TYPES.flatMap((t) => SHAPES.map((s) => [t, s] as [KQuantDType, Shape]));

describe('K-quant device layout', () => {
  it.each(TYPES)('%s repacks to the device size and dequantizes through it unchanged', (t) => {
    const raw = randomKQuantBlocks(t, 3, 512, 7);
    const dev = repackKQuant(t, raw, 3, 512);
    expect(dev.byteLength).toBe(kquantBytes(t, 3, 512));
    const v = dequantizeKQuant(t, dev, 3, 512);
    expect(v.every(Number.isFinite)).toBe(true);
    expect(Math.max(...v.map(Math.abs))).toBeGreaterThan(0.01);
  });
  it('rejects rows that are not whole super-blocks', () => {
    expect(() => repackKQuant('q4_k', new Uint8Array(144), 1, 128)).toThrow(/multiple of 256/);
  });
});

describe.each(BACKEND_VARIANTS)('K-quant kernels on %s, %s variant', (backend, variant) => {
  it.each(CASES)('matmul %s M,K,N=%j matches the dequantized reference (plain, bias+accumulate)', async (dtype, [M, K, N]) => {
    const ctx = await gpuFor(backend);
    const seed = M * 1_000_003 + K * 1009 + N + dtype.charCodeAt(1);
    const x = randn(M * K, seed);
    const b = randn(N, seed + 2);
    const y0 = randn(M * N, seed + 3);
    const dev = repackKQuant(dtype, randomKQuantBlocks(dtype, N, K, seed + 1), N, K);
    const wd = dequantizeKQuant(dtype, dev, N, K);
    const tx = ctx.tensor(x, [M, K], 'f32');
    const tw = ctx.tensor(dev, [N, K], dtype);
    const tb = ctx.tensor(b, [N], 'f32');
    const tyPlain = ctx.scratch([M, N]);
    const tyAcc = ctx.tensor(y0, [M, N], 'f32');
    const rec = ctx.recorder();
    await matmul(rec, tx, { w: tw }, tyPlain, { variant });
    await matmul(rec, tx, { w: tw, bias: tb }, tyAcc, { variant, accumulate: true });
    const outs = [rec.readback(tyPlain), rec.readback(tyAcc)];
    rec.submit();
    const [plain, acc] = (await Promise.all(outs)).map((a) => new Float32Array(a));
    assertClose(plain!, matmulRef(x, M, K, wd, N), TOL_F32, 'y');
    assertClose(acc!, matmulRef(x, M, K, wd, N, b, y0), TOL_F32, 'y (bias, accumulate)');
    for (const t of [tx, tw, tb, tyAcc]) t.buffer.destroy();
    ctx.free(tyPlain);
  });

  it.each(TYPES)('embedding gathers %s rows as the dequantized table (out-of-range id: zeros)', async (dtype) => {
    const ctx = await gpuFor(backend);
    const [V, D] = [7, 512];
    const dev = repackKQuant(dtype, randomKQuantBlocks(dtype, V, D, 99), V, D);
    const table = dequantizeKQuant(dtype, dev, V, D);
    const ids = new Uint32Array([3, 0, 6, 9, 3]);
    const tIds = ctx.tensor(ids, [ids.length], 'u32');
    const tTab = ctx.tensor(dev, [V, D], dtype);
    const out = ctx.scratch([ids.length, D]);
    const rec = ctx.recorder();
    await embedding(rec, tIds, tTab, out, { variant, scale: 2 });
    const back = rec.readback(out);
    rec.submit();
    const got = new Float32Array(await back);
    const want = new Float32Array(ids.length * D);
    ids.forEach((id, t) => {
      if (id < V) for (let k = 0; k < D; k++) want[t * D + k] = table[id * D + k]! * 2;
    });
    assertClose(got, want, TOL_F32, 'rows');
    for (const t of [tIds, tTab]) t.buffer.destroy();
    ctx.free(out);
  });
});
