/**
 * Element codecs shared by the format readers and writers: IEEE half and
 * bfloat16 conversions, the ggml tensor-type table (block sizes in elements,
 * block sizes in bytes), CPU dequantizers for the GGUF types we load (F32, F16,
 * BF16, Q8_0, Q4_0, Q4_K, Q6_K) and ggml's reference quantizers for Q8_0/Q4_0.
 *
 * Dequantizers follow ggml's dequantize_row_* exactly, including f32 rounding
 * of intermediate products (Math.fround), so results are bit-identical to
 * llama.cpp's CPU path. All multi-byte fields are little-endian.
 */
import { ModelFormatError, UnsupportedModelError } from '../errors.ts';

// ---- half / bfloat16 -----------------------------------------------------

const f32buf = new Float32Array(1);
const u32buf = new Uint32Array(f32buf.buffer);

/** f32 (a JS number, rounded to f32 first) -> IEEE half bits, round-to-nearest-even; NaN stays NaN. */
export function f32ToF16(v: number): number {
  f32buf[0] = v;
  const x = u32buf[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  const mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 112; // rebias 127 -> 15
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign; // below half the smallest subnormal
    const full = mant | 0x800000;
    const shift = 14 - e;
    let h = full >>> shift;
    const rem = full & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && h & 1)) h++; // a carry into the exponent is still correct
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++; // may round up to inf: correct
  return sign | h;
}

/** IEEE half bits -> number (exact, incl. subnormals, ±inf, NaN). */
export function f16ToF32(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 0x1f) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

