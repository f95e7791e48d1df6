/**
 * GGUF (v2/v3) reader: header, metadata, tensor directory, tensor data; plus
 * the mapping from llama.cpp conventions to ours (DecoderConfig, HF tensor
 * names, q/k row order).
 *
 * File layout (all little-endian): "GGUF", u32 version, u64 tensor count,
 * u64 metadata count, metadata KVs (string key, u32 value type, value),
 * tensor infos (name, u32 n_dims, u64 dims[n_dims] innermost first, u32 ggml
 * type, u64 offset relative to the data section), padding to `alignment`
 * (general.alignment, default 32), then tensor data. The header is parsed
 * synchronously from a growing prefix of the file, so only the header and the
 * tensors actually asked for are ever read. All counts and lengths are checked
 * against the file size before anything is allocated.
 */
import { ModelFormatError, UnsupportedModelError } from '../errors.ts';
import { dequantizeGguf, GGML_TYPES, ggmlBytes, ggmlTypeName, type GgmlTypeName } from './gguf_quants.ts';
import type { DecoderConfig } from './hf_config.ts';
import type { ByteSource } from './source.ts';

export type GgufValue = number | bigint | boolean | string | GgufValue[];

/** GGUF value type names by type id ('array' is followed by its element type: "array<string>"). */
export const GGUF_VALUE_TYPES = ['u8', 'i8', 'u16', 'i16', 'u32', 'i32', 'f32', 'bool', 'string', 'array', 'u64', 'i64', 'f64'] as const;
const SCALAR_BYTES = [1, 1, 2, 2, 4, 4, 4, 1, 8, 0, 8, 8, 8]; // minimum encoded size per type id

export interface GgufTensorInfo {
  name: string;
  type: GgmlTypeName;
  /** Dimensions as stored: innermost (contiguous) first. */
  dims: number[];
  /** PyTorch order, outermost first (dims reversed): a [rows, cols] matrix has dims [cols, rows]. */
  shape: number[];
  numel: number;
  /** Offset relative to the data section, as stored. */
  offset: number;
  /** Absolute byte range in the file, [begin, end). */
  begin: number;
  end: number;
}

export interface GgufFile {
  version: number;
  metadata: Map<string, GgufValue>;
  /** Value type of each metadata key, e.g. "u32", "array<string>". */
  metadataTypes: Map<string, string>;
  tensors: Map<string, GgufTensorInfo>;
  alignment: number;
  /** Absolute byte offset of the data section. */
  dataOffset: number;
  /** Raw bytes (whole blocks) of one tensor. */
  readTensor(name: string): Promise<Uint8Array>;
  /** One tensor dequantized to f32, in GGUF row order (no q/k unpermute). */
  readTensorF32(name: string): Promise<Float32Array>;
}

const MAGIC = 0x46554747; // "GGUF" little-endian
class NeedMore extends Error {}
const small = (v: bigint): number | bigint =>
  v <= Number.MAX_SAFE_INTEGER && v >= Number.MIN_SAFE_INTEGER ? Number(v) : v;

