/**
 * encoder_attention.ts vs encoder_attention.ref.ts on padded batches, on every backend ×
 * variant: row lengths 0, 1, S and in between, odd S, several key tiles, hd 4, 8, 32, 64,
 * the fused layout and a non-fused one (extra columns, k/v before q), a custom scale and
 * peaky scores (exercise the running-max rescale). Every padding token row of qkv is NaN,
 * so any read outside a row's real tokens poisons the output; padding query rows must
 * come out as zeros.
 */
import { describe, expect, it } from 'vitest';
import { WeftError } from '../../core/errors.ts';
import { isLlvmpipe } from '../../core/gpu/device.ts';
import { encoderAttention, type EncoderAttentionOptions } from '../../core/ops/encoder_attention.ts';
import { encoderAttentionRef } from '../../core/ops/encoder_attention.ref.ts';
import { encoderAttentionTilesPerPass } from '../../core/ops/loop_budget.ts';
import { assertClose, BACKEND_VARIANTS, gpuFor, randn, TOL_F32 } from '../helpers/gpu.ts';

interface Case {
  name: string;
  S: number;
  heads: number;
  hd: number;
  lengths: number[];
  /** Non-fused layout: row stride and k / v column offsets (q stays at column 0). */
  layout?: { rowStride: number; kOffset: number; vOffset: number };
  scale?: number;
  std?: number;
}

const CASES: Case[] = [
  { name: 'one row, one token, hd 4', S: 1, heads: 1, hd: 4, lengths: [1] },
  { name: 'hd 8, 4 heads, ragged lengths incl. 0 and S', S: 7, heads: 4, hd: 8, lengths: [7, 3, 0, 1, 5] },
  { name: 'hd 32, odd S, peaky, custom scale', S: 13, heads: 2, hd: 32, lengths: [13, 9, 2], std: 3, scale: 0.3 },
  { name: 'hd 64, S 70 (several key tiles), non-fused layout (v before k, gap columns)', S: 70, heads: 2, hd: 64, lengths: [70, 33, 65], layout: { rowStride: 448, kOffset: 304, vOffset: 136 } },
  { name: 'hd 8, S 130, 3 heads, lengths 130 / 1 / 129', S: 130, heads: 3, hd: 8, lengths: [130, 1, 129] },
];

function makeQkv(c: Case, seed: number): { qkv: Float32Array; opts: Omit<EncoderAttentionOptions, 'variant'> } {
  const B = c.lengths.length;
  const D = c.heads * c.hd;
  const rowStride = c.layout?.rowStride ?? 3 * D;
  const qkv = randn(B * c.S * rowStride, seed, c.std ?? 1);
  c.lengths.forEach((n, b) => {
    for (let i = n; i < c.S; i++) qkv.fill(NaN, (b * c.S + i) * rowStride, (b * c.S + i + 1) * rowStride);
  });
  const opts = {
    batch: B,
    seqLen: c.S,
    heads: c.heads,
    headDim: c.hd,
    rowStride,
    ...(c.layout ? { kOffset: c.layout.kOffset, vOffset: c.layout.vOffset } : {}),
    ...(c.scale !== undefined ? { scale: c.scale } : {}),
  };
  return { qkv, opts };
}

