/**
 * GGUF v3 writer, and `hfToGguf`: an HF decoder checkpoint (DecoderConfig +
 * f32 tensors + tokenizer.json) written the way llama.cpp's convert_hf_to_gguf
 * writes it: llama-arch metadata keys, GGUF tensor names, q/k rows permuted to
 * interleaved rope order (llama/mistral), tokenizer.ggml.* vocabulary. Q4_K / Q5_K / Q6_K come
 * from gguf_kquant_write.ts, with its fallback for rows that are not whole super-blocks.
 *
 * Used by tests (round trips, malformed-file fixtures built by editing valid
 * files) and by a future `weft convert`. Quantized types are produced with
 * ggml's reference quantizers (gguf_quants.ts), so output matches llama.cpp
 * byte for byte for F32/F16/BF16/Q8_0/Q4_0; other types can be passed raw.
 */
import { ModelFormatError, UnsupportedModelError } from '../errors.ts';
import { GGUF_VALUE_TYPES, hfToGgufName, permuteQK, type GgufValue } from './gguf.ts';
import { encodeBF16, encodeF16, GGML_TYPES, ggmlBytes, quantizeQ4_0, quantizeQ8_0, type GgmlTypeName } from './gguf_quants.ts';
import type { DecoderConfig } from './hf_config.ts';
import { kquantFallback, quantizeKQuant, type KQuantWriteType } from './gguf_kquant_write.ts';

/** One metadata entry: key, type ("u32", "f32", "string", "array<string>", ...), value. */
export type GgufMetaEntry = [key: string, type: string, value: GgufValue];

export type GgufTensorInput =
  /** f32 data, encoded/quantized to `type`. `shape` is PyTorch order, outermost first. */
  | { name: string; shape: number[]; type: 'F32' | 'F16' | 'BF16' | 'Q8_0' | 'Q4_0' | 'Q4_K' | 'Q5_K' | 'Q6_K'; data: Float32Array }
  /** Already-encoded blocks of any ggml type (e.g. hand-built Q4_K). */
  | { name: string; shape: number[]; type: GgmlTypeName; raw: Uint8Array };

/** Growable little-endian byte buffer. */
class Out {
  buf = new Uint8Array(1 << 16);
  dv = new DataView(this.buf.buffer);
  n = 0;
  private grow(k: number): number {
    if (this.n + k > this.buf.byteLength) {
      const b = new Uint8Array(Math.max(this.buf.byteLength * 2, this.n + k));
      b.set(this.buf.subarray(0, this.n));
      this.buf = b;
      this.dv = new DataView(b.buffer);
    }
    const p = this.n;
    this.n += k;
    return p;
  }
  // Always grow() before touching buf/dv: growing replaces both.
  u8(v: number): void { const p = this.grow(1); this.dv.setUint8(p, v); }
  u32(v: number): void { const p = this.grow(4); this.dv.setUint32(p, v, true); }
  u64(v: number | bigint): void { const p = this.grow(8); this.dv.setBigUint64(p, BigInt(v), true); }
  bytes(b: Uint8Array): void { const p = this.grow(b.byteLength); this.buf.set(b, p); }
  str(s: string): void { const b = new TextEncoder().encode(s); this.u64(b.byteLength); this.bytes(b); }
  pad(align: number): void { this.grow((align - (this.n % align)) % align); }
  value(type: string, v: GgufValue, key: string): void {
    const arr = /^array<(.+)>$/.exec(type);
    if (arr) {
      if (!Array.isArray(v)) throw new ModelFormatError(`gguf write: ${key} is ${type} but the value is not an array`);
      const et = arr[1]!;
      this.u32(typeId(et, key));
      this.u64(v.length);
      for (const x of v) this.value(et, x, key);
      return;
    }
    const n = (): number => {
      if (typeof v !== 'number') throw new ModelFormatError(`gguf write: ${key} (${type}) needs a number`);
      return v;
    };
    const big = (): bigint => {
      if (typeof v !== 'number' && typeof v !== 'bigint') throw new ModelFormatError(`gguf write: ${key} (${type}) needs an integer`);
      return BigInt(v);
    };
    const at = (k: number): DataView => { const p = this.grow(k); return new DataView(this.buf.buffer, p, k); };
    switch (type) {
      case 'u8': return at(1).setUint8(0, n());
      case 'i8': return at(1).setInt8(0, n());
      case 'u16': return at(2).setUint16(0, n(), true);
      case 'i16': return at(2).setInt16(0, n(), true);
      case 'u32': return at(4).setUint32(0, n(), true);
      case 'i32': return at(4).setInt32(0, n(), true);
      case 'f32': return at(4).setFloat32(0, n(), true);
      case 'f64': return at(8).setFloat64(0, n(), true);
      case 'u64': return at(8).setBigUint64(0, big(), true);
      case 'i64': return at(8).setBigInt64(0, big(), true);
      case 'bool': return this.u8(v ? 1 : 0);
      case 'string': return this.str(String(v));
    }
    throw new ModelFormatError(`gguf write: ${key} has unknown type ${type}`);
  }
}

