/**
 * The dequantizers of the GGUF types that load without a kernel (stored as f16 on the
 * device): Q3_K, IQ4_NL and IQ4_XS, on hand-built blocks whose values follow from ggml's
 * block layouts by hand (scales packed in their 6-bit / split forms, the high-mask bit, the
 * non-uniform IQ4 levels).
 */
import { describe, expect, it } from 'vitest';
import { dequantizeGguf, f32ToF16 } from '../../core/formats/gguf_quants.ts';

const IQ4NL = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];
const half = (v: number): [number, number] => {
  const h = f32ToF16(v);
  return [h & 0xff, h >> 8];
};

describe('low-bit GGUF dequantizers', () => {
  it('IQ4_NL: d times the level of each nibble', () => {
    const b = new Uint8Array(18);
    [b[0], b[1]] = half(0.5);
    for (let j = 0; j < 16; j++) b[2 + j] = j | ((15 - j) << 4);
    const y = dequantizeGguf('IQ4_NL', b, 32);
    for (let j = 0; j < 16; j++) {
      expect(y[j]).toBe(0.5 * IQ4NL[j]!);
      expect(y[j + 16]).toBe(0.5 * IQ4NL[15 - j]!);
    }
  });

  it('IQ4_XS: 6-bit sub-block scales split over scales_l / scales_h, offset 32', () => {
    const b = new Uint8Array(136);
    [b[0], b[1]] = half(0.25);
    // Sub-block ib gets ls = 33 + ib: low 4 bits in scales_l, high 2 bits in scales_h.
    let sh = 0;
    for (let ib = 0; ib < 8; ib++) {
      const ls = 33 + ib;
      b[4 + (ib >> 1)]! |= (ls & 0xf) << (4 * (ib % 2));
      sh |= (ls >> 4) << (2 * ib);
    }
    b[2] = sh & 0xff;
    b[3] = sh >> 8;
    for (let i = 0; i < 128; i++) b[8 + i] = (i % 16) | (((i + 3) % 16) << 4);
    const y = dequantizeGguf('IQ4_XS', b, 256);
    for (let ib = 0; ib < 8; ib++) {
      for (let j = 0; j < 16; j++) {
        const q = 16 * ib + j;
        expect(y[32 * ib + j]).toBe(0.25 * (1 + ib) * IQ4NL[q % 16]!);
        expect(y[32 * ib + j + 16]).toBe(0.25 * (1 + ib) * IQ4NL[(q + 3) % 16]!);
      }
    }
  });

  it('Q3_K: 2-bit quants, hmask bit clear subtracts 4, 16 packed 6-bit scales offset 32', () => {
    const b = new Uint8Array(110);
    [b[108], b[109]] = half(1);
    // Scale k = 32 + (k + 1): low nibble in bytes 0..7 (k < 8 low, k >= 8 high nibble of k - 8),
    // high 2 bits in byte 8 + k % 4 at bit 2 * floor(k / 4).
    for (let k = 0; k < 16; k++) {
      const v = 33 + k;
      if (k < 8) b[96 + k]! |= v & 0xf;
      else b[96 + k - 8]! |= (v & 0xf) << 4;
      b[96 + 8 + (k % 4)]! |= (v >> 4) << (2 * Math.floor(k / 4));
    }
    for (let l = 0; l < 64; l++) b[32 + l] = 0b11100100; // shift 0: 0, 2: 1, 4: 2, 6: 3
    for (let l = 0; l < 32; l++) b[l] = l % 2 ? 0xff : 0x00; // odd l: high bit set for every m
    const y = dequantizeGguf('Q3_K', b, 256);
    for (let half2 = 0; half2 < 2; half2++) {
      for (let j = 0; j < 4; j++) {
        for (let ll = 0; ll < 32; ll++) {
          const scale = 1 + 8 * half2 + 2 * j + (ll >= 16 ? 1 : 0);
          const q = j - (ll % 2 ? 0 : 4);
          expect(y[128 * half2 + 32 * j + ll]).toBe(scale * q);
        }
      }
    }
  });
});