/** Synchronous little-endian cursor over a file prefix `buf` of a `fileSize`-byte file. */
class Cursor {
  pos = 0;
  private readonly dv: DataView;
  private readonly dec = new TextDecoder('utf-8');
  constructor(
    private readonly buf: Uint8Array,
    private readonly fileSize: number,
  ) {
    this.dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  /** Throws NeedMore if the prefix is too short, ModelFormatError if the file is. */
  need(n: number, what: string): void {
    if (this.pos + n <= this.buf.byteLength) return;
    if (this.pos + n > this.fileSize) {
      throw new ModelFormatError(`GGUF truncated: ${what} needs bytes up to ${this.pos + n}, file has ${this.fileSize}`, {
        offset: this.pos,
      });
    }
    throw new NeedMore();
  }
  u8(): number { this.need(1, 'u8'); return this.dv.getUint8(this.pos++); }
  u32(): number { this.need(4, 'u32'); const v = this.dv.getUint32(this.pos, true); this.pos += 4; return v; }
  /** u64 as a number when it fits 2^53, else bigint. */
  /** u64 / i64 as a number when exactly representable (|v| <= 2^53 - 1), else bigint. */
  u64(): number | bigint { this.need(8, 'u64'); this.pos += 8; return small(this.dv.getBigUint64(this.pos - 8, true)); }
  i64(): number | bigint { this.need(8, 'i64'); this.pos += 8; return small(this.dv.getBigInt64(this.pos - 8, true)); }
  /** A u64 count/size that must be a usable number no larger than `max`. */
  size(what: string, max: number): number {
    const v = this.u64();
    if (typeof v !== 'number' || v > max) throw new ModelFormatError(`GGUF ${what} ${v} is impossible for a ${this.fileSize}-byte file`);
    return v;
  }
  str(what: string): string {
    const n = this.size(`${what} length`, this.fileSize);
    this.need(n, what);
    const s = this.dec.decode(this.buf.subarray(this.pos, this.pos + n));
    this.pos += n;
    return s;
  }
  scalar(t: number, what: string): GgufValue {
    const dv = this.dv;
    const at = (n: number): number => { this.need(n, what); const p = this.pos; this.pos += n; return p; };
    switch (t) {
      case 0: return dv.getUint8(at(1));
      case 1: return dv.getInt8(at(1));
      case 2: return dv.getUint16(at(2), true);
      case 3: return dv.getInt16(at(2), true);
      case 4: return dv.getUint32(at(4), true);
      case 5: return dv.getInt32(at(4), true);
      case 6: return dv.getFloat32(at(4), true);
      case 7: {
        const b = dv.getUint8(at(1));
        if (b > 1) throw new ModelFormatError(`GGUF ${what}: bool byte ${b} is not 0 or 1`);
        return b === 1;
      }
      case 8: return this.str(what);
      case 10: return this.u64();
      case 11: return this.i64();
      case 12: return dv.getFloat64(at(8), true);
    }
    throw new ModelFormatError(`GGUF ${what}: unknown value type ${t}`, { valueType: t });
  }
  /** A typed value; returns [value, type name]. */
  value(t: number, what: string, depth = 0): [GgufValue, string] {
    if (t !== 9) return [this.scalar(t, what), GGUF_VALUE_TYPES[t] ?? `#${t}`];
    if (depth > 4) throw new ModelFormatError(`GGUF ${what}: arrays nested too deeply`);
    const et = this.u32();
    if (et >= SCALAR_BYTES.length) throw new ModelFormatError(`GGUF ${what}: unknown array element type ${et}`);
    const n = this.size(`${what} array length`, this.fileSize / Math.max(1, SCALAR_BYTES[et]!));
    const out: GgufValue[] = new Array<GgufValue>(n);
    let et2 = GGUF_VALUE_TYPES[et] as string;
    for (let i = 0; i < n; i++) {
      const [v, tn] = this.value(et, what, depth + 1);
      out[i] = v;
      et2 = tn;
    }
    return [out, `array<${et2}>`];
  }
}

interface Header {
  version: number;
  metadata: Map<string, GgufValue>;
  metadataTypes: Map<string, string>;
  tensors: Map<string, GgufTensorInfo>;
  alignment: number;
  dataOffset: number;
}

function parseHeader(buf: Uint8Array, fileSize: number): Header {
  const c = new Cursor(buf, fileSize);
  const magic = c.u32();
  if (magic !== MAGIC) {
    const m = [...buf.subarray(0, 4)].map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : '.')).join('');
    throw new ModelFormatError(`not a GGUF file: magic is "${m}", expected "GGUF"`, { magic });
  }
  const version = c.u32();
  if (version !== 2 && version !== 3) {
    const hint = version > 0xffff ? ' (big-endian GGUF files are not supported)' : version === 1 ? ' (GGUF v1 is obsolete; re-convert the model)' : '';
    throw new ModelFormatError(`unsupported GGUF version ${version}; supported: 2, 3${hint}`, { version });
  }
  const nTensors = c.size('tensor count', fileSize / 24);
  const nKv = c.size('metadata count', fileSize / 13);
  const metadata = new Map<string, GgufValue>();
  const metadataTypes = new Map<string, string>();
  for (let i = 0; i < nKv; i++) {
    const key = c.str('metadata key');
    const [v, t] = c.value(c.u32(), key);
    if (metadata.has(key)) throw new ModelFormatError(`GGUF metadata key ${key} appears twice`, { key });
    metadata.set(key, v);
    metadataTypes.set(key, t);
  }
  let alignment = 32;
  if (metadata.has('general.alignment')) {
    const a = metadata.get('general.alignment');
    if (metadataTypes.get('general.alignment') !== 'u32' || typeof a !== 'number' || a === 0 || (a & (a - 1)) !== 0) {
      throw new ModelFormatError(`GGUF general.alignment must be a power-of-two u32, got ${String(a)}`);
    }
    alignment = a;
  }
  const raw: Omit<GgufTensorInfo, 'begin' | 'end'>[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < nTensors; i++) {
    const name = c.str('tensor name');
    const nd = c.u32();
    if (nd < 1 || nd > 4) throw new ModelFormatError(`GGUF tensor ${name}: ${nd} dimensions (1..4 allowed)`, { tensor: name });
    const dims: number[] = [];
    let numel = 1;
    for (let d = 0; d < nd; d++) {
      const v = c.size(`tensor ${name} dimension`, Number.MAX_SAFE_INTEGER);
      dims.push(v);
      numel *= v;
    }
    if (!Number.isSafeInteger(numel)) throw new ModelFormatError(`GGUF tensor ${name}: element count overflows`, { tensor: name });
    const tid = c.u32();
    const type = ggmlTypeName(tid);
    if (!type) {
      const known = Object.keys(GGML_TYPES).join(', ');
      throw new UnsupportedModelError(
        `GGUF tensor ${name} has ggml type #${tid}, which this reader does not support; supported: ${known}`,
        { tensor: name, typeId: tid },
      );
    }
    if (dims[0]! % GGML_TYPES[type].block !== 0) {
      throw new ModelFormatError(`GGUF tensor ${name}: row length ${dims[0]} is not a multiple of the ${type} block size`, { tensor: name });
    }
    const offset = c.size(`tensor ${name} offset`, fileSize);
    if (offset % alignment !== 0) throw new ModelFormatError(`GGUF tensor ${name}: offset ${offset} is not ${alignment}-aligned`, { tensor: name });
    if (seen.has(name)) throw new ModelFormatError(`GGUF tensor ${name} appears twice`, { tensor: name });
    seen.add(name);
    raw.push({ name, type, dims, shape: [...dims].reverse(), numel, offset });
  }
  const dataOffset = Math.ceil(c.pos / alignment) * alignment;
  const tensors = new Map<string, GgufTensorInfo>();
  for (const t of raw) {
    const begin = dataOffset + t.offset;
    const end = begin + ggmlBytes(t.type, t.numel);
    if (end > fileSize) {
      throw new ModelFormatError(
        `GGUF tensor ${t.name}: data [${begin}, ${end}) runs past the end of the ${fileSize}-byte file; truncated?`,
        { tensor: t.name },
      );
    }
    tensors.set(t.name, { ...t, begin, end });
  }
  const sorted = [...tensors.values()].filter((t) => t.end > t.begin).sort((a, b) => a.begin - b.begin);
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i]!.begin < sorted[i - 1]!.end) {
      throw new ModelFormatError(`GGUF tensors ${sorted[i - 1]!.name} and ${sorted[i]!.name} overlap`);
    }
  }
  return { version, metadata, metadataTypes, tensors, alignment, dataOffset };
}