/** GGUF value type id of a type name; any "array<...>" is 9 (its element type follows in the value). */
function typeId(t: string, key: string): number {
  const i = (GGUF_VALUE_TYPES as readonly string[]).indexOf(t.startsWith('array<') ? 'array' : t);
  if (i < 0) throw new ModelFormatError(`gguf write: ${key} has unknown type ${t}`);
  return i;
}

function encodeTensor(t: GgufTensorInput): Uint8Array {
  const n = t.shape.reduce((a, d) => a * d, 1);
  if ('raw' in t) {
    if (t.raw.byteLength !== ggmlBytes(t.type, n)) {
      throw new ModelFormatError(`gguf write: ${t.name} raw ${t.type} data is ${t.raw.byteLength} bytes, expected ${ggmlBytes(t.type, n)}`);
    }
    return t.raw;
  }
  if (t.data.length !== n) throw new ModelFormatError(`gguf write: ${t.name} has ${t.data.length} values for shape ${JSON.stringify(t.shape)}`);
  switch (t.type) {
    case 'F32': return new Uint8Array(t.data.slice().buffer);
    case 'F16': return encodeF16(t.data);
    case 'BF16': return encodeBF16(t.data);
    case 'Q8_0': return quantizeQ8_0(t.data);
    case 'Q4_0': return quantizeQ4_0(t.data);
    case 'Q4_K':
    case 'Q5_K':
    case 'Q6_K': return quantizeKQuant(t.type, t.data);
  }
}

/** Serializes a GGUF v3 file. `general.alignment` (u32) in `metadata` sets the alignment (default 32). */
export function writeGguf(metadata: GgufMetaEntry[], tensors: GgufTensorInput[]): Uint8Array {
  const al = metadata.find(([k]) => k === 'general.alignment')?.[2];
  const alignment = typeof al === 'number' ? al : 32;
  const o = new Out();
  o.u32(0x46554747);
  o.u32(3);
  o.u64(tensors.length);
  o.u64(metadata.length);
  for (const [key, type, value] of metadata) {
    o.str(key);
    o.u32(typeId(type, key));
    o.value(type, value, key);
  }
  const datas = tensors.map(encodeTensor);
  let off = 0;
  tensors.forEach((t, i) => {
    o.str(t.name);
    o.u32(t.shape.length);
    for (const d of [...t.shape].reverse()) o.u64(d); // GGUF: innermost first
    o.u32(GGML_TYPES[t.type].id);
    o.u64(off);
    off += Math.ceil(datas[i]!.byteLength / alignment) * alignment;
  });
  o.pad(alignment);
  for (const d of datas) {
    o.bytes(d);
    o.pad(alignment);
  }
  return o.buf.slice(0, o.n);
}

// ---- HF checkpoint -> GGUF ---------------------------------------------------------

