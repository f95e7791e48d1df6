/**
 * K-quant writers: Q4_K, Q5_K and Q6_K blocks from f32 rows, following ggml's reference
 * quantizers (quantize_row_q4_K_ref / q5_K_ref with make_qkx2_quants, quantize_row_q6_K_ref
 * with make_qx_quants):
 * per 256-element super-block, a scale (and for Q4_K a min) per sub-block found by a small
 * weighted least-squares search, the sub-block scales themselves quantized to 6 / 8 bits
 * against one f16 super-scale (and for Q4_K / Q5_K a min). Arithmetic is f32 (Math.fround) as in C; results match
 * llama.cpp's closely but are not promised to be byte-identical (dequantize with
 * gguf_quants.ts's dequantizeGguf, which is). Row lengths must be multiples of 256; see
 * kquantFallback for what a writer does with the others.
 */
import { f16ToF32, f32ToF16, ggmlBytes } from './gguf_quants.ts';

const fr = Math.fround;
const QK_K = 256;

/**
 * ggml's nearest_int: add 1.5 * 2^23 in f32, whose rounding is to the nearest integer, ties to
 * even (|v| < 2^22, as in ggml).
 */
function nearestInt(v: number): number {
  return fr(v + 12582912) - 12582912;
}

/**
 * make_qkx2_quants: levels L[0..n) in 0..nmax and (scale, min) with x ≈ scale * L - min,
 * minimizing the weighted squared error over a few candidate scales.
 */
function makeQkx2(x: Float32Array, w: Float32Array, nmax: number, L: Uint8Array, aux: Uint8Array, rmin: number, rdelta: number, nstep: number, out: Float32Array): void {
  const n = x.length;
  let min = x[0]!;
  let max = x[0]!;
  let sumW = w[0]!;
  let sumX = fr(sumW * x[0]!);
  for (let i = 1; i < n; i++) {
    if (x[i]! < min) min = x[i]!;
    if (x[i]! > max) max = x[i]!;
    sumW = fr(sumW + w[i]!);
    sumX = fr(sumX + fr(w[i]! * x[i]!));
  }
  if (min > 0) min = 0;
  if (max === min) {
    L.fill(0);
    out[0] = 0;
    out[1] = -min;
    return;
  }
  // x - min in f32, as ggml computes it in each candidate (recomputed when a candidate moves min).
  const xm = XM;
  for (let i = 0; i < n; i++) xm[i] = fr(x[i]! - min);
  let iscale = fr(nmax / fr(max - min));
  let scale = fr(1 / iscale);
  let best = 0;
  for (let i = 0; i < n; i++) {
    const l = Math.max(0, Math.min(nmax, nearestInt(fr(iscale * xm[i]!))));
    L[i] = l;
    const diff = fr(fr(fr(scale * l) + min) - x[i]!);
    best = fr(best + fr(w[i]! * fr(diff * diff)));
  }
  for (let is = 0; is <= nstep; is++) {
    iscale = fr(fr(fr(rmin + fr(rdelta * is)) + nmax) / fr(max - min));
    let sumL = 0;
    let sumL2 = 0;
    let sumXL = 0;
    for (let i = 0; i < n; i++) {
      const l = Math.max(0, Math.min(nmax, nearestInt(fr(iscale * xm[i]!))));
      aux[i] = l;
      const wl = fr(w[i]! * l);
      sumL = fr(sumL + wl);
      sumL2 = fr(sumL2 + fr(wl * l));
      sumXL = fr(sumXL + fr(wl * x[i]!));
    }
    const D = fr(fr(sumW * sumL2) - fr(sumL * sumL));
    if (D > 0) {
      let thisScale = fr(fr(fr(sumW * sumXL) - fr(sumX * sumL)) / D);
      let thisMin = fr(fr(fr(sumL2 * sumX) - fr(sumL * sumXL)) / D);
      if (thisMin > 0) {
        thisMin = 0;
        thisScale = fr(sumXL / sumL2);
      }
      let mad = 0;
      for (let i = 0; i < n; i++) {
        const diff = fr(fr(fr(thisScale * aux[i]!) + thisMin) - x[i]!);
        mad = fr(mad + fr(w[i]! * fr(diff * diff)));
      }
      if (mad < best) {
        L.set(aux);
        best = mad;
        scale = thisScale;
        if (thisMin !== min) {
          min = thisMin;
          for (let i = 0; i < n; i++) xm[i] = fr(x[i]! - min);
        }
      }
    }
  }
  out[0] = scale;
  out[1] = -min;
}
const XM = new Float32Array(32);