/** Opens a GGUF file: reads a growing prefix until the header parses, then only tensors on demand. */
export async function openGguf(src: ByteSource): Promise<GgufFile> {
  if (src.size < 24) {
    throw new ModelFormatError(`not a GGUF file: ${src.size} bytes is shorter than the 24-byte header`, { size: src.size });
  }
  let len = Math.min(src.size, 1 << 20);
  let h: Header;
  for (;;) {
    try {
      h = parseHeader(await src.read(0, len), src.size);
      break;
    } catch (e) {
      if (!(e instanceof NeedMore)) throw e;
      len = Math.min(src.size, len * 4);
    }
  }
  const get = (name: string): GgufTensorInfo => {
    const t = h.tensors.get(name);
    if (!t) throw new ModelFormatError(`GGUF has no tensor ${name}`, { tensor: name });
    return t;
  };
  return {
    ...h,
    async readTensor(name) {
      const t = get(name);
      return src.read(t.begin, t.end - t.begin);
    },
    async readTensorF32(name) {
      const t = get(name);
      return dequantizeGguf(t.type, await src.read(t.begin, t.end - t.begin), t.numel);
    },
  };
}

// ---- GGUF -> DecoderConfig ---------------------------------------------------

export const SUPPORTED_GGUF_ARCHS: Record<string, string> = {
  llama: 'LlamaForCausalLM',
  mistral: 'MistralForCausalLM',
  qwen2: 'Qwen2ForCausalLM',
  qwen3: 'Qwen3ForCausalLM',
  gemma2: 'Gemma2ForCausalLM',
  gemma3: 'Gemma3ForCausalLM',
  phi3: 'Phi3ForCausalLM',
};

