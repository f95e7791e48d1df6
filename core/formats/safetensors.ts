/**
 * safetensors reader/writer, single-file and sharded (HF `model.safetensors.index.json`).
 *
 * Layout: 8-byte little-endian header length N, N bytes of JSON header
 * `{ name: { dtype, shape, data_offsets: [begin, end] }, __metadata__?: {string: string} }`,
 * then the data section; offsets are bytes relative to the data section start.
 * Every header field is validated before use (dtype known, shape of non-negative
 * integers, byte size = numel * itemsize, in bounds, no two tensors overlapping),
 * so a malformed or hostile file raises ModelFormatError instead of reading
 * garbage. Only the header is read eagerly; tensor data is read per tensor.
 */
import { ModelFormatError, UnsupportedModelError } from '../errors.ts';
import { bf16ToF32, decodeBF16, decodeF16, decodeF32, f32ToF16 } from './gguf_quants.ts';
import { normalizeModelPath, readJson, type ByteSource, type ModelSource } from './source.ts';

/** Bytes per element of each supported dtype. */
export const SAFETENSORS_DTYPES = { F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I8: 1, U8: 1 } as const;
export type SafetensorsDType = keyof typeof SAFETENSORS_DTYPES;

export interface SafetensorsTensorInfo {
  dtype: SafetensorsDType;
  /** PyTorch order, outermost first. */
  shape: number[];
  /** Absolute byte range in the file, [begin, end). */
  begin: number;
  end: number;
}

export interface SafetensorsFile {
  tensors: Map<string, SafetensorsTensorInfo>;
  metadata: Record<string, string>;
  /** Raw little-endian bytes of one tensor. */
  read(name: string): Promise<Uint8Array>;
  /** `length` bytes of one tensor's data from byte `offset`. */
  readPart(name: string, offset: number, length: number): Promise<Uint8Array>;
}

/** Largest header accepted (the reference implementation's limit). */
const MAX_HEADER = 100_000_000;

function fail(msg: string, details?: Record<string, unknown>): never {
  throw new ModelFormatError(`safetensors: ${msg}`, details);
}

/** Parses and validates a header against a file of `fileSize` bytes whose data starts at `dataStart`. */
export function parseSafetensorsHeader(
  json: unknown,
  dataStart: number,
  fileSize: number,
): { tensors: Map<string, SafetensorsTensorInfo>; metadata: Record<string, string> } {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) fail('header is not a JSON object');
  const tensors = new Map<string, SafetensorsTensorInfo>();
  let metadata: Record<string, string> = {};
  const dataSize = fileSize - dataStart;
  for (const [name, v] of Object.entries(json as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (typeof v !== 'object' || v === null || Array.isArray(v)) fail('__metadata__ must be an object');
      for (const [k, s] of Object.entries(v)) {
        if (typeof s !== 'string') fail(`__metadata__.${k} must be a string, got ${typeof s}`);
      }
      metadata = { ...(v as Record<string, string>) };
      continue;
    }
    const e = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown } | null;
    if (typeof e !== 'object' || e === null) fail(`tensor ${name}: entry is not an object`, { tensor: name });
    const dtype = e.dtype;
    if (typeof dtype !== 'string' || !(dtype in SAFETENSORS_DTYPES)) {
      fail(`tensor ${name}: unknown dtype ${JSON.stringify(dtype)}; supported: ${Object.keys(SAFETENSORS_DTYPES).join(', ')}`, {
        tensor: name,
        dtype,
      });
    }
    const shape = e.shape;
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      fail(`tensor ${name}: shape must be an array of non-negative integers, got ${JSON.stringify(shape)}`, {
        tensor: name,
      });
    }
    const offs = e.data_offsets;
    if (!Array.isArray(offs) || offs.length !== 2 || !offs.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      fail(`tensor ${name}: data_offsets must be [begin, end] byte offsets, got ${JSON.stringify(offs)}`, {
        tensor: name,
      });
    }
    const [b, en] = offs as [number, number];
    const numel = (shape as number[]).reduce((a, d) => a * d, 1);
    const want = numel * SAFETENSORS_DTYPES[dtype as SafetensorsDType];
    if (en < b || en - b !== want) {
      fail(`tensor ${name}: data_offsets [${b}, ${en}] span ${en - b} bytes but ${dtype}${JSON.stringify(shape)} needs ${want}`, {
        tensor: name,
      });
    }
    if (en > dataSize) {
      fail(`tensor ${name}: data_offsets end ${en} is past the data section (${dataSize} bytes); file truncated?`, {
        tensor: name,
      });
    }
    tensors.set(name, {
      dtype: dtype as SafetensorsDType,
      shape: [...(shape as number[])],
      begin: dataStart + b,
      end: dataStart + en,
    });
  }
  const sorted = [...tensors.entries()].filter(([, t]) => t.end > t.begin).sort((x, y) => x[1].begin - y[1].begin);
  for (let i = 1; i < sorted.length; i++) {
    const [pn, p] = sorted[i - 1]!;
    const [cn, c] = sorted[i]!;
    if (c.begin < p.end) fail(`tensors ${pn} and ${cn} overlap`, { tensors: [pn, cn] });
  }
  return { tensors, metadata };
}