export interface HfToGgufOptions {
  config: DecoderConfig;
  /** HF-named f32 tensors, shapes outermost first. */
  tensors: Map<string, { shape: number[]; data: Float32Array }>;
  /** tokenizer.json (parsed or text). */
  tokenizer: unknown;
  /** tokenizer_config.json, for add_bos_token / add_eos_token. */
  tokenizerConfig?: unknown;
  /**
   * Already-encoded blocks for some HF-named 2-D tensors (e.g. Q4_K from randomKQuantBlocks), in
   * HF row order; written as given (q/k rows permuted for llama files), overriding `tensors`.
   */
  raw?: Map<string, { type: GgmlTypeName; raw: Uint8Array }>;
  /**
   * Type for 2-D weights (norms, biases and 1-D tensors stay F32). Default F32. Q8_0 / Q4_0
   * need rows of whole 32-element blocks (else F16), Q4_K / Q5_K / Q6_K whole 256-element
   * super-blocks (else kquantFallback: Q8_0, or F16).
   */
  type?: WeightWriteType;
  /** Per-tensor override of `type` by HF name (e.g. Q4_K_M's Q6_K for some tensors); same fallbacks. */
  typeOf?: (hfName: string) => WeightWriteType | undefined;
  name?: string;
  /** tokenizer.ggml.pre for byte-level BPE vocabularies (llama.cpp's pre-tokenizer id). */
  pre?: string;
}

const GGUF_ARCH: Record<string, string> = {
  LlamaForCausalLM: 'llama',
  MistralForCausalLM: 'llama', // llama.cpp converts Mistral as llama
  Qwen2ForCausalLM: 'qwen2',
  Qwen3ForCausalLM: 'qwen3',
  Gemma2ForCausalLM: 'gemma2',
  Gemma3ForCausalLM: 'gemma3',
  Phi3ForCausalLM: 'phi3',
};
/** llama_ftype of a file whose weights are mostly of the type (Q4_K: MOSTLY_Q4_K_S). */
const FILE_TYPE = { F32: 0, F16: 1, Q4_0: 2, Q8_0: 7, BF16: 32, Q4_K: 14, Q5_K: 16, Q6_K: 18 } as const; // llama_ftype: *_K_S (every weight that type)

export type WeightWriteType = 'F32' | 'F16' | 'BF16' | 'Q8_0' | 'Q4_0' | KQuantWriteType;

