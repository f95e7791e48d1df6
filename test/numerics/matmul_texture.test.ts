/**
 * matmul with MatmulOptions.wTexture (cpu kernel, W from an rgba32float weightTexture copy):
 * against matmulRef, and bit-identical to the buffer source (batch invariance and identical
 * logits across paths rely on the same fma order). W sits in a packed buffer at a 256-byte
 * aligned offset, as in the engine's packed weights. The weight tensor handed to matmul next to
 * the texture holds zeros, so a kernel that read the buffer instead would fail the comparisons.
 * Shapes: odd M, N not a multiple of 8/16/32 (tails of the 32-column blocks), cpu MR 1..4,
 * K = 4 and 172 (% 8 != 0), M = 240 (many invocations). From M = XTEX_MIN_ROWS the texture run
 * also stages x in a texture (MatmulOptions.xTexture; one copy per call, bit-identical); below
 * it the staging texture is ignored.
 * The fused variants (MatmulOptions.norm: the input RMSNorm applied in the kernel; gated: W
 * [2N, K] and y = silu(gate) * up) are checked bit-identical to rmsNorm / gatedAct around the
 * plain texture matmul on the same backend, and against the CPU references.
 */
import { describe, expect, it } from 'vitest';
import type { TextureBinding } from '../../core/gpu/recorder.ts';
import type { Tensor } from '../../core/gpu/tensor.ts';
import { stagingTexture, weightTexture } from '../../core/ops/decode_megakernel.ts';
import { fusionApplies, matmul, matmulPlan, TEX_OCTETS, XTEX_MIN_ROWS, type MatmulOptions } from '../../core/ops/matmul.ts';
import { gatedAct } from '../../core/ops/activation.ts';
import { gatedActRef } from '../../core/ops/activation.ref.ts';
import { rmsNorm } from '../../core/ops/rms_norm.ts';
import { rmsNormRef } from '../../core/ops/rms_norm.ref.ts';
import { matmulRef } from '../../core/ops/matmul.ref.ts';
import type { GpuContext } from '../../core/gpu/context.ts';
import { assertClose, countTextureCopies, gpuFor, randn, TEST_BACKENDS, TOL_F32 } from '../helpers/gpu.ts';

type Shape = [number, number, number]; // M, K, N

// cpu MR = 1, 2, 3, 4, 4; W at vec4 offsets 0 and > 0 (pad vec4s in front, multiples of 16).
const CASES: [Shape, number][] = [
  [[1, 4, 5], 0],
  [[2, 64, 37], 16],
  [[9, 36, 70], 48],
  [[15, 172, 45], 32],
  [[240, 64, 33], 16],
  [[40, 172, 21], 0],
];

/** W [N, K] f32 at vec4 `pad` of a packed buffer, its texture copy, and a zero W of the same shape. */
function packed(ctx: GpuContext, w: Float32Array, N: number, K: number, pad: number): { w: Tensor; zero: Tensor; tex: TextureBinding } {
  // Length a whole number of vec4s (weightTexture copies whole texels), > W's end.
  const data = new Float32Array(4 * (pad + Math.ceil((N * K) / 4) + 1));
  data.fill(7, 0, 4 * pad);
  data.set(w, 4 * pad);
  const buf = ctx.tensor(data, [data.length], 'f32');
  const tex = weightTexture(ctx, buf.buffer, data.byteLength);
  if (!tex) throw new Error('weight texture does not fit');
  return {
    w: { buffer: buf.buffer, offset: pad * 16, shape: [N, K], dtype: 'f32' },
    zero: ctx.tensor(new Float32Array(N * K), [N, K], 'f32'),
    tex,
  };
}

