/**
 * Image decoding to 8-bit RGB: PNG and JPEG, sniffed from their magic bytes.
 * Node (and Deno's npm layer): pure-JS `pngjs` and `jpeg-js`, imported lazily
 * by a non-literal specifier so browser bundles never pull them in. Browsers:
 * createImageBitmap + OffscreenCanvas (colour management and alpha
 * premultiplication are the browser's, so pixels may differ by a level or two).
 * Alpha is dropped, not composited, as Pillow's convert("RGB") does.
 */
import { InvalidRequestError } from '../errors.ts';

/** Decoded pixels: data [height, width, 3] u8, row-major. */
export interface RgbImage {
  width: number;
  height: number;
  data: Uint8Array;
}

export type ImageFormat = 'png' | 'jpeg';

/** Largest decoded image accepted, in pixels (a 4 KB PNG can claim 1e9 pixels). */
export const MAX_IMAGE_PIXELS = 40_000_000;

export function sniffFormat(b: Uint8Array): ImageFormat | null {
  if (b.length >= 8 && b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47) return 'png';
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'jpeg';
  return null;
}

const invalid = (msg: string, details?: Record<string, unknown>): InvalidRequestError => new InvalidRequestError('invalid_image', msg, details);

function checkSize(w: number, h: number): void {
  if (!(w > 0 && h > 0)) throw invalid(`the image has no pixels (${w}x${h})`);
  if (w * h > MAX_IMAGE_PIXELS) {
    throw new InvalidRequestError('image_too_large', `the image is ${w}x${h} pixels; the limit is ${MAX_IMAGE_PIXELS} pixels`, { width: w, height: h, limit: MAX_IMAGE_PIXELS });
  }
}

/** RGBA (or other 4-channel) bytes -> RGB, dropping the 4th channel. */
function dropAlpha(rgba: Uint8Array, w: number, h: number): Uint8Array {
  const out = new Uint8Array(w * h * 3);
  for (let i = 0, j = 0; j < out.length; i += 4, j += 3) {
    out[j] = rgba[i]!;
    out[j + 1] = rgba[i + 1]!;
    out[j + 2] = rgba[i + 2]!;
  }
  return out;
}

type NodeDecoders = {
  png: (b: Uint8Array) => { width: number; height: number; data: Uint8Array };
  jpeg: (b: Uint8Array) => { width: number; height: number; data: Uint8Array };
};
let nodeDecoders: Promise<NodeDecoders> | null = null;

async function loadNodeDecoders(): Promise<NodeDecoders> {
  const names = ['pngjs', 'jpeg-js'];
  const [pngMod, jpegMod] = (await Promise.all(names.map((n) => import(/* @vite-ignore */ n)))) as [
    { PNG?: { sync: { read(b: unknown): { width: number; height: number; data: Uint8Array } } }; default?: { PNG: { sync: { read(b: unknown): { width: number; height: number; data: Uint8Array } } } } },
    { decode?: (b: Uint8Array, o: object) => { width: number; height: number; data: Uint8Array }; default?: { decode: (b: Uint8Array, o: object) => { width: number; height: number; data: Uint8Array } } },
  ];
  const PNG = pngMod.PNG ?? pngMod.default!.PNG;
  const jpegDecode = jpegMod.decode ?? jpegMod.default!.decode;
  const BufferCtor = (globalThis as unknown as { Buffer: { from(b: Uint8Array): unknown } }).Buffer;
  return {
    png: (b) => PNG.sync.read(BufferCtor.from(b)),
    jpeg: (b) => jpegDecode(b, { useTArray: true, formatAsRGBA: true, maxResolutionInMP: MAX_IMAGE_PIXELS / 1e6, maxMemoryUsageInMB: 1024 }),
  };
}

/** Width and height from a PNG's IHDR, before decoding (bomb check). */
function pngSize(b: Uint8Array): [number, number] {
  if (b.length < 24) throw invalid('truncated PNG');
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  return [v.getUint32(16), v.getUint32(20)];
}

async function decodeInBrowser(bytes: Uint8Array, format: ImageFormat): Promise<RgbImage> {
  const g = globalThis as unknown as {
    createImageBitmap: (b: Blob) => Promise<{ width: number; height: number; close(): void }>;
    OffscreenCanvas: new (w: number, h: number) => { getContext(k: '2d'): { drawImage(i: unknown, x: number, y: number): void; getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray } } };
  };
  let bmp;
  try {
    bmp = await g.createImageBitmap(new Blob([bytes as BlobPart], { type: format === 'png' ? 'image/png' : 'image/jpeg' }));
  } catch (e) {
    throw invalid(`the ${format} image could not be decoded: ${(e as Error).message}`);
  }
  checkSize(bmp.width, bmp.height);
  const cv = new g.OffscreenCanvas(bmp.width, bmp.height);
  const c2d = cv.getContext('2d');
  c2d.drawImage(bmp, 0, 0);
  const rgba = c2d.getImageData(0, 0, bmp.width, bmp.height).data;
  bmp.close();
  return { width: bmp.width, height: bmp.height, data: dropAlpha(new Uint8Array(rgba.buffer, rgba.byteOffset, rgba.byteLength), bmp.width, bmp.height) };
}

/** Decodes PNG or JPEG bytes to RGB; `invalid_image` / `image_too_large` on bad input. */
export async function decodeImage(bytes: Uint8Array): Promise<RgbImage> {
  const format = sniffFormat(bytes);
  if (!format) throw invalid('unsupported image format: PNG and JPEG are supported');
  if (format === 'png') checkSize(...pngSize(bytes));
  const isNode = typeof (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node === 'string';
  if (!isNode && typeof (globalThis as { createImageBitmap?: unknown }).createImageBitmap === 'function') return decodeInBrowser(bytes, format);
  nodeDecoders ??= loadNodeDecoders();
  const dec = await nodeDecoders;
  let img: { width: number; height: number; data: Uint8Array };
  try {
    img = dec[format](bytes);
  } catch (e) {
    const msg = (e as Error).message ?? String(e);
    if (/maxResolutionInMP|maxMemoryUsage/.test(msg)) throw new InvalidRequestError('image_too_large', `the JPEG is too large: ${msg}`);
    throw invalid(`the ${format} image could not be decoded: ${msg}`);
  }
  checkSize(img.width, img.height);
  if (img.data.length < img.width * img.height * 4) throw invalid(`the ${format} image decoded to too few bytes`);
  return { width: img.width, height: img.height, data: dropAlpha(img.data, img.width, img.height) };
}