/**
 * Archs whose converter (llama.cpp convert_hf_to_gguf, LlamaModel.permute) reorders
 * q/k projection rows from HF's rotate-half layout to interleaved rope pairs. Their
 * attn_q / attn_k weights (and biases) need `unpermuteQK` before use with HF-order rope.
 * qwen2 / qwen3 are written in HF order and need nothing.
 */
export const GGUF_QK_PERMUTED_ARCHS: readonly string[] = ['llama', 'mistral'];

/**
 * Maps GGUF metadata to a DecoderConfig. With `tensorNames`, tied embeddings
 * (no output.weight), q/k/v biases and q/k norms are read off the tensors
 * present; without, they default per arch (untied; qwen2 biased; qwen3 qk-norm).
 * Note: llama3 rope scaling is not in the metadata: llama.cpp stores it as a
 * `rope_freqs.weight` tensor of headDim/2 per-frequency divisors; Phi-3's longrope
 * factors are tensors too (`rope_factors_short` / `_long`). openGgufWeights reads
 * them into `ropeScaling`.
 *
 * Gemma 2/3 files carry no query_pre_attn_scalar nor (Gemma 3) local rope base or layer
 * pattern: they are llama.cpp's, which fixes them per architecture (attention scale
 * 1/sqrt(head_dim) except the 27B models' 1/sqrt(hidden/heads); Gemma 2 alternates
 * sliding and full layers; Gemma 3 has a full layer every 6th, local rope base 10000).
 * Their norm weights are stored with the 1 already added (convert_hf_to_gguf), so the
 * config leaves normAddOne off.
 */