/** W [NW, K] at vec4 `pad` and a norm weight [K] at the next 16-vec4 boundary after it, in one packed buffer, and its texture copy. */
function packedWithNorm(ctx: GpuContext, w: Float32Array, NW: number, K: number, wn: Float32Array, pad: number): { w: Tensor; norm: Tensor; norm4: number; tex: TextureBinding } {
  const wEnd = pad + Math.ceil((NW * K) / 4);
  const norm4 = Math.ceil((wEnd + 1) / 16) * 16; // 256-byte aligned, as the engine packs tensors
  const data = new Float32Array(4 * (norm4 + K / 4 + 1));
  data.fill(7, 0, 4 * pad);
  data.set(w, 4 * pad);
  data.set(wn, 4 * norm4);
  const buf = ctx.tensor(data, [data.length], 'f32');
  const tex = weightTexture(ctx, buf.buffer, data.byteLength);
  if (!tex) throw new Error('weight texture does not fit');
  return { w: { buffer: buf.buffer, offset: pad * 16, shape: [NW, K], dtype: 'f32' }, norm: { buffer: buf.buffer, offset: norm4 * 16, shape: [K], dtype: 'f32' }, norm4, tex };
}

function bits(a: ArrayBuffer): Uint32Array {
  return new Uint32Array(a);
}

