/**
 * Element codecs: half/bfloat16 conversions, ggml dequantizers checked against
 * blocks packed by hand in this file (expected values derived from the block
 * layout, not from the code under test), and ggml's reference quantizers.
 */
import { describe, expect, it } from 'vitest';
import { ModelFormatError, UnsupportedModelError } from '../../core/errors.ts';
import {
  bf16ToF32,
  decodeF16,
  dequantizeGguf,
  encodeF16,
  f16ToF32,
  f32ToBf16,
  f32ToF16,
  GGML_TYPES,
  quantizeQ4_0,
  quantizeQ8_0,
} from '../../core/formats/gguf_quants.ts';

/** Deterministic PRNG (mulberry32); local so these tests never load the GPU helpers. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('f16', () => {
  it('encodes edge values exactly', () => {
    expect(f32ToF16(0)).toBe(0x0000);
    expect(f32ToF16(-0)).toBe(0x8000);
    expect(f32ToF16(1)).toBe(0x3c00);
    expect(f32ToF16(-2)).toBe(0xc000);
    expect(f32ToF16(65504)).toBe(0x7bff); // max normal
    expect(f32ToF16(65519)).toBe(0x7bff); // rounds down
    expect(f32ToF16(65520)).toBe(0x7c00); // tie rounds to even = overflow to inf
    expect(f32ToF16(1e9)).toBe(0x7c00);
    expect(f32ToF16(-Infinity)).toBe(0xfc00);
    expect(f32ToF16(2 ** -14)).toBe(0x0400); // min normal
    expect(f32ToF16(2 ** -24)).toBe(0x0001); // min subnormal
    expect(f32ToF16(2 ** -25)).toBe(0x0000); // tie -> even (0)
    expect(f32ToF16(3 * 2 ** -26)).toBe(0x0001); // above the tie
    expect(f32ToF16(1023 * 2 ** -24)).toBe(0x03ff); // max subnormal
    expect(f32ToF16(1 + 2 ** -11)).toBe(0x3c00); // tie -> even
    expect(f32ToF16(1 + 3 * 2 ** -11)).toBe(0x3c02); // tie -> even (up)
    const nan = f32ToF16(NaN);
    expect(nan & 0x7c00).toBe(0x7c00);
    expect(nan & 0x3ff).not.toBe(0);
  });

  it('decodes edge values exactly', () => {
    expect(f16ToF32(0x0001)).toBe(2 ** -24);
    expect(f16ToF32(0x03ff)).toBe(1023 * 2 ** -24);
    expect(f16ToF32(0x0400)).toBe(2 ** -14);
    expect(f16ToF32(0x7bff)).toBe(65504);
    expect(f16ToF32(0x7c00)).toBe(Infinity);
    expect(f16ToF32(0xfc00)).toBe(-Infinity);
    expect(Number.isNaN(f16ToF32(0x7e00))).toBe(true);
    expect(Object.is(f16ToF32(0x8000), -0)).toBe(true);
    expect(f16ToF32(0x3555)).toBeCloseTo(1 / 3, 3);
  });

  it('round-trips every non-NaN half, and the table decoder agrees', () => {
    const all = new Uint16Array(65536);
    for (let h = 0; h < 65536; h++) all[h] = h;
    const dec = decodeF16(new Uint8Array(all.buffer));
    const bad: number[] = [];
    for (let h = 0; h < 65536; h++) {
      const v = f16ToF32(h);
      const ok = Number.isNaN(v) ? Number.isNaN(dec[h]!) : f32ToF16(v) === h && Object.is(dec[h], v);
      if (!ok) bad.push(h);
    }
    expect(bad).toEqual([]);
  });

  it('decodes from unaligned byte offsets', () => {
    const bytes = new Uint8Array(7);
    bytes.set(encodeF16([1.5, -2]), 1);
    expect([...decodeF16(bytes.subarray(1, 5))]).toEqual([1.5, -2]);
  });
});

describe('bf16', () => {
  it('rounds to nearest even and keeps NaN quiet', () => {
    expect(f32ToBf16(1)).toBe(0x3f80);
    expect(f32ToBf16(1 + 2 ** -8)).toBe(0x3f80); // tie -> even
    expect(f32ToBf16(1 + 3 * 2 ** -8)).toBe(0x3f82); // tie -> even (up)
    expect(f32ToBf16(-Infinity)).toBe(0xff80);
    expect(Number.isNaN(bf16ToF32(f32ToBf16(NaN)))).toBe(true);
    expect(bf16ToF32(0x4049)).toBe(3.140625);
  });
});

/** Writes a half into bytes at o. */
function putHalf(b: Uint8Array, o: number, v: number): void {
  const h = f32ToF16(v);
  b[o] = h & 0xff;
  b[o + 1] = h >> 8;
}