export function ggufToDecoderConfig(md: ReadonlyMap<string, GgufValue>, tensorNames?: Iterable<string>): DecoderConfig {
  const arch = md.get('general.architecture');
  if (typeof arch !== 'string' || !(arch in SUPPORTED_GGUF_ARCHS)) {
    const list = Object.keys(SUPPORTED_GGUF_ARCHS).join(', ');
    throw new UnsupportedModelError(`unsupported GGUF architecture ${JSON.stringify(arch ?? null)}; supported: ${list}`, {
      architecture: arch ?? null,
      supported: Object.keys(SUPPORTED_GGUF_ARCHS),
    });
  }
  const uniform = (key: string, v: GgufValue): GgufValue => {
    if (!Array.isArray(v)) return v;
    if (v.length === 0 || v.some((x) => x !== v[0])) throw new UnsupportedModelError(`GGUF ${key} varies per layer; not supported`, { key });
    return v[0]!;
  };
  const opt = (k: string): number | undefined => {
    const key = `${arch}.${k}`;
    const v = md.get(key);
    if (v === undefined) return undefined;
    const u = uniform(key, v);
    if (typeof u !== 'number' || !Number.isFinite(u)) throw new ModelFormatError(`GGUF ${key} must be a number, got ${String(u)}`, { key });
    return u;
  };
  const req = (k: string): number => {
    const v = opt(k);
    if (v === undefined) throw new ModelFormatError(`GGUF metadata lacks ${arch}.${k}`, { key: `${arch}.${k}` });
    return v;
  };
  const names = tensorNames ? new Set(tensorNames) : undefined;
  const hiddenSize = req('embedding_length');
  const heads = req('attention.head_count');
  const headDim = opt('attention.key_length') ?? hiddenSize / heads;
  const vLen = opt('attention.value_length');
  if (vLen !== undefined && vLen !== headDim) throw new UnsupportedModelError(`GGUF key_length ${headDim} != value_length ${vLen}; not supported`);
  const rotDims = opt('rope.dimension_count');
  if (rotDims !== undefined && rotDims !== headDim) {
    throw new UnsupportedModelError(`partial rotary (rope.dimension_count ${rotDims} of head size ${headDim}) is not supported`);
  }

  const tokens = md.get('tokenizer.ggml.tokens');
  const vocabSize = opt('vocab_size') ?? (Array.isArray(tokens) ? tokens.length : undefined);
  if (vocabSize === undefined) throw new ModelFormatError(`GGUF has neither ${arch}.vocab_size nor tokenizer.ggml.tokens`);

  const st = md.get(`${arch}.rope.scaling.type`);
  const factor = opt('rope.scaling.factor') ?? opt('rope.scale_linear');
  let ropeScaling: DecoderConfig['ropeScaling'] = null;
  if (st === 'linear' || (st === undefined && md.has(`${arch}.rope.scale_linear`))) ropeScaling = { type: 'linear', factor: factor ?? 1 };
  else if (st !== undefined && st !== 'none') {
    throw new UnsupportedModelError(`GGUF rope scaling ${JSON.stringify(st)} is not supported; supported: none, linear`);
  }

  const tokId = (k: string): number | undefined => {
    const v = md.get(`tokenizer.ggml.${k}`);
    return typeof v === 'number' ? v : undefined;
  };
  const eos = [tokId('eos_token_id'), tokId('eot_token_id')].filter((x): x is number => x !== undefined);
  const ft = md.get('general.file_type');
  const layers = req('block_count');
  let extras: Partial<DecoderConfig> = {};
  let hiddenAct = 'silu';
  let slidingWindow = opt('attention.sliding_window') ?? null;
  if (arch === 'gemma2' || arch === 'gemma3') {
    hiddenAct = 'gelu_pytorch_tanh';
    const big = layers === (arch === 'gemma2' ? 46 : 62); // the 27B models
    const pattern = opt('attention.sliding_window_pattern') ?? (arch === 'gemma2' ? 2 : 6);
    const attnSoftcap = opt('attn_logit_softcapping');
    const finalSoftcap = opt('final_logit_softcapping');
    extras = {
      sandwichNorms: true,
      embedScale: Math.fround(Math.sqrt(hiddenSize)),
      attnScale: opt('attention.scale') ?? 1 / Math.sqrt(big ? hiddenSize / heads : headDim),
      ...(attnSoftcap ? { attnSoftcap } : {}),
      ...(finalSoftcap ? { finalSoftcap } : {}),
      slidingLayers: Array.from({ length: layers }, (_, i) => (i + 1) % pattern !== 0),
      ...(arch === 'gemma3' ? { localRope: { theta: opt('rope.freq_base_swa') ?? 10000, scaling: null } } : {}),
    };
    if (slidingWindow === null) extras.slidingLayers = extras.slidingLayers!.map(() => false);
  } else if (arch === 'phi3') {
    extras = { fusedProjections: true };
    if (slidingWindow === 0) slidingWindow = null;
  }
  return {
    architecture: SUPPORTED_GGUF_ARCHS[arch]!,
    hiddenSize,
    layers,
    heads,
    kvHeads: opt('attention.head_count_kv') ?? heads,
    headDim,
    intermediateSize: req('feed_forward_length'),
    vocabSize,
    maxPositions: req('context_length'),
    rmsEps: req('attention.layer_norm_rms_epsilon'),
    ropeTheta: opt('rope.freq_base') ?? 10000,
    ropeScaling,
    tieEmbeddings: names ? !names.has('output.weight') : false,
    attentionBias: names ? names.has('blk.0.attn_q.bias') : arch === 'qwen2',
    qkNorm: names ? names.has('blk.0.attn_q_norm.weight') : arch === 'qwen3',
    slidingWindow,
    hiddenAct,
    bosTokenId: tokId('bos_token_id') ?? null,
    eosTokenIds: [...new Set(eos)],
    torchDtype: ft === 0 ? 'float32' : ft === 1 ? 'float16' : ft === 32 ? 'bfloat16' : null,
    ...extras,
  };
}

