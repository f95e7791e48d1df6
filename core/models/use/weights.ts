/**
 * USE-Lite weights from a converted model.safetensors (names in config.ts) onto the GPU,
 * plus the host-side tanh head and the timing-signal table.
 *
 * Linear weights go through the shared WeightUploader, so `dtype` (f32 / f16 / q8_0 /
 * q4_0) works as for the other models; LayerNorm vectors and biases stay f32. The sinusoid
 * timing signal is precomputed as a [maxTokens, E] f32 table for the embedding op's
 * position rows, rounded exactly as tfjs computes it (f32 product p * inv, then f32 sin /
 * cos), so the model input matches the package bit for bit. The tanh head touches one
 * vector per input, so it runs on the host like the BERT heads (bert/pooling.ts).
 */
import { ModelFormatError } from '../../errors.ts';
import type { GpuContext } from '../../gpu/context.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import type { LinearWeight } from '../../ops/matmul.ts';
import type { WeightDType } from '../host_tensor.ts';
import { loadHostLinear, type HostLinear, type NormWeights, type TensorSource } from '../bert/weights.ts';
import { WeightUploader } from '../llama/weights.ts';
import type { UseLiteConfig } from './config.ts';

export interface UseLayerWeights {
  attnNorm: NormWeights;
  /** Fused q | k | v [3A, in] + bias. */
  qkv: LinearWeight;
  /** Attention output [D, A] + bias. */
  out: LinearWeight;
  /** Residual projection [D, in] + bias (first layer, E != D), else null. */
  residual: LinearWeight | null;
  ffnNorm: NormWeights;
  ffnIn: LinearWeight;
  ffnOut: LinearWeight;
}

export interface UseWeights {
  /** Token embeddings [rows, E]. */
  word: Tensor;
  /** Timing signal [maxTokens, E] f32: row p = sin(p * inv) | cos(p * inv). */
  timing: Tensor;
  layers: UseLayerWeights[];
  /** Tanh dense [out, D] on the host. */
  head: HostLinear;
  /** GPU bytes. */
  bytes: number;
}

/** The timing signal rows 0..rows-1, as tfjs computes them in f32. */
export function timingTable(inv: Float32Array, rows: number): Float32Array {
  const half = inv.length;
  const out = new Float32Array(rows * 2 * half);
  for (let p = 0; p < rows; p++) {
    for (let i = 0; i < half; i++) {
      const t = Math.fround(p * inv[i]!);
      out[p * 2 * half + i] = Math.sin(t);
      out[p * 2 * half + half + i] = Math.cos(t);
    }
  }
  return out;
}

export async function loadUseWeights(ctx: GpuContext, cfg: UseLiteConfig, src: TensorSource, dtype: WeightDType): Promise<UseWeights> {
  const up = new WeightUploader(ctx, dtype);
  const get = async (n: string, shape: number[]): Promise<Awaited<ReturnType<TensorSource['load']>>> => {
    const t = await src.load(n);
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) throw new ModelFormatError(`${n} is [${t.shape}], expected [${shape}]`, { tensor: n });
    return t;
  };
  const vec = async (n: string, len: number): Promise<Tensor> => up.vector(await get(n, [len]));
  const norm = async (n: string, len: number): Promise<NormWeights> => ({ w: await vec(`${n}.weight`, len), b: await vec(`${n}.bias`, len) });
  const linear = async (n: string, outF: number, inF: number): Promise<LinearWeight> => ({ w: up.matrix(await get(`${n}.weight`, [outF, inF])), bias: await vec(`${n}.bias`, outF) });

  const { embeddingRows: V, embeddingSize: E, hiddenSize: D, intermediateSize: I } = cfg;
  const word = up.matrix(await get('embeddings.word.weight', [V, E]));
  const inv = (await get('embeddings.timing.inv_timescales', [E / 2])).data;
  const timing = ctx.tensor(timingTable(inv, cfg.maxTokens), [cfg.maxTokens, E], 'f32');
  const layers: UseLayerWeights[] = [];
  for (const [l, lc] of cfg.layers.entries()) {
    const p = `layers.${l}.`;
    const A = lc.heads * lc.headDim;
    layers.push({
      attnNorm: await norm(`${p}attn_norm`, lc.inputSize),
      qkv: await linear(`${p}attn.qkv`, 3 * A, lc.inputSize),
      out: await linear(`${p}attn.out`, D, A),
      residual: lc.residualProjection ? await linear(`${p}residual`, D, lc.inputSize) : null,
      ffnNorm: await norm(`${p}ffn_norm`, D),
      ffnIn: await linear(`${p}ffn.in`, I, D),
      ffnOut: await linear(`${p}ffn.out`, D, I),
    });
  }
  const head = await loadHostLinear(src, 'head');
  if (head.inFeatures !== D || head.outFeatures !== cfg.outputSize) throw new ModelFormatError(`head is [${head.outFeatures}, ${head.inFeatures}], expected [${cfg.outputSize}, ${D}]`);
  return { word, timing, layers, head, bytes: up.bytes + timing.buffer.size };
}

export function destroyUseWeights(w: UseWeights): void {
  const seen = new Set<GPUBuffer>();
  const kill = (t: Tensor | undefined): void => {
    for (const b of [t?.buffer, t?.scales]) if (b && !seen.has(b)) seen.add(b), b.destroy();
  };
  kill(w.word);
  kill(w.timing);
  for (const l of w.layers) {
    for (const lin of [l.qkv, l.out, l.residual, l.ffnIn, l.ffnOut]) if (lin) kill(lin.w), kill(lin.bias);
    for (const n of [l.attnNorm, l.ffnNorm]) kill(n.w), kill(n.b);
  }
}