describe('Q4_K', () => {
  /**
   * Packs one Q4_K block from its parts following the block layout: d, dmin (f16),
   * 12 bytes holding eight 6-bit scales sc[] and mins m[] (j < 4: low 6 bits of byte j
   * and j+4; j >= 4: low/high nibble of byte j+4 hold the low 4 bits of sc/m, and the
   * top 2 bits go to bits 6..7 of byte j-4 (sc) and byte j (m)), then 128 bytes of
   * nibbles: for chunk k (64 elements) byte 32k+l holds element 64k+l (low) and
   * 64k+32+l (high).
   */
  function packQ4K(d: number, dmin: number, sc: number[], m: number[], q: number[]): Uint8Array {
    const b = new Uint8Array(144);
    putHalf(b, 0, d);
    putHalf(b, 2, dmin);
    const s = b.subarray(4, 16);
    for (let j = 0; j < 4; j++) {
      s[j] = sc[j]!;
      s[j + 4] = m[j]!;
    }
    for (let j = 4; j < 8; j++) {
      s[j + 4] = (sc[j]! & 15) | ((m[j]! & 15) << 4);
      s[j - 4]! |= (sc[j]! >> 4) << 6;
      s[j]! |= (m[j]! >> 4) << 6;
    }
    for (let e = 0; e < 256; e++) {
      const k = e >> 6;
      const r = e & 63;
      const byte = 16 + 32 * k + (r & 31);
      b[byte]! |= r < 32 ? q[e]! : q[e]! << 4;
    }
    return b;
  }

  it('dequantizes a hand-built block with every scale/min bit in use', () => {
    const d = 0.5;
    const dmin = 0.25;
    const sc = [1, 63, 17, 32, 48, 5, 63, 33]; // j >= 4 entries use the 2 high bits
    const m = [0, 7, 63, 40, 50, 16, 1, 63];
    const q = Array.from({ length: 256 }, (_, e) => (e * 7 + (e >> 3)) % 16);
    const y = dequantizeGguf('Q4_K', packQ4K(d, dmin, sc, m, q), 256);
    for (let e = 0; e < 256; e++) {
      const sub = 2 * (e >> 6) + ((e & 63) >= 32 ? 1 : 0);
      expect(y[e]).toBe(d * sc[sub]! * q[e]! - dmin * m[sub]!);
    }
  });

  it('dequantizes multi-block rows with random parts', () => {
    const r = rng(7);
    const blocks: Uint8Array[] = [];
    const expected: number[] = [];
    for (let blk = 0; blk < 3; blk++) {
      const d = f16ToF32(f32ToF16(r() * 0.01));
      const dmin = f16ToF32(f32ToF16(r() * 0.01));
      const sc = Array.from({ length: 8 }, () => Math.floor(r() * 64));
      const m = Array.from({ length: 8 }, () => Math.floor(r() * 64));
      const q = Array.from({ length: 256 }, () => Math.floor(r() * 16));
      blocks.push(packQ4K(d, dmin, sc, m, q));
      for (let e = 0; e < 256; e++) {
        const sub = 2 * (e >> 6) + ((e & 63) >= 32 ? 1 : 0);
        const f = Math.fround;
        expected.push(f(f(f(d * sc[sub]!) * q[e]!) - f(dmin * m[sub]!)));
      }
    }
    const all = new Uint8Array(144 * 3);
    blocks.forEach((b, i) => all.set(b, i * 144));
    expect([...dequantizeGguf('Q4_K', all, 768)]).toEqual(expected);
  });
});

describe('Q6_K', () => {
  /**
   * Packs a Q6_K block: per 128-element half h, element 128h + 32g + l (g in 0..3,
   * l in 0..31) has its low 4 bits in ql[64h + l + 32*(g&1)] (low nibble for g < 2,
   * high for g >= 2) and its high 2 bits at bit 2g of qh[32h + l]; its scale is
   * scales[8h + 2g + l/16]; then d (f16) at byte 208. Value = d * scale * (q - 32).
   */
  function packQ6K(d: number, scales: number[], q: number[]): Uint8Array {
    const b = new Uint8Array(210);
    for (let e = 0; e < 256; e++) {
      const h = e >> 7;
      const g = (e & 127) >> 5;
      const l = e & 31;
      const qlIdx = 64 * h + l + 32 * (g & 1);
      b[qlIdx]! |= g < 2 ? q[e]! & 15 : (q[e]! & 15) << 4;
      b[128 + 32 * h + l]! |= (q[e]! >> 4) << (2 * g);
    }
    for (let i = 0; i < 16; i++) b[192 + i] = scales[i]! & 0xff;
    putHalf(b, 208, d);
    return b;
  }

  it('dequantizes a hand-built block (negative scales, all 6 bits)', () => {
    const d = 0.125;
    const scales = [1, -1, 127, -128, 5, -7, 64, 3, 2, -3, 100, -100, 9, 11, -13, 33];
    const q = Array.from({ length: 256 }, (_, e) => (e * 13 + 5) % 64);
    const y = dequantizeGguf('Q6_K', packQ6K(d, scales, q), 256);
    for (let e = 0; e < 256; e++) {
      const h = e >> 7;
      const g = (e & 127) >> 5;
      const l = e & 31;
      const s = scales[8 * h + 2 * g + (l >> 4)]!;
      expect(y[e]).toBe(d * s * (q[e]! - 32));
    }
  });
});