/** f32 -> bfloat16 bits as ggml_compute_fp32_to_bf16: round-to-nearest-even, NaN forced quiet. */
export function f32ToBf16(v: number): number {
  f32buf[0] = v;
  const x = u32buf[0]!;
  if ((x & 0x7fffffff) > 0x7f800000) return ((x >>> 16) | 64) & 0xffff;
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

export function bf16ToF32(b: number): number {
  u32buf[0] = (b & 0xffff) << 16;
  return f32buf[0]!;
}

let f16Table: Float32Array | undefined;
/** 65536-entry half -> f32 table (256 KiB), built on first use. */
function halfTable(): Float32Array {
  if (!f16Table) {
    f16Table = new Float32Array(65536);
    for (let i = 0; i < 65536; i++) f16Table[i] = f16ToF32(i);
  }
  return f16Table;
}

/** Little-endian u16 view of `bytes` (copies only if unaligned). */
function u16view(bytes: Uint8Array, n: number): Uint16Array {
  if (bytes.byteOffset % 2 === 0) return new Uint16Array(bytes.buffer, bytes.byteOffset, n);
  return new Uint16Array(bytes.slice(0, n * 2).buffer);
}

/** n halves (2n bytes) -> Float32Array. */
export function decodeF16(bytes: Uint8Array, n = bytes.byteLength >>> 1): Float32Array {
  const t = halfTable();
  const h = u16view(bytes, n);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = t[h[i]!]!;
  return out;
}

/** n bfloat16s (2n bytes) -> Float32Array. */
export function decodeBF16(bytes: Uint8Array, n = bytes.byteLength >>> 1): Float32Array {
  const h = u16view(bytes, n);
  const out = new Uint32Array(n);
  for (let i = 0; i < n; i++) out[i] = h[i]! << 16;
  return new Float32Array(out.buffer);
}

/** n f32s (4n bytes) -> a fresh Float32Array (never aliases `bytes`). */
export function decodeF32(bytes: Uint8Array, n = bytes.byteLength >>> 2): Float32Array {
  return new Float32Array(bytes.slice(0, n * 4).buffer);
}

export function encodeF16(x: ArrayLike<number>): Uint8Array {
  const h = new Uint16Array(x.length);
  for (let i = 0; i < x.length; i++) h[i] = f32ToF16(x[i]!);
  return new Uint8Array(h.buffer);
}

export function encodeBF16(x: ArrayLike<number>): Uint8Array {
  const h = new Uint16Array(x.length);
  for (let i = 0; i < x.length; i++) h[i] = f32ToBf16(x[i]!);
  return new Uint8Array(h.buffer);
}

// ---- ggml type table -----------------------------------------------------

/** ggml tensor types: id, elements per block, bytes per block (ggml.c type_traits). */
export const GGML_TYPES = {
  F32: { id: 0, block: 1, bytes: 4 },
  F16: { id: 1, block: 1, bytes: 2 },
  Q4_0: { id: 2, block: 32, bytes: 18 },
  Q4_1: { id: 3, block: 32, bytes: 20 },
  Q5_0: { id: 6, block: 32, bytes: 22 },
  Q5_1: { id: 7, block: 32, bytes: 24 },
  Q8_0: { id: 8, block: 32, bytes: 34 },
  Q8_1: { id: 9, block: 32, bytes: 36 },
  Q2_K: { id: 10, block: 256, bytes: 84 },
  Q3_K: { id: 11, block: 256, bytes: 110 },
  Q4_K: { id: 12, block: 256, bytes: 144 },
  Q5_K: { id: 13, block: 256, bytes: 176 },
  Q6_K: { id: 14, block: 256, bytes: 210 },
  Q8_K: { id: 15, block: 256, bytes: 292 },
  IQ4_NL: { id: 20, block: 32, bytes: 18 },
  IQ4_XS: { id: 23, block: 256, bytes: 136 },
  I8: { id: 24, block: 1, bytes: 1 },
  I16: { id: 25, block: 1, bytes: 2 },
  I32: { id: 26, block: 1, bytes: 4 },
  I64: { id: 27, block: 1, bytes: 8 },
  F64: { id: 28, block: 1, bytes: 8 },
  BF16: { id: 30, block: 1, bytes: 2 },
} as const;

export type GgmlTypeName = keyof typeof GGML_TYPES;

/** Types `dequantizeGguf` handles. */
export const DEQUANTIZABLE: readonly GgmlTypeName[] = ['F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q3_K', 'Q4_K', 'Q5_K', 'Q6_K', 'IQ4_NL', 'IQ4_XS'];

/** ggml's kvalues_iq4nl: the 16 non-uniform levels of IQ4_NL / IQ4_XS. */
const IQ4NL = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

const BY_ID = new Map<number, GgmlTypeName>(
  Object.entries(GGML_TYPES).map(([k, v]) => [v.id, k as GgmlTypeName]),
);

/** Name for a ggml type id, or undefined when this reader does not know its layout. */
export function ggmlTypeName(id: number): GgmlTypeName | undefined {
  return BY_ID.get(id);
}

/** Bytes of `n` elements of `type`; throws when n is not a whole number of blocks. */
export function ggmlBytes(type: GgmlTypeName, n: number): number {
  const t = GGML_TYPES[type];
  if (n % t.block !== 0) {
    throw new ModelFormatError(`${n} elements is not a whole number of ${type} blocks (${t.block} each)`, { type, n });
  }
  return (n / t.block) * t.bytes;
}

// ---- dequantization ------------------------------------------------------

const fr = Math.fround;

/** 6-bit scale and min of sub-block j (0..7) from Q4_K/Q5_K's 12 packed bytes at `q` (get_scale_min_k4). */
export function scaleMinK4(j: number, b: Uint8Array, q: number): [number, number] {
  if (j < 4) return [b[q + j]! & 63, b[q + j + 4]! & 63];
  return [(b[q + j + 4]! & 0xf) | ((b[q + j - 4]! >> 6) << 4), (b[q + j + 4]! >> 4) | ((b[q + j]! >> 6) << 4)];
}

/**
 * `n` elements of GGUF tensor data of `type` -> Float32Array.
 * `bytes` holds whole blocks, row-major as stored (innermost dimension first in GGUF terms).
 */
export function dequantizeGguf(type: GgmlTypeName | number, bytes: Uint8Array, n: number): Float32Array {
  const name = typeof type === 'number' ? ggmlTypeName(type) : type;
  if (name === undefined || !DEQUANTIZABLE.includes(name)) {
    throw new UnsupportedModelError(
      `cannot dequantize GGUF tensor type ${name ?? `#${type}`}; supported: ${DEQUANTIZABLE.join(', ')}`,
      { type: name ?? type, supported: [...DEQUANTIZABLE] },
    );
  }
  const need = ggmlBytes(name, n);
  if (bytes.byteLength < need) {
    throw new ModelFormatError(`${name} data for ${n} elements needs ${need} bytes, got ${bytes.byteLength}`, {
      type: name,
      n,
    });
  }
  const b = bytes;
  const h16 = (o: number): number => f16ToF32(b[o]! | (b[o + 1]! << 8));
  const y = new Float32Array(n);
  switch (name) {
    case 'F32':
      return decodeF32(b, n);
    case 'F16':
      return decodeF16(b, n);
    case 'BF16':
      return decodeBF16(b, n);
    case 'Q8_0': // block: d f16, qs int8[32]; y = qs * d
      for (let i = 0, o = 0; i < n; i += 32, o += 34) {
        const d = h16(o);
        for (let j = 0; j < 32; j++) y[i + j] = ((b[o + 2 + j]! << 24) >> 24) * d;
      }
      return y;
    case 'Q4_0': // block: d f16, qs u8[16]; byte j = elem j (low) | elem j+16 (high); y = (nibble - 8) * d
      for (let i = 0, o = 0; i < n; i += 32, o += 18) {
        const d = h16(o);
        for (let j = 0; j < 16; j++) {
          const q = b[o + 2 + j]!;
          y[i + j] = ((q & 0xf) - 8) * d;
          y[i + j + 16] = ((q >> 4) - 8) * d;
        }
      }
      return y;
    case 'Q4_K':
      // block (144 B / 256 elems): d f16, dmin f16, scales u8[12] (8 x 6-bit scale + 8 x 6-bit min),
      // qs u8[128]. Per 64 elements: 32 bytes of qs; low nibbles -> sub-block 2k, high -> 2k+1.
      // y = d * sc * q - dmin * m.
      for (let i = 0, o = 0; i < n; i += 256, o += 144) {
        const d = h16(o);
        const dmin = h16(o + 2);
        for (let k = 0; k < 4; k++) {
          const [sc1, m1] = scaleMinK4(2 * k, b, o + 4);
          const [sc2, m2] = scaleMinK4(2 * k + 1, b, o + 4);
          const d1 = fr(d * sc1), mm1 = fr(dmin * m1), d2 = fr(d * sc2), mm2 = fr(dmin * m2);
          const q = o + 16 + 32 * k;
          const out = i + 64 * k;
          for (let l = 0; l < 32; l++) {
            y[out + l] = fr(d1 * (b[q + l]! & 0xf)) - mm1;
            y[out + 32 + l] = fr(d2 * (b[q + l]! >> 4)) - mm2;
          }
        }
      }
      return y;
    case 'Q3_K': {
      // block (110 B / 256 elems): hmask u8[32], qs u8[64] (2 bits each), scales u8[12] (16 x 6-bit,
      // offset 32), d f16. Per 128 elements: 4 shifts of the same 32 qs bytes; hmask bit m clear
      // subtracts 4. y = d * (sc - 32) * q.
      const sc = new Int8Array(16);
      for (let i = 0, o = 0; i < n; i += 256, o += 110) {
        const d = h16(o + 108);
        const s = (k: number): number => b[o + 96 + k]!;
        for (let k = 0; k < 16; k++) {
          const low = k < 8 ? s(k) & 0xf : s(k - 8) >> 4;
          const high = (s(8 + (k % 4)) >> (2 * Math.floor(k / 4))) & 3;
          sc[k] = (low | (high << 4)) - 32;
        }
        let is = 0;
        let m = 1;
        for (let half = 0; half < 2; half++) {
          const q = o + 32 + 32 * half;
          for (let j = 0; j < 4; j++) {
            const shift = 2 * j;
            for (let part = 0; part < 2; part++) {
              const dl = fr(d * sc[is++]!);
              for (let l = 0; l < 16; l++) {
                const ll = l + 16 * part;
                const v = ((b[q + ll]! >> shift) & 3) - (b[o + ll]! & m ? 0 : 4);
                y[i + 128 * half + 32 * j + ll] = dl * v;
              }
            }
            m <<= 1;
          }
        }
      }
      return y;
    }
    case 'IQ4_NL': // block (18 B / 32): d f16, qs u8[16]; byte j = elem j (low) | elem j+16 (high); y = d * kvalues[nibble]
      for (let i = 0, o = 0; i < n; i += 32, o += 18) {
        const d = h16(o);
        for (let j = 0; j < 16; j++) {
          y[i + j] = d * IQ4NL[b[o + 2 + j]! & 0xf]!;
          y[i + j + 16] = d * IQ4NL[b[o + 2 + j]! >> 4]!;
        }
      }
      return y;
    case 'IQ4_XS':
      // block (136 B / 256 elems): d f16, scales_h u16 (2 bits per sub-block), scales_l u8[4] (4 bits
      // per sub-block), qs u8[128]; 8 sub-blocks of 32 as IQ4_NL with scale d * (ls - 32).
      for (let i = 0, o = 0; i < n; i += 256, o += 136) {
        const d = h16(o);
        const sh = b[o + 2]! | (b[o + 3]! << 8);
        for (let ib = 0; ib < 8; ib++) {
          const ls = ((b[o + 4 + (ib >> 1)]! >> (4 * (ib % 2))) & 0xf) | (((sh >> (2 * ib)) & 3) << 4);
          const dl = fr(d * (ls - 32));
          const q = o + 8 + 16 * ib;
          for (let j = 0; j < 16; j++) {
            y[i + 32 * ib + j] = dl * IQ4NL[b[q + j]! & 0xf]!;
            y[i + 32 * ib + j + 16] = dl * IQ4NL[b[q + j]! >> 4]!;
          }
        }
      }
      return y;
    case 'Q5_K':
      // block (176 B / 256 elems): d f16, dmin f16, scales u8[12] (as Q4_K), qh u8[32], qs u8[128].
      // As Q4_K, plus bit (2k) of qh[l] (low nibbles) or bit (2k+1) (high) adding 16 to q.
      for (let i = 0, o = 0; i < n; i += 256, o += 176) {
        const d = h16(o);
        const dmin = h16(o + 2);
        for (let k = 0; k < 4; k++) {
          const [sc1, m1] = scaleMinK4(2 * k, b, o + 4);
          const [sc2, m2] = scaleMinK4(2 * k + 1, b, o + 4);
          const d1 = fr(d * sc1), mm1 = fr(dmin * m1), d2 = fr(d * sc2), mm2 = fr(dmin * m2);
          const q = o + 48 + 32 * k;
          const out = i + 64 * k;
          for (let l = 0; l < 32; l++) {
            const h = b[o + 16 + l]!;
            y[out + l] = fr(d1 * ((b[q + l]! & 0xf) + ((h >> (2 * k)) & 1) * 16)) - mm1;
            y[out + 32 + l] = fr(d2 * ((b[q + l]! >> 4) + ((h >> (2 * k + 1)) & 1) * 16)) - mm2;
          }
        }
      }
      return y;
    case 'Q6_K':
      // block (210 B / 256 elems): ql u8[128] (low 4 bits), qh u8[64] (high 2 bits), scales i8[16], d f16.
      // Two halves of 128; within a half, l in 0..31 yields elements l, l+32, l+64, l+96.
      for (let i = 0, o = 0; i < n; i += 256, o += 210) {
        const d = h16(o + 208);
        for (let half = 0; half < 2; half++) {
          const ql = o + 64 * half;
          const qh = o + 128 + 32 * half;
          const sc = o + 192 + 8 * half;
          const out = i + 128 * half;
          const s = (k: number): number => (b[sc + k]! << 24) >> 24;
          for (let l = 0; l < 32; l++) {
            const is = l >> 4;
            const h = b[qh + l]!;
            const q1 = ((b[ql + l]! & 0xf) | ((h & 3) << 4)) - 32;
            const q2 = ((b[ql + l + 32]! & 0xf) | (((h >> 2) & 3) << 4)) - 32;
            const q3 = ((b[ql + l]! >> 4) | (((h >> 4) & 3) << 4)) - 32;
            const q4 = ((b[ql + l + 32]! >> 4) | (((h >> 6) & 3) << 4)) - 32;
            y[out + l] = fr(d * s(is)) * q1;
            y[out + l + 32] = fr(d * s(is + 2)) * q2;
            y[out + l + 64] = fr(d * s(is + 4)) * q3;
            y[out + l + 96] = fr(d * s(is + 6)) * q4;
          }
        }
      }
      return y;
  }
  throw new UnsupportedModelError(`cannot dequantize ${name}`); // unreachable: DEQUANTIZABLE checked above
}

// ---- reference quantizers (ggml quantize_row_*_ref) -----------------------

/** roundf: half away from zero. */
function roundf(x: number): number {
  return x < 0 ? -Math.floor(-x + 0.5) : Math.floor(x + 0.5);
}

/** Q8_0 blocks for `x` (length a multiple of 32): d = amax/127, q = roundf(x/d). */
export function quantizeQ8_0(x: ArrayLike<number>): Uint8Array {
  const n = x.length;
  ggmlBytes('Q8_0', n);
  const out = new Uint8Array((n / 32) * 34);
  for (let i = 0, o = 0; i < n; i += 32, o += 34) {
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(fr(x[i + j]!)));
    const d = fr(amax / 127);
    const id = d ? fr(1 / d) : 0;
    const h = f32ToF16(d);
    out[o] = h & 0xff;
    out[o + 1] = h >> 8;
    for (let j = 0; j < 32; j++) out[o + 2 + j] = roundf(fr(fr(x[i + j]!) * id)) & 0xff;
  }
  return out;
}

