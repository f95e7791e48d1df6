/**
 * Llama-family weights: Hugging Face tensor names -> our GPU layout.
 *
 * Per layer, q/k/v projections are fused into one [ (nH + 2 nKv) * hd, D ]
 * matrix (and their biases into one vector) and gate/up into one [2 I, D]
 * matrix, so a layer runs two projection matmuls instead of five. Tensors are
 * loaded, converted and uploaded one (fused) tensor at a time.
 */
import type { DecoderConfig } from '../../formats/hf_config.ts';
import type { GpuContext } from '../../gpu/context.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import type { LinearPart, LinearWeight } from '../../ops/matmul.ts';
import { ModelFormatError, UnsupportedModelError } from '../../errors.ts';
import { STORAGE } from '../../gpu/buffers.ts';
import { uploadWeight } from '../../ops/quant.ts';
import { byteLength, type DType } from '../../gpu/tensor.ts';
import { concatRows, hostBytes, HostBytes, hostToF32, type HostTensor, type WeightDType, type WeightSource } from '../host_tensor.ts';

export interface LlamaLayerWeights {
  inNorm: Tensor;
  qkv: LinearWeight;
  qNorm?: Tensor;
  kNorm?: Tensor;
  o: LinearWeight;
  /** The MLP's input norm (post_attention_layernorm; Gemma: pre_feedforward_layernorm). */
  postNorm: Tensor;
  gu: LinearWeight;
  down: LinearWeight;
  /** Gemma sandwich norms: on the attention output (post_attention_layernorm) and the MLP output (post_feedforward_layernorm). */
  attnOutNorm?: Tensor;
  mlpOutNorm?: Tensor;
}

export interface LlamaWeights {
  /** The token embedding (its first row part when split: embedParts). */
  embed: Tensor;
  /**
   * Set when the embedding is too large for one storage binding (Gemma's 256k x 2304 in f16:
   * 1.18 GB > a 1 GiB limit): its consecutive row parts, each within the limit.
   */
  embedParts?: Tensor[];
  layers: LlamaLayerWeights[];
  norm: Tensor;
  /** The LM head (its first row part when split: headParts). */
  head: LinearWeight;
  headParts?: Tensor[];
  /** Bytes of GPU memory the weights occupy. */
  bytes: number;
  /** Set when every weight lives in this one f32 buffer (`pack`; see packedLlamaBytes). */
  packed?: GPUBuffer;
}

/** Alignment of each packed tensor: WebGPU's largest minStorageBufferOffsetAlignment. */
const PACK_ALIGN = 256;
const alignUp = (n: number): number => Math.ceil(n / PACK_ALIGN) * PACK_ALIGN;

/**
 * Bytes of the packed f32 layout of a Llama-family model: every tensor at a
 * 256-byte aligned offset, in upload order — embed; per layer fused qkv,
 * qkv bias?, inNorm, o, postNorm, fused gate/up, down, qNorm?, kNorm?;
 * final norm; lm_head when untied. Layers therefore sit at a uniform stride
 * (the decode megakernel addresses them as base + layer * stride).
 */
export function packedLlamaBytes(cfg: DecoderConfig, untiedHead: boolean): number {
  const D = cfg.hiddenSize;
  const qkvRows = (cfg.heads + 2 * cfg.kvHeads) * cfg.headDim;
  const f = (n: number): number => alignUp(n * 4);
  const layer =
    f(qkvRows * D) +
    (cfg.attentionBias ? f(qkvRows) : 0) +
    f(D) +
    f(D * cfg.heads * cfg.headDim) +
    f(D) +
    f(2 * cfg.intermediateSize * D) +
    f(D * cfg.intermediateSize) +
    (cfg.qkNorm ? 2 * f(cfg.headDim) : 0);
  return f(cfg.vocabSize * D) + cfg.layers * layer + f(D) + (untiedHead ? f(cfg.vocabSize * D) : 0);
}

/** Sequential f32 writes into one pre-sized buffer at 256-byte aligned offsets. */
class Packer {
  private at = 0;
  constructor(
    private readonly device: GPUDevice,
    readonly buffer: GPUBuffer,
  ) {}