describe.each(TEST_BACKENDS)('matmul texture weights on %s', (backend) => {
  it.each(CASES)('M,K,N=%j, W at vec4 %i: reference and bit-identical to the buffer source (plain, bias, bias+accumulate)', async ([M, K, N], pad) => {
    const ctx = await gpuFor(backend);
    const seed = M * 1_000_003 + K * 1009 + N + 77;
    const x = randn(M * K, seed);
    const wf = randn(N * K, seed + 1, 0.5);
    const b = randn(N, seed + 2);
    const y0 = randn(M * N, seed + 3);
    const { w, zero, tex } = packed(ctx, wf, N, K, pad);
    const tx = ctx.tensor(x, [M, K], 'f32');
    const tb = ctx.tensor(b, [N], 'f32');
    const outs: Tensor[] = [];
    const rec = ctx.recorder();
    const copies = countTextureCopies(rec);
    const xs = stagingTexture(ctx, (M * K) / 4)!;
    const variant = 'cpu' as const;
    for (const src of ['texture', 'buffer'] as const) {
      const weight = src === 'texture' ? { w: zero } : { w };
      const opts: MatmulOptions = src === 'texture' ? { variant, wTexture: { binding: tex, offset4: pad }, xTexture: xs } : { variant };
      const plain = ctx.tensor(new Float32Array(M * N), [M, N], 'f32');
      const withBias = ctx.tensor(new Float32Array(M * N), [M, N], 'f32');
      const acc = ctx.tensor(y0, [M, N], 'f32');
      await matmul(rec, tx, weight, plain, opts);
      await matmul(rec, tx, { ...weight, bias: tb }, withBias, opts);
      await matmul(rec, tx, { ...weight, bias: tb }, acc, { ...opts, accumulate: true });
      outs.push(plain, withBias, acc);
    }
    expect(rec.dispatches).toBe(6);
    expect(copies()).toBe(M >= XTEX_MIN_ROWS ? 3 : 0);
    const reads = outs.map((t) => rec.readback(t));
    rec.submit();
    const [tp, tbias, tacc, bp, bbias, bacc] = await Promise.all(reads);
    assertClose(new Float32Array(tp!), matmulRef(x, M, K, wf, N), TOL_F32, 'y');
    assertClose(new Float32Array(tbias!), matmulRef(x, M, K, wf, N, b), TOL_F32, 'y (bias)');
    assertClose(new Float32Array(tacc!), matmulRef(x, M, K, wf, N, b, y0), TOL_F32, 'y (bias, accumulate)');
    expect(bits(tp!)).toEqual(bits(bp!));
    expect(bits(tbias!)).toEqual(bits(bbias!));
    expect(bits(tacc!)).toEqual(bits(bacc!));
    for (const t of outs) t.buffer.destroy();
    for (const t of [w, zero, tx, tb]) t.buffer.destroy();
    tex.texture.destroy();
    xs.texture.destroy();
  });

  it.each(CASES)('M,K,N=%j, W at vec4 %i: fused input norm and SiLU gate, bit-identical to rmsNorm / gatedAct around the matmul', async ([M, K, N], pad) => {
    const ctx = await gpuFor(backend);
    const seed = M * 7919 + K * 31 + N;
    const x = randn(M * K, seed, 3); // residual-stream scale, so the norm matters
    const wn = randn(K, seed + 1, 0.5);
    const wq = randn(N * K, seed + 2, 0.5); // a plain projection [N, K]
    const wgu = randn(2 * N * K, seed + 3, 0.5); // gate rows, then up rows [2N, K]
    const eps = 1e-5;
    const a = packedWithNorm(ctx, wq, N, K, wn, pad);
    const g = packedWithNorm(ctx, wgu, 2 * N, K, wn, pad);
    const tx = ctx.tensor(x, [M, K], 'f32');
    const h = ctx.scratch([M, K]);
    const variant = 'cpu' as const;
    const xs = stagingTexture(ctx, (M * K) / 4)!;
    const tex = (p: { tex: TextureBinding; w: Tensor }): MatmulOptions => ({ variant, wTexture: { binding: p.tex, offset4: p.w.offset / 16 }, xTexture: xs });
    const out = (cols: number): Tensor => ctx.tensor(new Float32Array(M * cols), [M, cols], 'f32');
    const [normed, gated, both, refNormed, refGu, refGated, refBoth, refGu2] = [out(N), out(N), out(N), out(N), out(2 * N), out(N), out(N), out(2 * N)];
    const rec = ctx.recorder();
    expect(fusionApplies(a.w, variant, true)).toBe(true);
    // fused
    await matmul(rec, tx, { w: a.w }, normed, { ...tex(a), norm: { offset4: a.norm4, eps } });
    await matmul(rec, tx, { w: g.w }, gated, { ...tex(g), gated: true });
    await matmul(rec, tx, { w: g.w }, both, { ...tex(g), norm: { offset4: g.norm4, eps }, gated: true });
    const fusedDispatches = rec.dispatches;
    // the unfused sequence
    await rmsNorm(rec, tx, a.norm, h, { eps, variant });
    await matmul(rec, h, { w: a.w }, refNormed, tex(a));
    await matmul(rec, tx, { w: g.w }, refGu, tex(g));
    await gatedAct(rec, refGu, refGated, { act: 'silu', inter: N, variant });
    await matmul(rec, h, { w: g.w }, refGu2, tex(g)); // h = rmsNorm(x) with the same weight
    await gatedAct(rec, refGu2, refBoth, { act: 'silu', inter: N, variant });
    expect(fusedDispatches).toBe(3);
    const reads = [normed, gated, both, refNormed, refGated, refBoth].map((t) => rec.readback(t));
    rec.submit();
    const [fn, fg, fb, rn, rg, rb] = await Promise.all(reads);
    expect(bits(fn!)).toEqual(bits(rn!));
    expect(bits(fg!)).toEqual(bits(rg!));
    expect(bits(fb!)).toEqual(bits(rb!));
    const hRef = rmsNormRef(x, wn, K, eps);
    assertClose(new Float32Array(fn!), matmulRef(hRef, M, K, wq, N), TOL_F32, 'norm');
    assertClose(new Float32Array(fg!), gatedActRef('silu', matmulRef(x, M, K, wgu, 2 * N), N), TOL_F32, 'gated');
    assertClose(new Float32Array(fb!), gatedActRef('silu', matmulRef(hRef, M, K, wgu, 2 * N), N), TOL_F32, 'norm + gated');
    for (const t of [normed, gated, both, refNormed, refGu, refGated, refBoth, refGu2, tx]) t.buffer.destroy();
    ctx.free(h);
    a.tex.texture.destroy();
    g.tex.texture.destroy();
    xs.texture.destroy();
  });

  it('refuses the fusions without texture weights and the gate with a bias or accumulation', async () => {
    const ctx = await gpuFor(backend);
    const [M, K, N] = [2, 8, 3];
    const g = packedWithNorm(ctx, randn(2 * N * K, 1), 2 * N, K, randn(K, 2), 0);
    const tx = ctx.tensor(randn(M * K, 3), [M, K], 'f32');
    const y = ctx.scratch([M, N]);
    const y2 = ctx.scratch([M, 2 * N]); // ungated: every W row is a column
    const b = ctx.tensor(new Float32Array(N), [N], 'f32');
    const wTexture = { binding: g.tex, offset4: 0 };
    const rec = ctx.recorder();
    await expect(matmul(rec, tx, { w: g.w }, y, { variant: 'cpu', gated: true })).rejects.toThrow(/needs texture weights .* or the sgemv kernel/);
    // The gpu variant gates on the sgemv decode kernel only (texture weights are the cpu variant's).
    await expect(matmul(rec, tx, { w: g.w }, y, { variant: 'gpu', wTexture, gated: true, kernels: { decode: 'gemv', prefill: 'tile' } })).rejects.toThrow(/needs texture weights .* or the sgemv kernel/);
    await expect(matmul(rec, tx, { w: g.w }, y2, { variant: 'cpu', norm: { offset4: g.norm4, eps: 1e-5 } })).rejects.toThrow(/need texture weights/);
    await expect(matmul(rec, tx, { w: g.w, bias: b }, y, { variant: 'cpu', wTexture, gated: true })).rejects.toThrow(/no bias/);
    await expect(matmul(rec, tx, { w: g.w }, y, { variant: 'cpu', wTexture, gated: true, accumulate: true })).rejects.toThrow(/no accumulation/);
    await expect(matmul(rec, tx, { w: g.w }, y2, { variant: 'cpu', wTexture, norm: { offset4: g.tex.texture.width * g.tex.texture.height, eps: 1e-5 } })).rejects.toThrow(/norm weight/);
    expect(fusionApplies({ ...g.w, dtype: 'f16' }, 'cpu', true)).toBe(false);
    expect(fusionApplies(g.w, 'gpu', true)).toBe(false);
    expect(fusionApplies(g.w, 'cpu', false)).toBe(false);
    expect(rec.dispatches).toBe(0);
    rec.submit();
    for (const t of [tx, b]) t.buffer.destroy();
    g.w.buffer.destroy();
    ctx.free(y);
    ctx.free(y2);
    g.tex.texture.destroy();
  });

  it('uses the texture only where it applies (gpu variant, K % 4 != 0: buffer) and checks its range', async () => {
    const ctx = await gpuFor(backend);
    const [M, K, N] = [2, 7, 5];
    const x = randn(M * K, 5);
    const wf = randn(N * K, 6);
    const { w, tex } = packed(ctx, wf, N, K, 16);
    const tx = ctx.tensor(x, [M, K], 'f32');
    const y = ctx.scratch([M, N]);
    const rec = ctx.recorder();
    await matmul(rec, tx, { w }, y, { variant: 'cpu', wTexture: { binding: tex, offset4: 0 } }); // K % 4 != 0: ignored
    const out = rec.readback(y);
    rec.submit();
    assertClose(new Float32Array(await out), matmulRef(x, M, K, wf, N), TOL_F32);
    expect(() => matmulPlan('f32', M, N, 8, 'gpu', true)).toThrow(/cpu variant/);
    // 32 columns per invocation with the texture, 8 without.
    const tp = matmulPlan('f32', 240, 70, 64, 'cpu', true);
    expect(tp.key.defines).toMatchObject({ WTEX: true, NO: TEX_OCTETS, MR: 4 });
    expect(tp.groups).toBe(Math.ceil((60 * Math.ceil(70 / (8 * TEX_OCTETS))) / 16)); // 60 row quads × column groups
    expect(matmulPlan('f32', 240, 70, 64, 'cpu').key.defines).toMatchObject({ NO: 1 });
    const x8 = ctx.tensor(new Float32Array(8), [1, 8], 'f32');
    const w8 = ctx.tensor(new Float32Array(8 * 4), [4, 8], 'f32');
    const rec2 = ctx.recorder();
    const tooFar = tex.texture.width * tex.texture.height - 7; // 4 rows × 2 vec4s = 8 > 7 left
    const y4 = ctx.scratch([1, 4]);
    await expect(matmul(rec2, x8, { w: w8 }, y4, { variant: 'cpu', wTexture: { binding: tex, offset4: tooFar } })).rejects.toThrow(/does not fit/);
    rec2.submit();
    ctx.free(y);
    ctx.free(y4);
    for (const t of [w, tx, x8, w8]) t.buffer.destroy();
    tex.texture.destroy();
  });
});
