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
 */
import { describe, expect, it } from 'vitest';
import type { TextureBinding } from '../../core/gpu/recorder.ts';
import type { Tensor } from '../../core/gpu/tensor.ts';
import { stagingTexture, weightTexture } from '../../core/ops/decode_megakernel.ts';
import { matmul, matmulPlan, TEX_OCTETS, XTEX_MIN_ROWS, type MatmulOptions } from '../../core/ops/matmul.ts';
import { matmulRef } from '../../core/ops/matmul.ref.ts';
import type { GpuContext } from '../../core/gpu/context.ts';
import { assertClose, gpuFor, randn, TEST_BACKENDS, TOL_F32 } from '../helpers/gpu.ts';

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
    let copies = 0;
    const copy = rec.copyToTexture.bind(rec);
    rec.copyToTexture = (...a) => {
      copies++;
      copy(...a);
    };
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
    expect(copies).toBe(M >= XTEX_MIN_ROWS ? 3 : 0);
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