  put(data: Float32Array, shape: readonly number[]): Tensor {
    const offset = this.at;
    if (offset + data.byteLength > this.buffer.size) throw new Error(`weight packing: ${offset + data.byteLength} B > planned ${this.buffer.size} B`);
    this.device.queue.writeBuffer(this.buffer, offset, data.buffer as ArrayBuffer, data.byteOffset, data.byteLength);
    this.at = alignUp(offset + data.byteLength);
    return { buffer: this.buffer, offset, shape, dtype: 'f32' };
  }
}

const toF32 = hostToF32;

/** Halves [rows, cols] -> the f16 tensor layout: u32 words, rows padded to even length. */
function packHalves(h: Uint16Array, rows: number, cols: number): Uint32Array {
  if (cols % 2 === 0) {
    // Already the layout: reinterpret (copy only when the view is not 4-byte aligned).
    const a = h.byteOffset % 4 === 0 ? h : h.slice();
    return new Uint32Array(a.buffer, a.byteOffset, (rows * cols) / 2);
  }
  const words = (cols + 1) / 2;
  const out = new Uint16Array(rows * words * 2);
  for (let r = 0; r < rows; r++) out.set(h.subarray(r * cols, (r + 1) * cols), r * words * 2);
  return new Uint32Array(out.buffer);
}

export interface UploaderOptions {
  /** What `auto` makes of float sources (f32 / f16 / bf16 checkpoints): default f32. */
  autoFloat?: 'f32' | 'f16';
  /** Largest device tensor in bytes (default: the adapter's storage binding and buffer limits); larger matrices are split by rows (matrixParts). */
  maxTensorBytes?: number;
  /** Counts the host bytes the uploader's encodings hold while they live. */
  host?: HostBytes;
}

export class WeightUploader {
  bytes = 0;
  private readonly autoFloat: 'f32' | 'f16';
  private readonly host: HostBytes | undefined;
  readonly maxTensorBytes: number;
  constructor(
    private readonly ctx: GpuContext,
    private readonly dtype: WeightDType,
    /** Pack every tensor as f32 into this one buffer instead of one buffer each. */
    private readonly packer?: Packer,
    opts: UploaderOptions = {},
  ) {
    if (packer) this.bytes = packer.buffer.size;
    this.autoFloat = opts.autoFloat ?? 'f32';
    this.host = opts.host;
    const lim = ctx.gpu.limits;
    this.maxTensorBytes = opts.maxTensorBytes ?? Math.min(Number(lim.maxStorageBufferBindingSize), Number(lim.maxBufferSize));
  }

  /** The dtype `matrix` stores a [rows, cols] host tensor as. */
  private targetOf(t: HostTensor, cols: number): DType {
    const quantized = t.kind !== 'f32' && t.kind !== 'f16';
    if (quantized && (this.dtype === 'auto' || this.dtype === t.kind)) return t.kind;
    const target = this.dtype === 'auto' ? this.autoFloat : this.dtype;
    return (target === 'q8_0' || target === 'q4_0') && cols % 32 !== 0 ? 'f16' : target;
  }

  /**
   * A matrix as one tensor, or as consecutive row parts when it would exceed maxTensorBytes
   * (a vocabulary-sized embedding / LM head): each part a [rows_i, cols] tensor within the
   * limit. Float sources only (f32 / f16 halves); a quantized source that large is refused.
   */
  matrixParts(t: HostTensor): Tensor[] {
    const rows = t.shape[0]!;
    const cols = t.shape[t.shape.length - 1]!;
    const target = this.targetOf(t, cols);
    const rowBytes = byteLength([1, cols], target);
    if (this.packer || rows * rowBytes <= this.maxTensorBytes) return [this.matrix(t)];
    if (t.kind !== 'f32' && t.kind !== 'f16') {
      throw new UnsupportedModelError(`a ${t.kind} matrix [${rows}, ${cols}] exceeds the device's ${this.maxTensorBytes}-byte tensor limit (only float matrices are split by rows)`, { rows, cols, dtype: t.kind, limit: this.maxTensorBytes });
    }
    const per = Math.floor(this.maxTensorBytes / rowBytes);
    if (per < 1) throw new UnsupportedModelError(`one row of a [${rows}, ${cols}] ${target} matrix exceeds the device's ${this.maxTensorBytes}-byte tensor limit`, { rows, cols, limit: this.maxTensorBytes });
    const parts: Tensor[] = [];
    for (let r0 = 0; r0 < rows; r0 += per) {
      const n = Math.min(per, rows - r0);
      const data = t.data.subarray(r0 * cols, (r0 + n) * cols);
      parts.push(this.matrix(t.kind === 'f32' ? { kind: 'f32', shape: [n, cols], data: data as Float32Array } : { kind: 'f16', shape: [n, cols], data: data as Uint16Array }));
    }
    return parts;
  }

