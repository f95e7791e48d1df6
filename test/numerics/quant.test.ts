/**
 * CPU weight packing (core/ops/quant.ts) against hand-computed values: half/bfloat conversions
 * (exhaustive f16 round trip, rounding ties, subnormals, inf/nan), f16 row packing, ggml's
 * Q8_0/Q4_0 reference quantizers on hand-made blocks, GGUF block repacking, dequantize error
 * bounds, and uploadWeight's buffers.
 */
import { describe, expect, it } from 'vitest';
import {
  bf16ToF32,
  dequantize,
  encodeWeight,
  f16ToF32,
  f32ToF16,
  packF16,
  quantizeQ4_0,
  quantizeQ8_0,
  repackGgufQ4_0,
  repackGgufQ8_0,
  uploadWeight,
  type QuantBlocks,
} from '../../core/ops/quant.ts';
import { gpuFor, randn, TEST_BACKENDS } from '../helpers/gpu.ts';

describe('f16 / bf16 conversions', () => {
  it('encodes known values with round-to-nearest-even', () => {
    const cases: [number, number][] = [
      [0, 0x0000],
      [-0, 0x8000],
      [1, 0x3c00],
      [-2, 0xc000],
      [0.5, 0x3800],
      [65504, 0x7bff], // largest finite half
      [65519.99, 0x7bff], // just below the rounding point to inf
      [65520, 0x7c00], // halfway to 2^16: ties to even = inf
      [1e6, 0x7c00],
      [Infinity, 0x7c00],
      [-Infinity, 0xfc00],
      [2 ** -14, 0x0400], // smallest normal
      [2 ** -24, 0x0001], // smallest subnormal
      [2 ** -25, 0x0000], // tie between 0 and 2^-24: even = 0
      [1.5 * 2 ** -25, 0x0001],
      [3 * 2 ** -25, 0x0002], // tie between 1 and 2 units: even = 2
      [1023.5 * 2 ** -24, 0x0400], // tie at the subnormal/normal boundary: rounds up into normal
      [1 + 2 ** -11, 0x3c00], // tie between 1 and 1 + 2^-10: even = 1
      [1 + 3 * 2 ** -11, 0x3c02], // tie between 1 + 2^-10 and 1 + 2^-9: even
      [1 + 2 ** -11 + 2 ** -20, 0x3c01], // just above the tie
      [1e-10, 0x0000],
      [-1e-10, 0x8000],
    ];
    for (const [v, h] of cases) expect([v, f32ToF16(v)]).toEqual([v, h]);
    expect(f32ToF16(NaN) & 0x7c00).toBe(0x7c00);
    expect(f32ToF16(NaN) & 0x03ff).not.toBe(0);
  });

  it('decodes known bit patterns', () => {
    expect(f16ToF32(0x3c00)).toBe(1);
    expect(f16ToF32(0xc000)).toBe(-2);
    expect(f16ToF32(0x7bff)).toBe(65504);
    expect(f16ToF32(0x0001)).toBe(2 ** -24);
    expect(f16ToF32(0x03ff)).toBe(1023 * 2 ** -24);
    expect(f16ToF32(0x7c00)).toBe(Infinity);
    expect(f16ToF32(0xfc00)).toBe(-Infinity);
    expect(f16ToF32(0x7e00)).toBeNaN();
    expect(Object.is(f16ToF32(0x8000), -0)).toBe(true);
  });

  it('round-trips every non-NaN half exactly', () => {
    for (let h = 0; h < 0x10000; h++) {
      const v = f16ToF32(h);
      if (Number.isNaN(v)) {
        expect(f32ToF16(v) & 0x7c00).toBe(0x7c00);
        continue;
      }
      if (f32ToF16(v) !== h) throw new Error(`half 0x${h.toString(16)} -> ${v} -> 0x${f32ToF16(v).toString(16)}`);
    }
  });

  it('bf16 is the top half of an f32', () => {
    expect(bf16ToF32(0x3f80)).toBe(1);
    expect(bf16ToF32(0xc000)).toBe(-2);
    expect(bf16ToF32(0x4049)).toBeCloseTo(3.140625, 10);
    expect(bf16ToF32(0x7f80)).toBe(Infinity);
    expect(bf16ToF32(0x7fc0)).toBeNaN();
    expect(bf16ToF32(0x0001)).toBe(2 ** -133);
  });
});

