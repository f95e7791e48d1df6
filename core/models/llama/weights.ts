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
import type { LinearWeight } from '../../ops/matmul.ts';
import { ModelFormatError } from '../../errors.ts';
import { STORAGE } from '../../gpu/buffers.ts';
import { dequantize, uploadWeight } from '../../ops/quant.ts';
import { concatRows, type HostTensor, type WeightDType, type WeightSource } from '../host_tensor.ts';

export interface LlamaLayerWeights {
  inNorm: Tensor;
  qkv: LinearWeight;
  qNorm?: Tensor;
  kNorm?: Tensor;
  o: LinearWeight;
  postNorm: Tensor;
  gu: LinearWeight;
  down: LinearWeight;
}

export interface LlamaWeights {
  embed: Tensor;
  layers: LlamaLayerWeights[];
  norm: Tensor;
  head: LinearWeight;
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

function toF32(t: HostTensor): Float32Array {
  if (t.kind === 'f32') return t.data;
  const rows = t.shape[0]!;
  const cols = t.shape[t.shape.length - 1]!;
  return dequantize(t.kind, { data: t.data, scales: t.scales }, rows, cols);
}

export class WeightUploader {
  bytes = 0;
  constructor(
    private readonly ctx: GpuContext,
    private readonly dtype: WeightDType,
    /** Pack every tensor as f32 into this one buffer instead of one buffer each. */
    private readonly packer?: Packer,
  ) {
    if (packer) this.bytes = packer.buffer.size;
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
    if (this.packer) return this.packer.put(toF32(t), [rows, cols]);
    if (t.kind !== 'f32' && (this.dtype === 'auto' || this.dtype === t.kind)) {
      return this.track(this.ctx.tensor(t.data, [rows, cols], t.kind, t.scales));
    }
    let target = this.dtype === 'auto' ? 'f32' : this.dtype;
    if ((target === 'q8_0' || target === 'q4_0') && cols % 32 !== 0) target = 'f16';
    return this.track(uploadWeight(this.ctx, toF32(t), rows, cols, target));
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
    return await uploadAll(cfg, src, new WeightUploader(ctx, dtype, packer), packer);
  } catch (e) {
    packer?.buffer.destroy();
    throw e;
  }
}

async function uploadAll(cfg: DecoderConfig, src: WeightSource, up: WeightUploader, packer: Packer | undefined): Promise<LlamaWeights> {
  const get = async (n: string): Promise<HostTensor> => {
    const t = await src.load(n);
    if (packer && t.shape.reduce((a, b) => a * b, 1) !== expectedNumel(cfg, n)) {
      throw new ModelFormatError(`${n} has shape [${t.shape.join(', ')}], which does not match config.json`, { tensor: n });
    }
    return t;
  };
  const embedHost = await get('model.embed_tokens.weight');
  const embed = up.matrix(embedHost);
  const layers: LlamaLayerWeights[] = [];
  for (let l = 0; l < cfg.layers; l++) {
    const p = `model.layers.${l}.`;
    const qkvW = concatRows([await get(`${p}self_attn.q_proj.weight`), await get(`${p}self_attn.k_proj.weight`), await get(`${p}self_attn.v_proj.weight`)]);
    const qkv: LinearWeight = { w: up.matrix(qkvW) };
    if (cfg.attentionBias) {
      const parts = [await get(`${p}self_attn.q_proj.bias`), await get(`${p}self_attn.k_proj.bias`), await get(`${p}self_attn.v_proj.bias`)];
      const joined = new Float32Array(parts.reduce((a, b) => a + b.shape[0]!, 0));
      let o = 0;
      for (const b of parts) joined.set(toF32(b), (o += b.shape[0]!) - b.shape[0]!);
      qkv.bias = up.vector({ kind: 'f32', shape: [joined.length], data: joined });
    }
    const layer: LlamaLayerWeights = {
      inNorm: up.vector(await get(`${p}input_layernorm.weight`)),
      qkv,
      o: { w: up.matrix(await get(`${p}self_attn.o_proj.weight`)) },
      postNorm: up.vector(await get(`${p}post_attention_layernorm.weight`)),
      gu: { w: up.matrix(concatRows([await get(`${p}mlp.gate_proj.weight`), await get(`${p}mlp.up_proj.weight`)])) },
      down: { w: up.matrix(await get(`${p}mlp.down_proj.weight`)) },
    };
    if (cfg.qkNorm) {
      layer.qNorm = up.vector(await get(`${p}self_attn.q_norm.weight`));
      layer.kNorm = up.vector(await get(`${p}self_attn.k_norm.weight`));
    }
    layers.push(layer);
  }
  const norm = up.vector(await get('model.norm.weight'));
  const head: LinearWeight =
    cfg.tieEmbeddings || !src.has('lm_head.weight') ? { w: embed } : { w: up.matrix(await get('lm_head.weight')) };
  return { embed, layers, norm, head, bytes: up.bytes, ...(packer ? { packed: packer.buffer } : {}) };
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
  for (const l of w.layers) {
    for (const t of [l.inNorm, l.qkv.w, l.qkv.bias, l.qNorm, l.kNorm, l.o.w, l.postNorm, l.gu.w, l.down.w]) kill(t);
  }
}
