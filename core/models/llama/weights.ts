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
  ) {}

  private track(t: Tensor): Tensor {
    this.bytes += t.buffer.size + (t.scales?.size ?? 0);
    return t;
  }

  /** A 1-D f32 vector (norm weights, biases). */
  vector(t: HostTensor): Tensor {
    const data = toF32(t);
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
    if (t.kind !== 'f32' && (this.dtype === 'auto' || this.dtype === t.kind)) {
      return this.track(this.ctx.tensor(t.data, [rows, cols], t.kind, t.scales));
    }
    let target = this.dtype === 'auto' ? 'f32' : this.dtype;
    if ((target === 'q8_0' || target === 'q4_0') && cols % 32 !== 0) target = 'f16';
    return this.track(uploadWeight(this.ctx, toF32(t), rows, cols, target));
  }
}

export async function loadLlamaWeights(ctx: GpuContext, cfg: DecoderConfig, src: WeightSource, dtype: WeightDType): Promise<LlamaWeights> {
  const up = new WeightUploader(ctx, dtype);
  const get = (n: string): Promise<HostTensor> => src.load(n);
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
  return { embed, layers, norm, head, bytes: up.bytes };
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