// ---- tensor names ------------------------------------------------------------

/** Per-layer GGUF suffix -> HF suffix (after `blk.N.` / `model.layers.N.`). */
const LAYER_NAMES: [string, string][] = [
  ['attn_norm', 'input_layernorm'],
  ['ffn_norm', 'post_attention_layernorm'],
  ['attn_q', 'self_attn.q_proj'],
  ['attn_k', 'self_attn.k_proj'],
  ['attn_v', 'self_attn.v_proj'],
  ['attn_output', 'self_attn.o_proj'],
  ['attn_q_norm', 'self_attn.q_norm'],
  ['attn_k_norm', 'self_attn.k_norm'],
  ['ffn_gate', 'mlp.gate_proj'],
  ['ffn_up', 'mlp.up_proj'],
  ['ffn_down', 'mlp.down_proj'],
];
const GLOBAL_NAMES: [string, string][] = [
  ['token_embd', 'model.embed_tokens'],
  ['output_norm', 'model.norm'],
  ['output', 'lm_head'],
];
/**
 * Gemma 2/3: four norms per layer, named as llama.cpp names them (llama-arch.cpp
 * LLM_TENSOR_ATTN_POST_NORM / LLM_TENSOR_FFN_POST_NORM); `ffn_norm` is the MLP's input norm
 * (pre_feedforward_layernorm).
 */
const GEMMA_LAYER_NAMES: [string, string][] = [
  ...LAYER_NAMES.filter(([g]) => g !== 'ffn_norm'),
  ['post_attention_norm', 'post_attention_layernorm'],
  ['ffn_norm', 'pre_feedforward_layernorm'],
  ['post_ffw_norm', 'post_feedforward_layernorm'],
];
/** Phi-3: fused q/k/v (attn_qkv) and gate/up (ffn_up holds both, gate rows first). */
const PHI3_LAYER_NAMES: [string, string][] = [
  ...LAYER_NAMES.filter(([g]) => g !== 'ffn_up'),
  ['attn_qkv', 'self_attn.qkv_proj'],
  ['ffn_up', 'mlp.gate_up_proj'],
];
function layerNames(arch: string | undefined): [string, string][] {
  return arch === 'gemma2' || arch === 'gemma3' ? GEMMA_LAYER_NAMES : arch === 'phi3' ? PHI3_LAYER_NAMES : LAYER_NAMES;
}