/**
 * Q4_0 blocks for `x` (length a multiple of 32): max = the signed value of largest
 * magnitude (first one on ties), d = max / -8, q = min(15, trunc(x/d + 8.5)).
 */
export function quantizeQ4_0(x: ArrayLike<number>): Uint8Array {
  const n = x.length;
  ggmlBytes('Q4_0', n);
  const out = new Uint8Array((n / 32) * 18);
  for (let i = 0, o = 0; i < n; i += 32, o += 18) {
    let amax = 0;
    let max = 0;
    for (let j = 0; j < 32; j++) {
      const v = fr(x[i + j]!);
      if (amax < Math.abs(v)) {
        amax = Math.abs(v);
        max = v;
      }
    }
    const d = fr(max / -8);
    const id = d ? fr(1 / d) : 0;
    const h = f32ToF16(d);
    out[o] = h & 0xff;
    out[o + 1] = h >> 8;
    for (let j = 0; j < 16; j++) {
      const q0 = Math.min(15, Math.trunc(fr(fr(fr(x[i + j]!) * id) + 8.5)));
      const q1 = Math.min(15, Math.trunc(fr(fr(fr(x[i + 16 + j]!) * id) + 8.5)));
      out[o + 2 + j] = q0 | (q1 << 4);
    }
  }
  return out;
}