  private flushedAt = 0;
  /**
   * Lets the queue retire the staging copies of what was written so far (writeBuffer copies
   * into staging memory that is released only once submitted work completes): without it a
   * load that never submits keeps a second, staged copy of every weight until its end.
   */
  async settle(everyBytes = 64 * 2 ** 20): Promise<void> {
    if (this.bytes - this.flushedAt < everyBytes) return;
    this.flushedAt = this.bytes;
    this.ctx.device.queue.submit([]);
    await this.ctx.device.queue.onSubmittedWorkDone();
  }

  /** Runs `f` with `n` more host bytes counted as held (an encoding alive until uploaded). */
  private holding<T>(n: number, f: () => T): T {
    this.host?.hold(n);
    try {
      return f();
    } finally {
      this.host?.release(n);
    }
  }

  private track(t: Tensor): Tensor {
    this.bytes += t.buffer.size + (t.scales?.size ?? 0);
    return t;
  }

  /** A 1-D f32 vector (norm weights, biases). */
  vector(t: HostTensor): Tensor {
    const data = toF32(t);
    if (this.packer) return this.packer.put(data, [data.length]);
    return this.track(this.ctx.tensor(data, [data.length], 'f32'));
  }

  /**
   * A 2-D matrix in the requested dtype. Quantized sources stay quantized under
   * `auto`; quantized dtypes need the column count to be a multiple of 32, and
   * fall back to f16 otherwise (as llama.cpp does for such tensors).
   */
  matrix(t: HostTensor): Tensor {
    const rows = t.shape[0]!;
    const cols = t.shape[t.shape.length - 1]!;
    const n = rows * cols;
    if (this.packer) return this.holding(t.kind === 'f32' ? 0 : 4 * n, () => this.packer!.put(toF32(t), [rows, cols]));
    const quantized = t.kind !== 'f32' && t.kind !== 'f16';
    if (quantized && (this.dtype === 'auto' || this.dtype === t.kind)) {
      return this.track(this.ctx.tensor(t.data, [rows, cols], t.kind, 'scales' in t ? t.scales : undefined));
    }
    let target = this.dtype === 'auto' ? this.autoFloat : this.dtype;
    if ((target === 'q8_0' || target === 'q4_0') && cols % 32 !== 0) target = 'f16';
    if (target === 'f16' && t.kind === 'f16') {
      const padded = cols % 2 === 0 && t.data.byteOffset % 4 === 0 ? 0 : rows * Math.ceil(cols / 2) * 4;
      return this.track(this.holding(padded, () => this.ctx.tensor(packHalves(t.data, rows, cols), [rows, cols], 'f16')));
    }
    // Widened (4 bytes per weight) then encoded: both alive until the upload.
    const widened = t.kind === 'f32' ? 0 : 4 * n;
    return this.track(this.holding(widened + byteLength([rows, cols], target), () => uploadWeight(this.ctx, toF32(t), rows, cols, target)));
  }
}

export interface LoadWeightsOptions {
  /**
   * Pack every weight as f32 into ONE buffer (packedLlamaBytes) instead of one
   * buffer per tensor: the decode megakernel binds it whole, the generic path
   * reads the same tensors through their offsets (no second copy). Only for
   * dtype f32, or auto over f32 sources (the loader decides); a tensor whose
   * shape differs from the config's is an error.
   */
  pack?: boolean;
  /** What `auto` makes of float tensors (default f32; the decoder loader passes f16 off the megakernel path). */
  autoFloat?: 'f32' | 'f16';
  /** Counts the host bytes the load holds (peak: LoadedDecoder.loadStats). */
  host?: HostBytes;
  /** Largest device tensor (default: the adapter's limits); bigger embeddings / heads are split by rows. */
  maxTensorBytes?: number;
}