export function hfToGguf(opts: HfToGgufOptions): Uint8Array {
  const c = opts.config;
  const arch = GGUF_ARCH[c.architecture];
  if (!arch) throw new UnsupportedModelError(`hfToGguf: cannot write ${c.architecture}; supported: ${Object.keys(GGUF_ARCH).join(', ')}`);
  const wtype = opts.type ?? 'F32';
  const md: GgufMetaEntry[] = [
    ['general.architecture', 'string', arch],
    ['general.name', 'string', opts.name ?? 'model'],
    ['general.file_type', 'u32', FILE_TYPE[wtype]],
    [`${arch}.vocab_size`, 'u32', c.vocabSize],
    [`${arch}.context_length`, 'u32', c.maxPositions],
    [`${arch}.embedding_length`, 'u32', c.hiddenSize],
    [`${arch}.block_count`, 'u32', c.layers],
    [`${arch}.feed_forward_length`, 'u32', c.intermediateSize],
    [`${arch}.rope.dimension_count`, 'u32', c.headDim],
    [`${arch}.attention.head_count`, 'u32', c.heads],
    [`${arch}.attention.head_count_kv`, 'u32', c.kvHeads],
    [`${arch}.attention.layer_norm_rms_epsilon`, 'f32', c.rmsEps],
    [`${arch}.rope.freq_base`, 'f32', c.ropeTheta],
  ];
  if (wtype !== 'F32' && wtype !== 'F16' && wtype !== 'BF16') md.push(['general.quantization_version', 'u32', 2]);
  if (c.headDim * c.heads !== c.hiddenSize) {
    md.push([`${arch}.attention.key_length`, 'u32', c.headDim], [`${arch}.attention.value_length`, 'u32', c.headDim]);
  }
  if (c.slidingWindow !== null) md.push([`${arch}.attention.sliding_window`, 'u32', c.slidingWindow]);
  if (c.ropeScaling?.type === 'linear') {
    md.push([`${arch}.rope.scaling.type`, 'string', 'linear'], [`${arch}.rope.scaling.factor`, 'f32', c.ropeScaling.factor]);
  }
  md.push(...variantMetadata(arch, c));
  md.push(...tokenizerMetadata(opts, c));

  const out: GgufTensorInput[] = [];
  const add = (hfName: string, data: Float32Array, shape: number[]): void => {
    const name = hfToGgufName(hfName, arch);
    if (!name) throw new UnsupportedModelError(`hfToGguf: no GGUF name for tensor ${hfName}`, { tensor: hfName });
    const cols = shape[shape.length - 1]!;
    let type: WeightWriteType = shape.length < 2 ? 'F32' : (opts.typeOf?.(hfName) ?? wtype);
    if ((type === 'Q8_0' || type === 'Q4_0') && cols % 32 !== 0) type = 'F16'; // llama.cpp's fallback
    if (type === 'Q4_K' || type === 'Q5_K' || type === 'Q6_K') type = kquantFallback(type, cols);
    out.push({ name, shape, type, data });
  };
  const permuted = arch === 'llama';
  for (const [hfName, t] of opts.tensors) {
    if (hfName === 'lm_head.weight' && c.tieEmbeddings) continue;
    let data = t.data;
    // Gemma norms are stored as (w - 1) by transformers and as (1 + w) in GGUF (convert_hf_to_gguf).
    if (c.normAddOne && /norm\.weight$/.test(hfName)) data = Float32Array.from(data, (v) => v + 1);
    const m = /\.self_attn\.(q|k)_proj\.(weight|bias)$/.exec(hfName);
    if (permuted && m) {
      const nH = m[1] === 'q' ? c.heads : c.kvHeads;
      data = permuteQK(data, nH, c.headDim, t.shape.length > 1 ? t.shape[t.shape.length - 1]! : 1);
    }
    const r = opts.raw?.get(hfName);
    if (r) {
      const name = hfToGgufName(hfName, arch);
      if (!name) throw new UnsupportedModelError(`hfToGguf: no GGUF name for tensor ${hfName}`, { tensor: hfName });
      const rows = t.shape[0]!;
      const raw = permuted && m ? permuteQK(r.raw, m[1] === 'q' ? c.heads : c.kvHeads, c.headDim, r.raw.byteLength / rows) : r.raw;
      out.push({ name, shape: t.shape, type: r.type, raw });
      continue;
    }
    add(hfName, data, t.shape);
  }
  if (c.ropeScaling?.type === 'llama3') {
    out.push({ name: 'rope_freqs.weight', shape: [c.headDim / 2], type: 'F32', data: llama3RopeFactors(c) });
  }
  if (c.ropeScaling?.type === 'longrope') {
    const half = [c.headDim / 2];
    out.push({ name: 'rope_factors_long.weight', shape: half, type: 'F32', data: Float32Array.from(c.ropeScaling.longFactor) });
    out.push({ name: 'rope_factors_short.weight', shape: half, type: 'F32', data: Float32Array.from(c.ropeScaling.shortFactor) });
  }
  return writeGguf(md, out);
}

/**
 * Gemma 2/3 and Phi-3 keys, as convert_hf_to_gguf writes them. Two keys llama.cpp does not
 * write for Gemma are added only where the config departs from llama.cpp's fixed values (its
 * files then still read as llama.cpp would compute): attention.scale (query_pre_attn_scalar
 * other than head_dim) and attention.sliding_window_pattern (other than Gemma 3's 6).
 */