/**
 * `blk.3.attn_q.bias` -> `model.layers.3.self_attn.q_proj.bias` for the GGUF architecture
 * `arch` (default llama naming); null for tensors with no HF equivalent (rope_freqs...).
 */
export function ggufToHfName(name: string, arch?: string): string | null {
  const m = /^(.*)\.(weight|bias)$/.exec(name);
  if (!m) return null;
  const [, base, kind] = m;
  const g = GLOBAL_NAMES.find(([a]) => a === base);
  if (g) return `${g[1]}.${kind}`;
  const l = /^blk\.(\d+)\.(.+)$/.exec(base!);
  const h = l && layerNames(arch).find(([a]) => a === l[2])?.[1];
  return h ? `model.layers.${l![1]}.${h}.${kind}` : null;
}

/** Inverse of ggufToHfName. */
export function hfToGgufName(name: string, arch?: string): string | null {
  const m = /^(.*)\.(weight|bias)$/.exec(name);
  if (!m) return null;
  const [, base, kind] = m;
  const g = GLOBAL_NAMES.find(([, b]) => b === base);
  if (g) return `${g[0]}.${kind}`;
  const l = /^model\.layers\.(\d+)\.(.+)$/.exec(base!);
  const s = l && layerNames(arch).find(([, b]) => b === l[2])?.[0];
  return s ? `blk.${l![1]}.${s}.${kind}` : null;
}

// ---- q/k row permutation ------------------------------------------------------

type RowArray = Float32Array | Float64Array | Uint8Array | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array;

function permuteRows<T extends RowArray>(w: T, nHeads: number, headDim: number, cols: number, toGguf: boolean): T {
  if (headDim % 2 !== 0) throw new ModelFormatError(`q/k permutation needs an even head size, got ${headDim}`);
  if (w.length !== nHeads * headDim * cols) {
    throw new ModelFormatError(`q/k permutation: ${w.length} elements != ${nHeads} heads x ${headDim} x ${cols} columns`);
  }
  const out = new (w.constructor as new (n: number) => T)(w.length);
  const half = headDim / 2;
  for (let h = 0; h < nHeads; h++) {
    for (let i = 0; i < half; i++) {
      for (let j = 0; j < 2; j++) {
        const hf = h * headDim + j * half + i; // HF rotate-half order: [x_0..x_{d/2-1}, y_0..y_{d/2-1}]
        const gg = h * headDim + 2 * i + j; // llama.cpp interleaved order: [x_0, y_0, x_1, y_1, ...]
        const [from, to] = toGguf ? [hf, gg] : [gg, hf];
        out.set(w.subarray(from * cols, (from + 1) * cols), to * cols);
      }
    }
  }
  return out;
}

/**
 * HF -> llama.cpp row order for q/k projections of llama/mistral archs (what
 * convert_hf_to_gguf's permute does): rows [nHeads * headDim, cols]; pass nHeads =
 * heads for q, kvHeads for k; cols = 1 for biases. For raw quantized rows pass
 * cols = bytes per row with a Uint8Array (blocks never cross rows).
 */
export function permuteQK<T extends RowArray>(rows: T, nHeads: number, headDim: number, cols: number): T {
  return permuteRows(rows, nHeads, headDim, cols, true);
}

/** Inverse of permuteQK: GGUF llama/mistral q/k rows back to HF rotate-half order. */
export function unpermuteQK<T extends RowArray>(rows: T, nHeads: number, headDim: number, cols: number): T {
  return permuteRows(rows, nHeads, headDim, cols, false);
}

/** Bytes per row (innermost dimension) of a GGUF tensor. */
export function ggufRowBytes(t: GgufTensorInfo): number {
  return ggmlBytes(t.type, t.dims[0]!);
}