/** Opens a .safetensors file: reads and validates the header only. */
export async function openSafetensors(src: ByteSource, what = 'file'): Promise<SafetensorsFile> {
  if (src.size < 8) fail(`${what} is ${src.size} bytes, too short for a header`);
  const lenBytes = await src.read(0, 8);
  const dv = new DataView(lenBytes.buffer, lenBytes.byteOffset, 8);
  const n = Number(dv.getBigUint64(0, true));
  if (n < 2 || n > MAX_HEADER) fail(`${what}: header length ${n} is implausible (not a safetensors file?)`, { n });
  if (8 + n > src.size) fail(`${what}: header length ${n} runs past the end of the ${src.size}-byte file`, { n });
  const text = new TextDecoder('utf-8', { fatal: false }).decode(await src.read(8, n));
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    fail(`${what}: header is not valid JSON (${(e as Error).message})`);
  }
  let parsed: ReturnType<typeof parseSafetensorsHeader>;
  try {
    parsed = parseSafetensorsHeader(json, 8 + n, src.size);
  } catch (e) {
    // Name the file: in a sharded checkpoint the tensor alone does not say which shard is bad.
    if (e instanceof ModelFormatError) throw new ModelFormatError(`${e.message} (in ${what})`, { ...(e.details ?? {}), file: what });
    throw e;
  }
  const { tensors, metadata } = parsed;
  return {
    tensors,
    metadata,
    async read(name) {
      const t = tensors.get(name);
      if (!t) throw new ModelFormatError(`safetensors: no tensor ${name} in ${what}`, { tensor: name });
      return src.read(t.begin, t.end - t.begin);
    },
    async readPart(name, offset, length) {
      const t = tensors.get(name);
      if (!t) throw new ModelFormatError(`safetensors: no tensor ${name} in ${what}`, { tensor: name });
      if (offset < 0 || length < 0 || offset + length > t.end - t.begin) throw new ModelFormatError(`safetensors: bytes ${offset}+${length} are outside tensor ${name} in ${what}`, { tensor: name });
      return src.read(t.begin + offset, length);
    },
  };
}

/** A checkpoint of one or more safetensors files, as one name -> tensor map. */
export interface SafetensorsModel {
  tensors: Map<string, { file: string; info: SafetensorsTensorInfo }>;
  /** __metadata__ of the first shard merged with the index's `metadata`. */
  metadata: Record<string, unknown>;
  files: string[];
  read(name: string): Promise<Uint8Array>;
  /** `length` bytes of a tensor's data from byte `offset` (streaming conversions). */
  readPart(name: string, offset: number, length: number): Promise<Uint8Array>;
}

export const SAFETENSORS_INDEX = 'model.safetensors.index.json';

/**
 * Opens `model.safetensors`, or every shard listed in `model.safetensors.index.json`.
 * Each name in the index's weight_map must exist in the shard it points to.
 */
export async function openSafetensorsModel(ms: ModelSource): Promise<SafetensorsModel> {
  const tensors = new Map<string, { file: string; info: SafetensorsTensorInfo }>();
  const opened = new Map<string, SafetensorsFile>();
  let metadata: Record<string, unknown> = {};
  const openFile = async (f: string): Promise<SafetensorsFile> => {
    let st = opened.get(f);
    if (!st) opened.set(f, (st = await openSafetensors(await ms.open(f), f)));
    return st;
  };
  if (await ms.exists(SAFETENSORS_INDEX)) {
    const idx = (await readJson(ms, SAFETENSORS_INDEX)) as { weight_map?: unknown; metadata?: unknown } | null;
    const wm = idx?.weight_map;
    if (typeof wm !== 'object' || wm === null || Array.isArray(wm)) {
      fail(`${SAFETENSORS_INDEX} has no weight_map object`);
    }
    for (const [name, f] of Object.entries(wm)) {
      if (typeof f !== 'string') fail(`${SAFETENSORS_INDEX}: weight_map.${name} is not a file name`);
      const file = normalizeModelPath(f);
      const info = (await openFile(file)).tensors.get(name);
      if (!info) fail(`${SAFETENSORS_INDEX} maps ${name} to ${file}, which does not contain it`, { tensor: name, file });
      tensors.set(name, { file, info });
    }
    const first = opened.values().next().value as SafetensorsFile | undefined;
    metadata = { ...(first?.metadata ?? {}), ...((idx?.metadata as Record<string, unknown>) ?? {}) };
  } else if (await ms.exists('model.safetensors')) {
    const st = await openFile('model.safetensors');
    for (const [name, info] of st.tensors) tensors.set(name, { file: 'model.safetensors', info });
    metadata = { ...st.metadata };
  } else {
    throw new ModelFormatError(`${ms.name}: no model.safetensors or ${SAFETENSORS_INDEX}`, { model: ms.name });
  }
  return {
    tensors,
    metadata,
    files: [...opened.keys()],
    async read(name) {
      const t = tensors.get(name);
      if (!t) throw new ModelFormatError(`safetensors: ${ms.name} has no tensor ${name}`, { tensor: name });
      return opened.get(t.file)!.read(name);
    },
    async readPart(name, offset, length) {
      const t = tensors.get(name);
      if (!t) throw new ModelFormatError(`safetensors: ${ms.name} has no tensor ${name}`, { tensor: name });
      return opened.get(t.file)!.readPart(name, offset, length);
    },
  };
}