describe.each(BACKEND_VARIANTS)('encoder_attention on %s, %s variant', (backend, variant) => {
  it.each(CASES.map((c, i) => [c.name, c, i] as const))('%s', async (_name, c, i) => {
    const ctx = await gpuFor(backend);
    const { qkv, opts } = makeQkv(c, 100 + i);
    const lengths = Uint32Array.from(c.lengths);
    const tq = ctx.tensor(qkv, [opts.batch * opts.seqLen, opts.rowStride], 'f32');
    const tl = ctx.tensor(lengths, [opts.batch], 'u32');
    const to = ctx.tensor(new Float32Array(opts.batch * opts.seqLen * c.heads * c.hd).fill(NaN), [opts.batch * opts.seqLen, c.heads * c.hd], 'f32');
    const rec = ctx.recorder();
    await encoderAttention(rec, tq, tl, to, { ...opts, variant });
    expect(rec.dispatches).toBe(1);
    const got = rec.readback(to);
    rec.submit();
    const want = encoderAttentionRef(qkv, lengths, opts);
    const one = new Float32Array(await got);
    assertClose(one, want, TOL_F32);
    // The cpu variant in passes of 1 and 2 key tiles (as llvmpipe runs long rows): the same bits.
    if (variant === 'cpu') {
      for (const tilesPerPass of [1, 2]) {
        const r = ctx.recorder();
        await encoderAttention(r, tq, tl, to, { ...opts, variant, tilesPerPass });
        expect(r.dispatches).toBe(Math.max(1, Math.ceil(Math.ceil(c.S / 8) / tilesPerPass)));
        const g = r.readback(to);
        r.submit();
        expect(new Float32Array(await g), `passes of ${tilesPerPass} tiles`).toEqual(one);
      }
    }
    for (const t of [tq, tl, to]) t.buffer.destroy();
  });
});

// The cpu variant walks a query block's row in one invocation; past llvmpipe's loop budget
// (core/ops/loop_budget.ts) the driver would silently cut its loops short, so there the row
// goes in passes of encoderAttentionTilesPerPass tiles. SwiftShader has no budget: one pass.
describe.each(BACKEND_VARIANTS.filter(([, v]) => v === 'cpu'))('encoder_attention past the loop budget on %s, %s variant', (backend, variant) => {
  it('3,000 tokens, hd 64: in passes on llvmpipe, one dispatch elsewhere, equal to the reference', async () => {
    const ctx = await gpuFor(backend);
    const c: Case = { name: 'long', S: 3000, heads: 1, hd: 64, lengths: [3000] };
    const { qkv, opts } = makeQkv(c, 7);
    const lengths = Uint32Array.from(c.lengths);
    const tq = ctx.tensor(qkv, [c.S, opts.rowStride], 'f32');
    const tl = ctx.tensor(lengths, [1], 'u32');
    const to = ctx.scratch([c.S, c.hd]);
    try {
      const rec = ctx.recorder();
      await encoderAttention(rec, tq, tl, to, { ...opts, variant });
      const perPass = encoderAttentionTilesPerPass(4, c.hd / 4);
      expect(rec.dispatches).toBe(isLlvmpipe(ctx.gpu.info) ? Math.ceil(Math.ceil(c.S / 8) / perPass) : 1);
      if (isLlvmpipe(ctx.gpu.info)) expect(rec.dispatches).toBeGreaterThan(1);
      const got = rec.readback(to);
      rec.submit();
      assertClose(new Float32Array(await got), encoderAttentionRef(qkv, lengths, opts), TOL_F32);
    } finally {
      ctx.free(to);
      for (const t of [tq, tl]) t.buffer.destroy();
    }
  }, 300_000);
});

// The gpu variant keeps its state in registers across key tiles and has no passes: forced
// onto llvmpipe, a row past the budget is refused with a typed error before any dispatch.
describe.each(BACKEND_VARIANTS.filter(([b, v]) => b === 'opengles' && v === 'gpu'))('encoder_attention gpu variant past the loop budget on %s', (backend) => {
  it('16,000 tokens, hd 64: input_too_long, no dispatch', async () => {
    const ctx = await gpuFor(backend);
    if (!isLlvmpipe(ctx.gpu.info)) return;
    const S = 16_000;
    const tq = ctx.scratch([S, 192]);
    const tl = ctx.tensor(Uint32Array.of(S), [1], 'u32');
    const to = ctx.scratch([S, 64]);
    try {
      const rec = ctx.recorder();
      const err = await encoderAttention(rec, tq, tl, to, { batch: 1, seqLen: S, heads: 1, headDim: 64, rowStride: 192, variant: 'gpu' }).then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(WeftError);
      expect((err as WeftError).code).toBe('input_too_long');
      expect(rec.dispatches).toBe(0);
    } finally {
      ctx.free(tq);
      ctx.free(to);
      tl.buffer.destroy();
    }
  });
});
