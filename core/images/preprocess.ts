/**
 * CLIP image preprocessing (transformers' CLIPImageProcessor): resize the
 * shortest edge to `size` (the long edge to floor(size * long / short)),
 * center crop to `crop` (offsets floor((h - crop) / 2), floor((w - crop) / 2);
 * zero padding where the image is smaller), times `rescale` (1/255), then
 * (v - mean) / std per channel, in float32. Output: pixels [3, crop, crop] f32 (CHW).
 *
 * Resampling is Pillow's, as transformers runs it (it resizes through a PIL
 * image): separable convolution, horizontal pass then vertical pass, each
 * rounded to u8; the filter is stretched by the scale when downscaling
 * (antialiasing); coefficients are normalised and fixed-point with 22 bits.
 * `bicubic` (Pillow's BICUBIC, a = -0.5, resample 3: CLIP's) and `bilinear`
 * (resample 2) are supported; with the same filter the pixels match Pillow's
 * exactly (test/models/llava.test.ts checks them against Pillow's output).
 */
import { ModelFormatError } from '../errors.ts';
import type { RgbImage } from './decode.ts';

export interface PreprocessConfig {
  /** Target of the shortest edge, pixels. */
  size: number;
  /** Square crop side, pixels (= the vision tower's image_size). */
  crop: number;
  resample: 'bicubic' | 'bilinear';
  rescale: number;
  mean: [number, number, number];
  std: [number, number, number];
}

export const CLIP_MEAN: [number, number, number] = [0.48145466, 0.4578275, 0.40821073];
export const CLIP_STD: [number, number, number] = [0.26862954, 0.26130258, 0.27577711];

/** The defaults of CLIPImageProcessor for a tower of `imageSize`. */
export function clipDefaults(imageSize: number): PreprocessConfig {
  return { size: imageSize, crop: imageSize, resample: 'bicubic', rescale: 1 / 255, mean: CLIP_MEAN, std: CLIP_STD };
}

/** preprocessor_config.json (CLIPImageProcessor fields) over the CLIP defaults; null = defaults. */
export function parsePreprocessorConfig(json: unknown, imageSize: number): PreprocessConfig {
  const d = clipDefaults(imageSize);
  if (json === null || json === undefined) return d;
  const c = json as Record<string, unknown>;
  const bad = (k: string): never => {
    throw new ModelFormatError(`preprocessor_config.json: unsupported ${k} ${JSON.stringify(c[k])}`);
  };
  const size = c.size as Record<string, number> | number | undefined;
  const crop = c.crop_size as Record<string, number> | number | undefined;
  const out = { ...d };
  if (typeof size === 'number') out.size = size;
  else if (size && typeof size.shortest_edge === 'number') out.size = size.shortest_edge;
  else if (size && typeof size.height === 'number' && size.height === size.width) out.size = size.height;
  else if (size !== undefined) bad('size');
  if (typeof crop === 'number') out.crop = crop;
  else if (crop && typeof crop.height === 'number' && crop.height === crop.width) out.crop = crop.height;
  else if (crop !== undefined) bad('crop_size');
  if (c.do_center_crop === false) out.crop = out.size;
  if (out.crop !== imageSize) throw new ModelFormatError(`preprocessor_config.json: crop ${out.crop} != vision image_size ${imageSize}`);
  if (c.resample !== undefined) out.resample = c.resample === 3 ? 'bicubic' : c.resample === 2 ? 'bilinear' : bad('resample');
  if (c.do_rescale !== false && typeof c.rescale_factor === 'number') out.rescale = c.rescale_factor;
  if (c.do_rescale === false) out.rescale = 1;
  const triple = (k: string, v: unknown): [number, number, number] | undefined =>
    v === undefined ? undefined : Array.isArray(v) && v.length === 3 && v.every((x) => typeof x === 'number') ? (v as [number, number, number]) : bad(k);
  if (c.do_normalize === false) {
    out.mean = [0, 0, 0];
    out.std = [1, 1, 1];
  } else {
    out.mean = triple('image_mean', c.image_mean) ?? out.mean;
    out.std = triple('image_std', c.image_std) ?? out.std;
  }
  return out;
}

const PRECISION_BITS = 22; // Pillow: 32 - 8 - 2

function bicubic(x: number): number {
  const a = -0.5;
  x = Math.abs(x);
  if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
  return 0;
}

function bilinear(x: number): number {
  x = Math.abs(x);
  return x < 1 ? 1 - x : 0;
}