function variantMetadata(arch: string, c: DecoderConfig): GgufMetaEntry[] {
  const md: GgufMetaEntry[] = [];
  if (arch === 'gemma2' || arch === 'gemma3') {
    if (c.attnSoftcap) md.push([`${arch}.attn_logit_softcapping`, 'f32', c.attnSoftcap]);
    if (c.finalSoftcap) md.push([`${arch}.final_logit_softcapping`, 'f32', c.finalSoftcap]);
    const big = c.layers === (arch === 'gemma2' ? 46 : 62);
    const rule = 1 / Math.sqrt(big ? c.hiddenSize / c.heads : c.headDim);
    if (c.attnScale !== undefined && Math.abs(c.attnScale - rule) > 1e-7 * rule) md.push([`${arch}.attention.scale`, 'f32', c.attnScale]);
    const sl = c.slidingLayers ?? [];
    const period = sl.findIndex((x) => !x) + 1; // first full layer, 1-based
    if (period > 0 && period !== (arch === 'gemma2' ? 2 : 6)) md.push([`${arch}.attention.sliding_window_pattern`, 'u32', period]);
    if (c.localRope && c.localRope.theta !== 10000) md.push([`${arch}.rope.freq_base_swa`, 'f32', c.localRope.theta]);
  }
  if (arch === 'phi3' && c.ropeScaling?.type === 'longrope') {
    md.push(
      [`${arch}.rope.scaling.attn_factor`, 'f32', c.ropeScaling.attentionFactor],
      [`${arch}.rope.scaling.original_context_length`, 'u32', c.ropeScaling.originalMaxPositionEmbeddings],
    );
  }
  return md;
}

/** Per-frequency divisors llama.cpp stores as `rope_freqs.weight` [headDim / 2] for llama3 rope scaling. */
export function llama3RopeFactors(c: DecoderConfig): Float32Array {
  const s = c.ropeScaling;
  if (s?.type !== 'llama3') throw new ModelFormatError('llama3RopeFactors: config has no llama3 rope scaling');
  const out = new Float32Array(c.headDim / 2);
  const lowWl = s.originalMaxPositionEmbeddings / s.lowFreqFactor;
  const highWl = s.originalMaxPositionEmbeddings / s.highFreqFactor;
  for (let i = 0; i < out.length; i++) {
    const freq = Math.fround(1 / Math.fround(c.ropeTheta ** Math.fround((2 * i) / c.headDim)));
    const wl = (2 * Math.PI) / freq;
    if (wl < highWl) out[i] = 1;
    else if (wl > lowWl) out[i] = s.factor;
    else {
      const smooth = (s.originalMaxPositionEmbeddings / wl - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
      out[i] = 1 / ((1 - smooth) / s.factor + smooth);
    }
  }
  return out;
}

/** GGUF token types (llama.cpp llama_token_type). */
export const TOKEN_TYPE = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 } as const;

/**
 * tokenizer.ggml.* entries from an HF tokenizer.json BPE model. Byte-fallback BPE
 * (SentencePiece-style, Llama 1/2, Mistral) becomes model "llama" with scores;
 * byte-level BPE becomes model "gpt2". Merges are written for both. Scores: where
 * llama.cpp's LlamaHfVocab writes a -1000 placeholder, we write -(merge rank) for
 * tokens produced by a merge and 0 otherwise, so llama.cpp's score-greedy SPM
 * tokenizer merges in the same order as HF's rank-ordered BPE.
 */