export async function loadLlamaWeights(ctx: GpuContext, cfg: DecoderConfig, src: WeightSource, dtype: WeightDType, opts: LoadWeightsOptions = {}): Promise<LlamaWeights> {
  let packer: Packer | undefined;
  if (opts.pack) {
    if (dtype !== 'f32' && dtype !== 'auto') throw new Error(`weight packing is f32 only (dtype ${dtype})`);
    const untied = !(cfg.tieEmbeddings || !src.has('lm_head.weight'));
    const size = packedLlamaBytes(cfg, untied);
    packer = new Packer(ctx.device, ctx.device.createBuffer({ size, usage: STORAGE, label: 'weights-packed' }));
  }
  try {
    const host = opts.host ?? new HostBytes();
    const up = new WeightUploader(ctx, dtype, packer, { autoFloat: opts.autoFloat ?? 'f32', host, ...(opts.maxTensorBytes ? { maxTensorBytes: opts.maxTensorBytes } : {}) });
    return await uploadAll(cfg, src, up, packer, host);
  } catch (e) {
    packer?.buffer.destroy();
    throw e;
  }
}

/**
 * Checks every tensor the model needs against the config, from the source's headers only
 * (no tensor data read, nothing allocated): a missing tensor or one whose element count
 * differs is a ModelFormatError naming the tensor, its file and both sizes.
 */
export function checkLlamaShapes(cfg: DecoderConfig, src: WeightSource): void {
  if (!src.info) return;
  for (const n of llamaTensorNames(cfg, src.has('lm_head.weight') && !cfg.tieEmbeddings)) {
    const i = src.info(n);
    if (!i) throw new ModelFormatError(`missing tensor ${n}`, { tensor: n });
    const got = i.shape.reduce((a, b) => a * b, 1);
    const want = expectedNumel(cfg, n);
    if (got !== want) {
      throw new ModelFormatError(`${n} in ${i.file} has shape [${i.shape.join(', ')}] (${got} elements); the config needs ${want}`, { tensor: n, file: i.file, shape: i.shape, expected: want });
    }
  }
}

/** Per-layer HF names (without `.weight`) of the norms and projections under `cfg`. */
function layerWeightNames(cfg: DecoderConfig): string[] {
  const proj = cfg.fusedProjections ? ['self_attn.qkv_proj', 'mlp.gate_up_proj'] : ['self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj', 'mlp.gate_proj', 'mlp.up_proj'];
  const norms = cfg.sandwichNorms
    ? ['input_layernorm', 'post_attention_layernorm', 'pre_feedforward_layernorm', 'post_feedforward_layernorm']
    : ['input_layernorm', 'post_attention_layernorm'];
  return [...norms, ...proj, 'self_attn.o_proj', 'mlp.down_proj'];
}

/** The Hugging Face names loadLlamaWeights reads. */
export function llamaTensorNames(cfg: DecoderConfig, untiedHead: boolean): string[] {
  const out = ['model.embed_tokens.weight', 'model.norm.weight', ...(untiedHead ? ['lm_head.weight'] : [])];
  for (let l = 0; l < cfg.layers; l++) {
    const p = `model.layers.${l}.`;
    for (const s of layerWeightNames(cfg)) out.push(`${p}${s}.weight`);
    if (cfg.attentionBias) for (const s of ['q', 'k', 'v']) out.push(`${p}self_attn.${s}_proj.bias`);
    if (cfg.qkNorm) out.push(`${p}self_attn.q_norm.weight`, `${p}self_attn.k_norm.weight`);
  }
  return out;
}