/** Pillow's precompute_coeffs + normalize_coeffs_8bpc: per output pixel, first source index, count and fixed-point weights. */
function coeffs(inSize: number, outSize: number, kind: PreprocessConfig['resample']): { bounds: Int32Array; k: Int32Array; ksize: number } {
  const [filter, support0] = kind === 'bicubic' ? [bicubic, 2] : [bilinear, 1];
  const scale = inSize / outSize;
  const filterscale = Math.max(scale, 1);
  const support = support0 * filterscale;
  const ksize = Math.ceil(support) * 2 + 1;
  const bounds = new Int32Array(outSize * 2);
  const k = new Int32Array(outSize * ksize);
  const w = new Float64Array(ksize);
  for (let xx = 0; xx < outSize; xx++) {
    const center = (xx + 0.5) * scale;
    const ss = 1 / filterscale;
    const xmin = Math.max(Math.trunc(center - support + 0.5), 0);
    const xmax = Math.min(Math.trunc(center + support + 0.5), inSize) - xmin;
    let ww = 0;
    for (let x = 0; x < xmax; x++) {
      w[x] = filter((x + xmin - center + 0.5) * ss);
      ww += w[x]!;
    }
    for (let x = 0; x < xmax; x++) {
      const v = ww !== 0 ? w[x]! / ww : w[x]!;
      k[xx * ksize + x] = v < 0 ? Math.trunc(-0.5 + v * (1 << PRECISION_BITS)) : Math.trunc(0.5 + v * (1 << PRECISION_BITS));
    }
    bounds[xx * 2] = xmin;
    bounds[xx * 2 + 1] = xmax;
  }
  return { bounds, k, ksize };
}

const clip8 = (ss: number): number => Math.min(255, Math.max(0, Math.floor(ss / (1 << PRECISION_BITS))));

/** Resizes RGB u8 [h, w, 3] to [outH, outW, 3] as Pillow's Image.resize (horizontal pass, then vertical). */
export function resizeRgb(img: RgbImage, outW: number, outH: number, kind: PreprocessConfig['resample']): RgbImage {
  let { width: w, height: h, data } = img;
  const half = 1 << (PRECISION_BITS - 1);
  if (outW !== w) {
    const { bounds, k, ksize } = coeffs(w, outW, kind);
    const out = new Uint8Array(outW * h * 3);
    for (let y = 0; y < h; y++) {
      for (let xx = 0; xx < outW; xx++) {
        const xmin = bounds[xx * 2]!;
        const n = bounds[xx * 2 + 1]!;
        let s0 = half, s1 = half, s2 = half;
        for (let x = 0; x < n; x++) {
          const c = k[xx * ksize + x]!;
          const i = (y * w + xmin + x) * 3;
          s0 += data[i]! * c;
          s1 += data[i + 1]! * c;
          s2 += data[i + 2]! * c;
        }
        const o = (y * outW + xx) * 3;
        out[o] = clip8(s0);
        out[o + 1] = clip8(s1);
        out[o + 2] = clip8(s2);
      }
    }
    data = out;
    w = outW;
  }
  if (outH !== h) {
    const { bounds, k, ksize } = coeffs(h, outH, kind);
    const out = new Uint8Array(w * outH * 3);
    for (let yy = 0; yy < outH; yy++) {
      const ymin = bounds[yy * 2]!;
      const n = bounds[yy * 2 + 1]!;
      for (let x = 0; x < w; x++) {
        let s0 = half, s1 = half, s2 = half;
        for (let y = 0; y < n; y++) {
          const c = k[yy * ksize + y]!;
          const i = ((ymin + y) * w + x) * 3;
          s0 += data[i]! * c;
          s1 += data[i + 1]! * c;
          s2 += data[i + 2]! * c;
        }
        const o = (yy * w + x) * 3;
        out[o] = clip8(s0);
        out[o + 1] = clip8(s1);
        out[o + 2] = clip8(s2);
      }
    }
    data = out;
    h = outH;
  }
  return { width: w, height: h, data };
}

/** Output size (width, height) of the shortest-edge resize, as transformers' get_resize_output_image_size. */
export function shortestEdgeSize(w: number, h: number, size: number): [number, number] {
  const [short, long] = w <= h ? [w, h] : [h, w];
  const newLong = Math.trunc((size * long) / short);
  return w <= h ? [size, newLong] : [newLong, size];
}

/** The full pipeline: RGB u8 image -> pixels [3, crop, crop] f32. */
export function preprocessImage(img: RgbImage, cfg: PreprocessConfig): Float32Array {
  const [rw, rh] = shortestEdgeSize(img.width, img.height, cfg.size);
  const r = resizeRgb(img, rw, rh, cfg.resample);
  const C = cfg.crop;
  const top = Math.floor((rh - C) / 2);
  const left = Math.floor((rw - C) / 2);
  const out = new Float32Array(3 * C * C);
  const f = Math.fround;
  const mean = cfg.mean.map(f);
  const std = cfg.std.map(f);
  for (let y = 0; y < C; y++) {
    for (let x = 0; x < C; x++) {
      const sy = y + top;
      const sx = x + left;
      const inside = sy >= 0 && sy < rh && sx >= 0 && sx < rw;
      for (let c = 0; c < 3; c++) {
        const u8 = inside ? r.data[(sy * rw + sx) * 3 + c]! : 0;
        out[c * C * C + y * C + x] = f(f(f(u8 * cfg.rescale) - mean[c]!) / std[c]!);
      }
    }
  }
  return out;
}