describe('packF16', () => {
  it('packs two halves per u32, element 2i low, odd rows zero-padded', () => {
    const p = packF16(new Float32Array([1, -2, 0.5, 3, 4, 5]), 2, 3);
    expect(Array.from(p)).toEqual([0xc0003c00, 0x00003800, 0x44004200, 0x00004500]);
    expect(Array.from(dequantize('f16', p, 2, 3))).toEqual([1, -2, 0.5, 3, 4, 5]);
  });

  it('round-trips to the f16-rounded values', () => {
    const x = randn(5 * 33, 1);
    const d = dequantize('f16', packF16(x, 5, 33), 5, 33);
    for (let i = 0; i < x.length; i++) expect(d[i]).toBe(f16ToF32(f32ToF16(x[i]!)));
  });
});

/** One Q8_0 block's quants as signed ints. */
function q8(b: QuantBlocks): number[] {
  return Array.from(new Int8Array(b.data.buffer, b.data.byteOffset, b.data.byteLength));
}

describe('Q8_0 (ggml quantize_row_q8_0_ref)', () => {
  it('d = amax / 127, q = roundf(x / d) with ties away from zero', () => {
    const x = new Float32Array(32);
    x.set([127, 2.5, -2.5, 0.49, -126.5, 1.5, -0.5]);
    const b = quantizeQ8_0(x, 1, 32);
    expect(Array.from(b.scales)).toEqual([1]);
    expect(q8(b).slice(0, 8)).toEqual([127, 3, -3, 0, -127, 2, -1, 0]);
  });

  it('stores the scale rounded to f16 but quantizes with the unrounded f32 scale', () => {
    const x = new Float32Array(64);
    for (let j = 0; j < 32; j++) x[j] = j - 16; // amax 16
    x[32] = 1; // second block: amax 1, the rest zero
    const b = quantizeQ8_0(x, 1, 64);
    const d0 = Math.fround(16 / 127);
    expect(b.scales[0]).toBe(f16ToF32(f32ToF16(d0)));
    expect(b.scales[1]).toBe(f16ToF32(f32ToF16(Math.fround(1 / 127))));
    const id = Math.fround(1 / d0);
    const want = Array.from({ length: 32 }, (_, j) => {
      const v = Math.fround((j - 16) * id);
      return v < 0 ? -Math.round(-v) : Math.round(v);
    });
    expect(q8(b).slice(0, 32)).toEqual(want);
    expect(q8(b)[0]).toBe(-127);
    expect(q8(b)[32]).toBe(127);
  });

  it('an all-zero block has d = 0 and zero quants', () => {
    const b = quantizeQ8_0(new Float32Array(32), 1, 32);
    expect(Array.from(b.scales)).toEqual([0]);
    expect(q8(b).every((q) => q === 0)).toBe(true);
  });

  it('dequantizes within d/2 (+ 127 × the f16 rounding of d, ≤ 2^-11 d) of the input', () => {
    const x = randn(4 * 96, 2);
    const b = quantizeQ8_0(x, 4, 96);
    const d = dequantize('q8_0', b, 4, 96);
    for (let i = 0; i < x.length; i++) expect(Math.abs(d[i]! - x[i]!)).toBeLessThanOrEqual((0.5 + 127 * 2 ** -11) * b.scales[i >> 5]! + 1e-7);
  });
});

describe('Q4_0 (ggml quantize_row_q4_0_ref)', () => {
  it('d = signed max-abs / -8, q = min(15, trunc(x/d + 8.5)), byte j = q[j] | q[j+16] << 4', () => {
    const x = new Float32Array(32);
    x[0] = -8; // the max-abs value is negative: d = 1
    x[16] = 7; // 15
    x[1] = 0.5; // 9
    x[17] = -0.5; // trunc(8.0) = 8
    x[2] = 7.9; // 16 clamps to 15
    const b = quantizeQ4_0(x, 1, 32);
    expect(Array.from(b.scales)).toEqual([1]);
    const want = new Array(16).fill(0x88);
    want[0] = 0x00 | (15 << 4);
    want[1] = 9 | (8 << 4);
    want[2] = 15 | (8 << 4);
    expect(Array.from(b.data)).toEqual(want);
    const d = dequantize('q4_0', b, 1, 32);
    expect([d[0], d[16], d[1], d[17], d[2], d[3]]).toEqual([-8, 7, 1, 0, 7, 0]);
  });

  it('a positive max gives a negative scale and maps the max to quant 0', () => {
    const x = new Float32Array(32);
    x[5] = 4;
    x[6] = -1;
    const b = quantizeQ4_0(x, 1, 32);
    expect(b.scales[0]).toBe(-0.5);
    expect(b.data[5]! & 15).toBe(0);
    const d = dequantize('q4_0', b, 1, 32);
    expect([d[5], d[6], d[7]]).toEqual([4, -1, -0]);
  });

  it('dequantizes within d of the input (d/2 plus clamping at +7d)', () => {
    const x = randn(3 * 64, 3);
    const b = quantizeQ4_0(x, 3, 64);
    const d = dequantize('q4_0', b, 3, 64);
    for (let i = 0; i < x.length; i++) expect(Math.abs(d[i]! - x[i]!)).toBeLessThanOrEqual(Math.abs(b.scales[i >> 5]!) * 1.0001);
  });

  it('rejects rows that are not whole blocks', () => {
    expect(() => quantizeQ4_0(new Float32Array(48), 1, 48)).toThrow(/multiple of 32/);
    expect(() => quantizeQ8_0(new Float32Array(40), 2, 20)).toThrow(/multiple of 32/);
  });
});