async function uploadAll(cfg: DecoderConfig, src: WeightSource, up: WeightUploader, packer: Packer | undefined, host: HostBytes): Promise<LlamaWeights> {
  // Host bytes: each tensor read is held until the (fused) weight it feeds is uploaded.
  const get = async (n: string): Promise<HostTensor> => {
    const t = await src.load(n);
    host.hold(hostBytes(t));
    if (t.shape.reduce((a, b) => a * b, 1) !== expectedNumel(cfg, n)) {
      throw new ModelFormatError(`${n} has shape [${t.shape.join(', ')}], which does not match config.json`, { tensor: n });
    }
    return t;
  };
  /** A norm weight; Gemma stores (w - 1): the device gets 1 + w (added in f32). */
  const norm = async (n: string): Promise<Tensor> => {
    const t = await get(n);
    if (!cfg.normAddOne) return done(up.vector(t));
    const w = Float32Array.from(toF32(t), (v) => v + 1);
    return done(up.vector({ kind: 'f32', shape: [w.length], data: w }));
  };
  const fuse = (parts: HostTensor[]): HostTensor => {
    const r = concatRows(parts);
    host.hold(hostBytes(r));
    return r;
  };
  /**
   * q/k/v or gate/up as one matrix when their dtypes agree. Parts of different dtypes (a GGUF
   * `_M` mixture: attn_v in Q6_K beside Q4_K attn_q / attn_k) stay as they are, each run from
   * its own blocks into its columns of the fused output (LinearWeight.parts), rather than
   * joined in f16 (2 bytes a weight and a rounding). Into the packed f32 buffer of the decode
   * megakernel they go joined in f32, which is exact.
   */
  const fusedLinear = (parts: HostTensor[]): LinearWeight => {
    if (parts.every((t) => t.kind === parts[0]!.kind)) return { w: done(up.matrix(fuse(parts))) };
    if (packer) return { w: done(up.matrix(fuse(parts.map((t): HostTensor => ({ kind: 'f32', shape: t.shape, data: toF32(t) }))))) };
    const out: LinearPart[] = [];
    let col = 0;
    for (const t of parts) {
      out.push({ w: up.matrix(t), col });
      col += t.shape[0]!;
    }
    done(0);
    return { w: out[0]!.w, parts: out };
  };
  /** End of a weight: everything read for it is dead. */
  const done = <T>(v: T): T => {
    host.release(host.held);
    return v;
  };
  const embedParts = done(up.matrixParts(await get('model.embed_tokens.weight')));
  const embed = embedParts[0]!;
  await up.settle();
  const layers: LlamaLayerWeights[] = [];
  for (let l = 0; l < cfg.layers; l++) {
    const p = `model.layers.${l}.`;
    const qkv: LinearWeight = cfg.fusedProjections
      ? { w: done(up.matrix(await get(`${p}self_attn.qkv_proj.weight`))) }
      : fusedLinear([await get(`${p}self_attn.q_proj.weight`), await get(`${p}self_attn.k_proj.weight`), await get(`${p}self_attn.v_proj.weight`)]);
    if (cfg.attentionBias) {
      const biases = [await get(`${p}self_attn.q_proj.bias`), await get(`${p}self_attn.k_proj.bias`), await get(`${p}self_attn.v_proj.bias`)];
      if (qkv.parts) {
        // Each part adds its own bias in its own matmul.
        qkv.parts = qkv.parts.map((part, i) => ({ ...part, bias: up.vector({ kind: 'f32', shape: [biases[i]!.shape[0]!], data: toF32(biases[i]!) }) }));
        qkv.bias = done(qkv.parts[0]!.bias);
      } else {
        const joined = new Float32Array(biases.reduce((a, b) => a + b.shape[0]!, 0));
        let o = 0;
        for (const b of biases) joined.set(toF32(b), (o += b.shape[0]!) - b.shape[0]!);
        qkv.bias = done(up.vector({ kind: 'f32', shape: [joined.length], data: joined }));
      }
    }
    const layer: LlamaLayerWeights = {
      inNorm: await norm(`${p}input_layernorm.weight`),
      qkv,
      o: { w: done(up.matrix(await get(`${p}self_attn.o_proj.weight`))) },
      postNorm: await norm(cfg.sandwichNorms ? `${p}pre_feedforward_layernorm.weight` : `${p}post_attention_layernorm.weight`),
      gu: cfg.fusedProjections ? { w: done(up.matrix(await get(`${p}mlp.gate_up_proj.weight`))) } : fusedLinear([await get(`${p}mlp.gate_proj.weight`), await get(`${p}mlp.up_proj.weight`)]),
      down: { w: done(up.matrix(await get(`${p}mlp.down_proj.weight`))) },
    };
    if (cfg.sandwichNorms) {
      layer.attnOutNorm = await norm(`${p}post_attention_layernorm.weight`);
      layer.mlpOutNorm = await norm(`${p}post_feedforward_layernorm.weight`);
    }
    if (cfg.qkNorm) {
      layer.qNorm = await norm(`${p}self_attn.q_norm.weight`);
      layer.kNorm = await norm(`${p}self_attn.k_norm.weight`);
    }
    layers.push(layer);
    await up.settle();
  }
  const final = await norm('model.norm.weight');
  const headParts = cfg.tieEmbeddings || !src.has('lm_head.weight') ? embedParts : done(up.matrixParts(await get('lm_head.weight')));
  const head: LinearWeight = { w: headParts[0]! };
  const split = {
    ...(embedParts.length > 1 ? { embedParts } : {}),
    ...(headParts.length > 1 ? { headParts } : {}),
  };
  return { embed, ...split, layers, norm: final, head, bytes: up.bytes, ...(packer ? { packed: packer.buffer } : {}) };
}