/** Float tensor bytes -> Float32Array (F32 / F16 / BF16 / F64); always a fresh array. */
export function toFloat32(dtype: SafetensorsDType, bytes: Uint8Array): Float32Array {
  switch (dtype) {
    case 'F32':
      return decodeF32(bytes);
    case 'F16':
      return decodeF16(bytes);
    case 'BF16':
      return decodeBF16(bytes);
    case 'F64': {
      const d = new Float64Array(bytes.slice().buffer);
      return Float32Array.from(d);
    }
    default:
      throw new UnsupportedModelError(`cannot convert ${dtype} tensor to float32; expected F32, F16, BF16 or F64`, {
        dtype,
      });
  }
}

let bf16Lut: Uint16Array | null = null;
/** bf16 bits -> f16 bits, all 65,536 of them (round to nearest even; beyond ±65504: ±inf, as f32ToF16). */
function bf16ToF16Table(): Uint16Array {
  if (!bf16Lut) {
    bf16Lut = new Uint16Array(65536);
    for (let b = 0; b < 65536; b++) bf16Lut[b] = f32ToF16(bf16ToF32(b));
  }
  return bf16Lut;
}

/**
 * F16 / BF16 tensor bytes -> IEEE half bits (a fresh array), without an f32 detour: a bf16
 * weight becomes the nearest f16 (bf16 has 8 mantissa bits, f16 10, so every bf16 value in
 * f16's range is exact; below 2^-14 it is rounded to an f16 subnormal, above 65504 it is inf —
 * real checkpoints keep their matrices far inside that range).
 */
export function toHalves(dtype: 'F16' | 'BF16', bytes: Uint8Array): Uint16Array {
  const n = bytes.byteLength >>> 1;
  const src = bytes.byteOffset % 2 === 0 ? new Uint16Array(bytes.buffer, bytes.byteOffset, n) : new Uint16Array(bytes.slice().buffer, 0, n);
  if (dtype === 'F16') return src.slice();
  const lut = bf16ToF16Table();
  const out = new Uint16Array(n);
  for (let i = 0; i < n; i++) out[i] = lut[src[i]!]!;
  return out;
}

export interface SafetensorsTensorInput {
  name: string;
  dtype: SafetensorsDType;
  shape: number[];
  /** Raw little-endian element bytes (any typed array is taken as its bytes). */
  data: ArrayBufferView;
}

/** Serializes tensors (in the given order) to a .safetensors file; header padded with spaces to 8 bytes. */
export function writeSafetensors(tensors: SafetensorsTensorInput[], metadata?: Record<string, string>): Uint8Array {
  const header: Record<string, unknown> = {};
  if (metadata && Object.keys(metadata).length) header.__metadata__ = metadata;
  let off = 0;
  const parts: Uint8Array[] = [];
  for (const t of tensors) {
    const bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    const want = t.shape.reduce((a, d) => a * d, 1) * SAFETENSORS_DTYPES[t.dtype];
    if (bytes.byteLength !== want) {
      throw new ModelFormatError(`writeSafetensors: ${t.name} has ${bytes.byteLength} bytes, ${t.dtype}${JSON.stringify(t.shape)} needs ${want}`);
    }
    if (t.name in header) throw new ModelFormatError(`writeSafetensors: duplicate tensor ${t.name}`);
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [off, off + want] };
    parts.push(bytes);
    off += want;
  }
  let json = new TextEncoder().encode(JSON.stringify(header));
  const padded = Math.ceil(json.byteLength / 8) * 8;
  if (padded !== json.byteLength) {
    const p = new Uint8Array(padded).fill(0x20);
    p.set(json);
    json = p;
  }
  const out = new Uint8Array(8 + json.byteLength + off);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.byteLength), true);
  out.set(json, 8);
  let o = 8 + json.byteLength;
  for (const p of parts) {
    out.set(p, o);
    o += p.byteLength;
  }
  return out;
}