/** Q4_K blocks (144 bytes per 256 elements) for `x`, a whole number of super-blocks. */
export function quantizeQ4_K(x: ArrayLike<number>): Uint8Array {
  return quantizeScaleMin(x, 4);
}

/** Q5_K blocks (176 bytes per 256 elements) for `x`, a whole number of super-blocks. */
export function quantizeQ5_K(x: ArrayLike<number>): Uint8Array {
  return quantizeScaleMin(x, 5);
}

/**
 * The scale-and-min K-quants: per 256-element super-block, eight 32-element sub-blocks with
 * levels in 0..2^bits - 1 and a (scale, min) each, quantized to 6 bits against the f16 d and
 * dmin. Bytes: d, dmin, 12 packed scale/min bytes, then for Q5_K 32 bytes of fifth bits (bit
 * 2k of byte l: element l of sub-block 2k; bit 2k + 1: element l of sub-block 2k + 1), then
 * 128 bytes of low nibbles (sub-block 2k in the low nibbles of bytes 32k.., 2k + 1 in the high).
 * The level search follows ggml: Q4_K weighs each element by its sub-block's RMS plus |x| and
 * searches 20 steps from -1; Q5_K by the super-block's RMS plus |x|, 15 steps from -0.5.
 */
function quantizeScaleMin(x: ArrayLike<number>, bits: 4 | 5): Uint8Array {
  const type = bits === 4 ? 'Q4_K' : 'Q5_K';
  const blockBytes = bits === 4 ? 144 : 176;
  const nmax = (1 << bits) - 1;
  const qsAt = bits === 4 ? 16 : 48; // the low nibbles, after d, dmin, scales (and qh)
  const n = x.length;
  ggmlBytes(type, n);
  const out = new Uint8Array((n / QK_K) * blockBytes);
  const L = new Uint8Array(QK_K);
  const aux = new Uint8Array(32);
  const sub = new Float32Array(32);
  const w = new Float32Array(32);
  const scales = new Float32Array(8);
  const mins = new Float32Array(8);
  const sm = new Float32Array(2);
  const Ls = Array.from({ length: 8 }, (_, j) => L.subarray(32 * j, 32 * j + 32));
  for (let b = 0, o = 0; b < n; b += QK_K, o += blockBytes) {
    let maxScale = 0;
    let maxMin = 0;
    let blockSum2 = 0;
    for (let l = 0; l < QK_K; l++) blockSum2 = fr(blockSum2 + fr(fr(x[b + l]!) * fr(x[b + l]!)));
    const blockAv = fr(Math.sqrt(fr(blockSum2 / QK_K)));
    for (let j = 0; j < 8; j++) {
      let sum2 = 0;
      for (let l = 0; l < 32; l++) {
        sub[l] = fr(x[b + 32 * j + l]!);
        sum2 = fr(sum2 + fr(sub[l]! * sub[l]!));
      }
      const av = bits === 4 ? fr(Math.sqrt(fr(sum2 / 32))) : blockAv;
      for (let l = 0; l < 32; l++) w[l] = fr(av + Math.abs(sub[l]!));
      if (bits === 4) makeQkx2(sub, w, nmax, Ls[j]!, aux, -1, 0.1, 20, sm);
      else makeQkx2(sub, w, nmax, Ls[j]!, aux, -0.5, 0.1, 15, sm);
      const s = sm[0]!;
      const m = sm[1]!;
      scales[j] = s;
      mins[j] = m;
      if (s > maxScale) maxScale = s;
      if (m > maxMin) maxMin = m;
    }
    const invScale = maxScale > 0 ? fr(63 / maxScale) : 0;
    const invMin = maxMin > 0 ? fr(63 / maxMin) : 0;
    const q = o + 4; // 12 packed scale bytes
    for (let j = 0; j < 8; j++) {
      const ls = Math.min(63, nearestInt(fr(invScale * scales[j]!)));
      const lm = Math.min(63, nearestInt(fr(invMin * mins[j]!)));
      if (j < 4) {
        out[q + j] = ls;
        out[q + j + 4] = lm;
      } else {
        out[q + j + 4] = (ls & 0xf) | ((lm & 0xf) << 4);
        out[q + j - 4]! |= (ls >> 4) << 6;
        out[q + j]! |= (lm >> 4) << 6;
      }
    }
    const dh = f32ToF16(fr(maxScale / 63));
    const mh = f32ToF16(fr(maxMin / 63));
    out[o] = dh & 0xff;
    out[o + 1] = dh >> 8;
    out[o + 2] = mh & 0xff;
    out[o + 3] = mh >> 8;
    const d = f16ToF32(dh);
    const dmin = f16ToF32(mh);
    for (let j = 0; j < 8; j++) {
      const [sc, m] = scaleMinAt(out, q, j);
      const dj = fr(d * sc);
      if (!dj) continue;
      const dm = fr(dmin * m);
      for (let l = 0; l < 32; l++) L[32 * j + l] = Math.max(0, Math.min(nmax, nearestInt(fr(fr(fr(x[b + 32 * j + l]!) + dm) / dj))));
    }
    // 64 elements per 32 bytes: low nibbles sub-block 2k, high nibbles 2k + 1 (fifth bits in qh).
    for (let k = 0; k < 4; k++) {
      for (let l = 0; l < 32; l++) {
        const lo = L[64 * k + l]!;
        const hi = L[64 * k + 32 + l]!;
        out[o + qsAt + 32 * k + l] = (lo & 0xf) | ((hi & 0xf) << 4);
        if (bits === 5) out[o + 16 + l]! |= ((lo >> 4) << (2 * k)) | ((hi >> 4) << (2 * k + 1));
      }
    }
  }
  return out;
}