describe('Q8_0 / Q4_0 reference quantizers', () => {
  it('Q8_0: d = amax/127, q = round half away from zero', () => {
    const x = new Float32Array(32);
    x[0] = 127; // amax -> d = 1 exactly
    x[1] = 2.5;
    x[2] = -2.5;
    x[3] = -127;
    x[4] = 0.49;
    const b = quantizeQ8_0(x);
    expect(b.length).toBe(34);
    expect(b[0]! | (b[1]! << 8)).toBe(0x3c00); // d = 1.0 as f16
    const q = new Int8Array(b.buffer, 2, 32);
    expect([...q.subarray(0, 5)]).toEqual([127, 3, -3, -127, 0]);
    expect([...dequantizeGguf('Q8_0', b, 32).subarray(0, 5)]).toEqual([127, 3, -3, -127, 0]);
  });

  it('Q4_0: d = max/-8 with max the signed largest magnitude; nibble j | j+16', () => {
    const x = new Float32Array(32);
    x[0] = -8; // largest magnitude, negative -> d = 1
    x[1] = 7.6; // trunc(16.1) clamps to 15
    x[2] = 3.4; // trunc(11.9) = 11
    x[3] = -0.6; // trunc(7.9) = 7
    x[16] = 2; // trunc(10.5) = 10, high nibble of byte 0
    x[17] = -3.5; // trunc(5) = 5
    const b = quantizeQ4_0(x);
    expect(b.length).toBe(18);
    expect(b[0]! | (b[1]! << 8)).toBe(0x3c00);
    expect(b[2]).toBe(0 | (10 << 4));
    expect(b[3]).toBe(15 | (5 << 4));
    expect(b[4]! & 15).toBe(11);
    expect(b[5]! & 15).toBe(7);
    expect(b[6]).toBe(8 | (8 << 4)); // zeros -> 8
    const y = dequantizeGguf('Q4_0', b, 32);
    expect([y[0], y[1], y[2], y[3], y[16], y[17]]).toEqual([-8, 7, 3, -1, 2, -3]);
  });

  it('positive largest value gives a negative scale; all-zero block gives d = 0', () => {
    const x = new Float32Array(64);
    x[5] = 4;
    x[6] = -3;
    const b = quantizeQ4_0(x);
    expect(f16ToF32(b[0]! | (b[1]! << 8))).toBe(-0.5);
    expect(b[18]! | (b[19]! << 8)).toBe(0x8000); // 0 / -8 = -0 in C too
    const y = dequantizeGguf('Q4_0', b, 64);
    expect(y[5]).toBe(4);
    expect(y[6]).toBe(-3);
    expect([...y.subarray(32)].every((v) => v === 0)).toBe(true);
  });

  it('random data quantizes within half a step', () => {
    const r = rng(3);
    const x = Float32Array.from({ length: 32 * 20 }, () => (r() - 0.5) * 4);
    for (const [type, q, levels] of [['Q8_0', quantizeQ8_0, 127], ['Q4_0', quantizeQ4_0, 8]] as const) {
      const y = dequantizeGguf(type, q(x), x.length);
      for (let blk = 0; blk < 20; blk++) {
        const xs = x.subarray(blk * 32, blk * 32 + 32);
        const step = Math.max(...xs.map(Math.abs)) / levels;
        // half a step (a whole one for Q4_0, whose top level 7 clamps values of the sign
        // opposite to max), plus the f16 rounding of d (relative 2^-11) times up to `levels`.
        const tol = step * ((type === 'Q4_0' ? 1 : 0.5) + levels * 2 ** -11) + 1e-7;
        for (let j = 0; j < 32; j++) expect(Math.abs(y[blk * 32 + j]! - xs[j]!)).toBeLessThanOrEqual(tol);
      }
    }
  });

  it('rejects partial blocks and unsupported types with typed errors', () => {
    expect(() => quantizeQ8_0(new Float32Array(31))).toThrow(ModelFormatError);
    expect(() => dequantizeGguf('Q4_K', new Uint8Array(100), 256)).toThrow(/needs 144 bytes/);
    expect(() => dequantizeGguf('Q2_K', new Uint8Array(84), 256)).toThrow(UnsupportedModelError);
    expect(() => dequantizeGguf(99, new Uint8Array(4), 1)).toThrow(/supported: F32, F16, BF16, Q8_0, Q4_0, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS/);
  });

  it('block sizes match ggml', () => {
    expect(GGML_TYPES.Q8_0).toEqual({ id: 8, block: 32, bytes: 34 });
    expect(GGML_TYPES.Q4_0).toEqual({ id: 2, block: 32, bytes: 18 });
    expect(GGML_TYPES.Q4_K).toEqual({ id: 12, block: 256, bytes: 144 });
    expect(GGML_TYPES.Q6_K).toEqual({ id: 14, block: 256, bytes: 210 });
    expect(GGML_TYPES.BF16.id).toBe(30);
  });
});