/** Raw GGUF blocks (f16 d little-endian, then the quant bytes) from {data, scales}. */
function toGguf(b: QuantBlocks, quantBytes: number): Uint8Array {
  const nb = b.scales.length;
  const raw = new Uint8Array(nb * (2 + quantBytes));
  for (let i = 0; i < nb; i++) {
    const h = f32ToF16(b.scales[i]!);
    raw[i * (2 + quantBytes)] = h & 0xff;
    raw[i * (2 + quantBytes) + 1] = h >> 8;
    raw.set(b.data.subarray(i * quantBytes, (i + 1) * quantBytes), i * (2 + quantBytes) + 2);
  }
  return raw;
}

describe('GGUF repacking', () => {
  it('reads a hand-made Q8_0 block', () => {
    const raw = new Uint8Array(34);
    raw.set([0x00, 0x3c]); // d = 1.0
    raw.set([1, 0xff, 127, 0x80, 5], 2); // 1, -1, 127, -128, 5
    const b = repackGgufQ8_0(raw, 1, 32);
    expect(Array.from(b.scales)).toEqual([1]);
    expect(Array.from(dequantize('q8_0', b, 1, 32).slice(0, 6))).toEqual([1, -1, 127, -128, 5, 0]);
  });

  it('reads a hand-made Q4_0 block', () => {
    const raw = new Uint8Array(18).fill(0x88);
    raw.set([0x00, 0x38]); // d = 0.5
    raw[2] = 0x1f; // element 0 = 15 - 8, element 16 = 1 - 8
    const d = dequantize('q4_0', repackGgufQ4_0(raw, 1, 32), 1, 32);
    expect([d[0], d[16], d[1]]).toEqual([3.5, -3.5, 0]);
  });

  it('repack(GGUF bytes of quantize(x)) == quantize(x), several rows and blocks', () => {
    const x = randn(3 * 64, 4);
    const q8b = quantizeQ8_0(x, 3, 64);
    const q4b = quantizeQ4_0(x, 3, 64);
    expect(repackGgufQ8_0(toGguf(q8b, 32), 3, 64)).toEqual(q8b);
    expect(repackGgufQ4_0(toGguf(q4b, 16), 3, 64)).toEqual(q4b);
    expect(() => repackGgufQ8_0(new Uint8Array(33), 1, 32)).toThrow(/bytes/);
  });
});

describe('uploadWeight', () => {
  it.each(['f32', 'f16', 'q8_0', 'q4_0'] as const)('%s: buffers hold the CPU encoding', async (dtype) => {
    const ctx = await gpuFor(TEST_BACKENDS[0]!);
    const [rows, cols] = [3, 64];
    const x = randn(rows * cols, 5);
    const t = uploadWeight(ctx, x, rows, cols, dtype);
    expect(t.shape).toEqual([rows, cols]);
    expect(t.dtype).toBe(dtype);
    const enc = encodeWeight(x, rows, cols, dtype);
    const data = new Uint8Array(await ctx.read(t));
    if ('scales' in enc) {
      expect(Array.from(data)).toEqual(Array.from(enc.data));
      // The device keeps each block's scale as the f16 it is (two halves per word).
      const halves = new Uint16Array(await ctx.read({ buffer: t.scales!, offset: 0, shape: [Math.ceil(enc.scales.length / 2)], dtype: 'u32' }));
      expect(Array.from(halves.subarray(0, enc.scales.length), f16ToF32)).toEqual(Array.from(enc.scales));
      expect(t.scales!.size).toBe(Math.ceil(enc.scales.length / 2) * 4);
    } else {
      expect(Array.from(data)).toEqual(Array.from(new Uint8Array(enc.buffer, enc.byteOffset, enc.byteLength)));
    }
    t.buffer.destroy();
    t.scales?.destroy();
  });
});