/** Element count a tensor of this HF name has under `cfg` (packing checks sources against its plan). */
function expectedNumel(cfg: DecoderConfig, name: string): number {
  const D = cfg.hiddenSize;
  const hd = cfg.headDim;
  const leaf = name.replace(/^model\.layers\.\d+\./, '');
  const table: Record<string, number> = {
    'model.embed_tokens.weight': cfg.vocabSize * D,
    'lm_head.weight': cfg.vocabSize * D,
    'model.norm.weight': D,
    'input_layernorm.weight': D,
    'post_attention_layernorm.weight': D,
    'pre_feedforward_layernorm.weight': D,
    'post_feedforward_layernorm.weight': D,
    'self_attn.qkv_proj.weight': (cfg.heads + 2 * cfg.kvHeads) * hd * D,
    'mlp.gate_up_proj.weight': 2 * cfg.intermediateSize * D,
    'self_attn.q_proj.weight': cfg.heads * hd * D,
    'self_attn.k_proj.weight': cfg.kvHeads * hd * D,
    'self_attn.v_proj.weight': cfg.kvHeads * hd * D,
    'self_attn.q_proj.bias': cfg.heads * hd,
    'self_attn.k_proj.bias': cfg.kvHeads * hd,
    'self_attn.v_proj.bias': cfg.kvHeads * hd,
    'self_attn.o_proj.weight': D * cfg.heads * hd,
    'self_attn.q_norm.weight': hd,
    'self_attn.k_norm.weight': hd,
    'mlp.gate_proj.weight': cfg.intermediateSize * D,
    'mlp.up_proj.weight': cfg.intermediateSize * D,
    'mlp.down_proj.weight': D * cfg.intermediateSize,
  };
  const n = table[leaf] ?? table[name];
  if (n === undefined) throw new Error(`weight packing: no planned size for ${name}`);
  return n;
}

export function destroyLlamaWeights(w: LlamaWeights): void {
  const seen = new Set<GPUBuffer>();
  const kill = (t: Tensor | undefined): void => {
    if (!t) return;
    for (const b of [t.buffer, t.scales]) if (b && !seen.has(b)) seen.add(b), b.destroy();
  };
  kill(w.embed);
  kill(w.norm);
  kill(w.head.w);
  for (const t of [...(w.embedParts ?? []), ...(w.headParts ?? [])]) kill(t);
  for (const l of w.layers) {
    for (const t of [l.inNorm, l.qkv.w, l.qkv.bias, l.qNorm, l.kNorm, l.o.w, l.postNorm, l.gu.w, l.down.w, l.attnOutNorm, l.mlpOutNorm]) kill(t);
    for (const part of [...(l.qkv.parts ?? []), ...(l.gu.parts ?? [])]) {
      kill(part.w);
      kill(part.bias);
    }
  }
}