/** get_scale_min_k4 on the bytes being written. */
function scaleMinAt(b: Uint8Array, q: number, j: number): [number, number] {
  if (j < 4) return [b[q + j]! & 63, b[q + j + 4]! & 63];
  return [(b[q + j + 4]! & 0xf) | ((b[q + j - 4]! >> 6) << 4), (b[q + j + 4]! >> 4) | ((b[q + j]! >> 6) << 4)];
}

/**
 * make_qx_quants (rmse_type 1): signed levels L in -nmax..nmax-1 (stored + nmax) and the scale
 * with x ≈ scale * L, weights x², searched over 19 candidate inverse scales.
 */
function makeQx(x: Float32Array, nmax: number, L: Uint8Array): number {
  let max = 0;
  let amax = 0;
  for (let i = 0; i < x.length; i++) {
    const ax = Math.abs(x[i]!);
    if (ax > amax) {
      amax = ax;
      max = x[i]!;
    }
  }
  if (amax < 1e-15) {
    L.fill(nmax);
    return 0;
  }
  // Candidate inverse scales: -nmax / max, then -(nmax + 0.1 is) / max for is = -9..9, is != 0.
  let scale = 0;
  let best = 0;
  for (let is = -10; is <= 9; is++) {
    if (is === 0) continue;
    const iscale = is === -10 ? fr(-nmax / max) : fr(-fr(nmax + fr(0.1 * is)) / max);
    let sumlx = 0;
    let suml2 = 0;
    for (let i = 0; i < x.length; i++) {
      const xi = x[i]!;
      const l = Math.max(-nmax, Math.min(nmax - 1, nearestInt(fr(iscale * xi))));
      const w = fr(xi * xi);
      sumlx = fr(sumlx + fr(fr(w * xi) * l));
      suml2 = fr(suml2 + fr(fr(w * l) * l));
    }
    // The first candidate is taken as is (ggml stores its levels unconditionally).
    if (is === -10 || (suml2 > 0 && fr(sumlx * sumlx) > fr(best * suml2))) {
      for (let i = 0; i < x.length; i++) L[i] = nmax + Math.max(-nmax, Math.min(nmax - 1, nearestInt(fr(iscale * x[i]!))));
      scale = suml2 ? fr(sumlx / suml2) : 0;
      best = fr(scale * sumlx);
    }
  }
  return scale;
}