function tokenizerMetadata(opts: HfToGgufOptions, c: DecoderConfig): GgufMetaEntry[] {
  let parsed = opts.tokenizer;
  if (typeof parsed === 'string') {
    try {
      parsed = JSON.parse(parsed);
    } catch (e) {
      throw new ModelFormatError(`tokenizer.json is not valid JSON: ${(e as Error).message}`);
    }
  }
  const tj = parsed as {
    model?: { type?: string; vocab?: Record<string, number>; merges?: (string | [string, string])[]; byte_fallback?: boolean; unk_token?: string };
    added_tokens?: { id: number; content: string; special?: boolean }[];
  };
  const m = tj?.model;
  if (m?.type !== 'BPE' || typeof m.vocab !== 'object') {
    throw new UnsupportedModelError(`hfToGguf: tokenizer model ${JSON.stringify(m?.type ?? null)} not supported; supported: BPE`);
  }
  const spm = m.byte_fallback === true;
  const n = c.vocabSize;
  const tokens: string[] = new Array<string>(n).fill('');
  const types: number[] = new Array<number>(n).fill(TOKEN_TYPE.UNUSED);
  const set = (id: number, s: string, ty: number): void => {
    if (!Number.isSafeInteger(id) || id < 0 || id >= n) {
      throw new ModelFormatError(`tokenizer: token ${JSON.stringify(s)} id ${id} is outside the vocabulary of ${n}`);
    }
    tokens[id] = s;
    types[id] = ty;
  };
  for (const [s, id] of Object.entries(m.vocab)) set(id, s, spm && /^<0x[0-9A-Fa-f]{2}>$/.test(s) ? TOKEN_TYPE.BYTE : TOKEN_TYPE.NORMAL);
  for (const a of tj.added_tokens ?? []) set(a.id, a.content, a.special ? TOKEN_TYPE.CONTROL : TOKEN_TYPE.USER_DEFINED);
  const unkId = m.unk_token !== undefined ? m.vocab[m.unk_token] : undefined;
  if (spm && unkId !== undefined) types[unkId] = TOKEN_TYPE.UNKNOWN;
  for (let i = 0; i < n; i++) if (types[i] === TOKEN_TYPE.UNUSED) tokens[i] = `[PAD${i}]`;

  const pairs = (m.merges ?? []).map((x) => (typeof x === 'string' ? x.split(' ') : x) as string[]);
  // llama.cpp encodes spaces inside merge parts as U+0120 (convert_hf_to_gguf / SpecialVocab).
  const merges = pairs.map((p) => p.map((s) => s.replace(/ /g, '\u0120')).join(' '));
  const md: GgufMetaEntry[] = [['tokenizer.ggml.model', 'string', spm ? 'llama' : 'gpt2']];
  if (!spm) md.push(['tokenizer.ggml.pre', 'string', opts.pre ?? 'default']);
  md.push(['tokenizer.ggml.tokens', 'array<string>', tokens]);
  if (spm) {
    const scores = new Array<number>(n).fill(0);
    const scored = new Set<number>();
    pairs.forEach((p, rank) => {
      const id = m.vocab![p.join('')];
      if (id !== undefined && !scored.has(id)) {
        scored.add(id);
        scores[id] = rank === 0 ? 0 : -rank;
      }
    });
    md.push(['tokenizer.ggml.scores', 'array<f32>', scores]);
  }
  md.push(['tokenizer.ggml.token_type', 'array<i32>', types]);
  if (merges.length) md.push(['tokenizer.ggml.merges', 'array<string>', merges]);
  if (c.bosTokenId !== null) md.push(['tokenizer.ggml.bos_token_id', 'u32', c.bosTokenId]);
  if (c.eosTokenIds[0] !== undefined) md.push(['tokenizer.ggml.eos_token_id', 'u32', c.eosTokenIds[0]]);
  if (unkId !== undefined) md.push(['tokenizer.ggml.unknown_token_id', 'u32', unkId]);
  const tc = opts.tokenizerConfig as { add_bos_token?: unknown; add_eos_token?: unknown } | undefined;
  if (typeof tc?.add_bos_token === 'boolean') md.push(['tokenizer.ggml.add_bos_token', 'bool', tc.add_bos_token]);
  if (typeof tc?.add_eos_token === 'boolean') md.push(['tokenizer.ggml.add_eos_token', 'bool', tc.add_eos_token]);
  return md;
}