/** Q6_K blocks (210 bytes per 256 elements) for `x`, a whole number of super-blocks. */
export function quantizeQ6_K(x: ArrayLike<number>): Uint8Array {
  const n = x.length;
  ggmlBytes('Q6_K', n);
  const out = new Uint8Array((n / QK_K) * 210);
  const L = new Uint8Array(QK_K);
  const sub = new Float32Array(16);
  const scales = new Float32Array(16);
  for (let b = 0, o = 0; b < n; b += QK_K, o += 210) {
    let maxScale = 0;
    let maxAbs = 0;
    for (let ib = 0; ib < 16; ib++) {
      for (let l = 0; l < 16; l++) sub[l] = fr(x[b + 16 * ib + l]!);
      const s = makeQx(sub, 32, L.subarray(16 * ib, 16 * ib + 16));
      scales[ib] = s;
      if (Math.abs(s) > maxAbs) {
        maxAbs = Math.abs(s);
        maxScale = s;
      }
    }
    if (maxAbs < 1e-15) continue; // an all-zero block: zero bytes decode to zeros
    const iscale = fr(-128 / maxScale);
    const dh = f32ToF16(fr(1 / iscale));
    out[o + 208] = dh & 0xff;
    out[o + 209] = dh >> 8;
    const d = f16ToF32(dh);
    for (let ib = 0; ib < 16; ib++) out[o + 192 + ib] = Math.min(127, nearestInt(fr(iscale * scales[ib]!))) & 0xff;
    for (let j = 0; j < 16; j++) {
      const sc = (out[o + 192 + j]! << 24) >> 24;
      const dj = fr(d * sc);
      if (!dj) continue;
      for (let l = 0; l < 16; l++) L[16 * j + l] = 32 + Math.max(-32, Math.min(31, nearestInt(fr(fr(x[b + 16 * j + l]!) / dj))));
    }
    for (let half = 0; half < 2; half++) {
      const ql = o + 64 * half;
      const qh = o + 128 + 32 * half;
      const j = 128 * half;
      for (let l = 0; l < 32; l++) {
        const [q1, q2, q3, q4] = [L[j + l]!, L[j + l + 32]!, L[j + l + 64]!, L[j + l + 96]!];
        out[ql + l] = (q1 & 0xf) | ((q3 & 0xf) << 4);
        out[ql + l + 32] = (q2 & 0xf) | ((q4 & 0xf) << 4);
        out[qh + l] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
      }
    }
  }
  return out;
}

/** K-quant types the writer produces. */
export type KQuantWriteType = 'Q4_K' | 'Q5_K' | 'Q6_K';

/**
 * The type a K-quant writer stores a 2-D tensor as: `want` when its rows (`cols` elements)
 * are whole 256-element super-blocks, else a fallback with 32-element blocks. llama.cpp
 * (llama_tensor_get_type) falls back Q4_K -> Q5_0 and Q6_K -> Q8_0; Weft has matmul kernels
 * for Q8_0 and Q4_0 but not Q5_0 (it would be dequantized to f16 at load), so both fall back
 * to Q8_0: at least as accurate as the K-quant asked for, 8.5 bits per weight. Rows that are
 * not whole 32-element blocks either stay F16, as llama.cpp keeps them.
 */
export function kquantFallback(want: KQuantWriteType, cols: number): KQuantWriteType | 'Q8_0' | 'F16' {
  if (cols % QK_K === 0) return want;
  return cols % 32 === 0 ? 'Q8_0' : 'F16';
}

/** Quantizes `x` to one of the writer's K-quant types. */
export function quantizeKQuant(type: KQuantWriteType, x: ArrayLike<number>): Uint8Array {
  return type === 'Q4_K' ? quantizeQ4_K(x) : type === 'Q5_K' ? quantizeQ5_K(x) : quantizeQ6_K(x);
}
