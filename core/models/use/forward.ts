/**
 * The USE-Lite transformer body on the GPU, built from the encoder kernels (embedding,
 * layer_norm, matmul, encoder_attention, activation; no kernel of its own): records one
 * forward pass over a padded batch (B rows of S token slots, row b holding lengths[b]
 * real tokens then padding) and returns the last hidden states [B*S, D] (padding rows hold
 * finite junk). Nothing here submits or reads back; model.ts does both.
 *
 * What the tfjs graph computes, as converted (convert.ts checks each piece):
 *   x0 = 2 * E[id] + timing[pos]         (the stack adds its timing layer's output, e + t,
 *                                          to that layer's input e; timing = sin | cos)
 *   per layer (pre-norm, no final norm):
 *     h = (x, or x Wr + br) + MHA(LN(x)) Wo + bo     bidirectional, padding keys masked
 *     h = h + relu(LN(h) W1 + b1) W2 + b2
 * The first layer is narrower (E = 256 in, D = 512 out): its residual goes through a dense.
 * Pooling (masked mean), the tanh dense and the l2 normalization run on the host.
 *
 * Dispatches: 1 (embedding) + per layer 8, or 9 with the residual projection.
 */
import type { GpuContext } from '../../gpu/context.ts';
import type { Recorder } from '../../gpu/recorder.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { act } from '../../ops/activation.ts';
import { embedding } from '../../ops/embedding.ts';
import { encoderAttention } from '../../ops/encoder_attention.ts';
import { layerNorm } from '../../ops/layer_norm.ts';
import { matmul } from '../../ops/matmul.ts';
import type { UseLiteConfig } from './config.ts';
import type { UseWeights } from './weights.ts';

const STORAGE = 0x80 | 0x08 | 0x04; // STORAGE | COPY_DST | COPY_SRC

/** One padded batch, host side: ids and positions [B * S] u32, lengths [B] u32. */
export interface UseBatch {
  B: number;
  S: number;
  ids: Uint32Array;
  positions: Uint32Array;
  lengths: Uint32Array;
}

type Section = 'ids' | 'positions' | 'lengths';
type Buf = 'x0' | 'norm' | 'qkv' | 'att' | 'h' | 'ff';

export class UseEncoder {
  private readonly input: GPUBuffer;
  private readonly offsets: Record<Section, number>;
  private readonly staging: Uint32Array<ArrayBuffer>;
  private readonly buf: Record<Buf, GPUBuffer>;

  /** `maxTokens`: capacity in token slots (B * S) per forward pass. */
  constructor(
    readonly ctx: GpuContext,
    readonly cfg: UseLiteConfig,
    readonly weights: UseWeights,
    readonly maxTokens: number,
  ) {
    const { device } = ctx;
    const align = ctx.gpu.limits.minStorageBufferOffsetAlignment;
    const T = maxTokens;
    let at = 0;
    const offsets = {} as Record<Section, number>;
    for (const name of ['ids', 'positions', 'lengths'] as const) {
      offsets[name] = at;
      at += Math.ceil((T * 4) / align) * align; // B <= T, so every section holds T entries
    }
    this.offsets = offsets;
    this.input = device.createBuffer({ size: at, usage: STORAGE, label: 'use-inputs' });
    this.staging = new Uint32Array(at / 4);
    const widest = Math.max(cfg.embeddingSize, cfg.hiddenSize);
    const att = Math.max(...cfg.layers.map((l) => l.heads * l.headDim));
    const f32 = (n: number, label: string): GPUBuffer => device.createBuffer({ size: Math.max(16, n * 4), usage: STORAGE, label });
    this.buf = {
      x0: f32(T * cfg.embeddingSize, 'use-x0'),
      norm: f32(T * widest, 'use-norm'),
      qkv: f32(T * 3 * att, 'use-qkv'),
      att: f32(T * att, 'use-att'),
      h: f32(T * cfg.hiddenSize, 'use-h'),
      ff: f32(T * cfg.intermediateSize, 'use-ff'),
    };
  }

  private view(name: Section, n: number): Tensor {
    return { buffer: this.input, offset: this.offsets[name], shape: [n], dtype: 'u32' };
  }

  private t(name: Buf, rows: number, cols: number): Tensor {
    return { buffer: this.buf[name], offset: 0, shape: [rows, cols], dtype: 'f32' };
  }

  /** Records the forward pass; returns the last hidden states [B*S, D], valid once submitted. */
  async record(rec: Recorder, b: UseBatch): Promise<Tensor> {
    const c = this.cfg;
    const w = this.weights;
    const T = b.B * b.S;
    if (T > this.maxTokens) throw new Error(`USE batch of ${b.B} x ${b.S} tokens exceeds capacity ${this.maxTokens}`);
    if (b.S > c.maxTokens) throw new Error(`USE rows hold at most ${c.maxTokens} tokens, got ${b.S}`);
    for (const [name, a] of [['ids', b.ids], ['positions', b.positions], ['lengths', b.lengths]] as const) this.staging.set(a, this.offsets[name] / 4);
    this.ctx.device.queue.writeBuffer(this.input, 0, this.staging);

    const D = c.hiddenSize;
    const eps = c.layerNormEps;
    const h = this.t('h', T, D);
    // Without a first-layer projection (E == D) the embeddings are the residual stream itself.
    const x0 = c.layers[0]!.residualProjection ? this.t('x0', T, c.embeddingSize) : h;
    const ff = this.t('ff', T, c.intermediateSize);
    await embedding(rec, this.view('ids', T), w.word, x0, { scale: c.embeddingScale, positions: this.view('positions', T), posTable: w.timing });
    for (const [l, L] of w.layers.entries()) {
      const lc = c.layers[l]!;
      const A = lc.heads * lc.headDim;
      const x = l === 0 ? x0 : h;
      const qkv = this.t('qkv', T, 3 * A);
      const att = this.t('att', T, A);
      await layerNorm(rec, x, L.attnNorm.w, L.attnNorm.b, this.t('norm', T, lc.inputSize), { eps });
      await matmul(rec, this.t('norm', T, lc.inputSize), L.qkv, qkv);
      await encoderAttention(rec, qkv, this.view('lengths', b.B), att, {
        batch: b.B, seqLen: b.S, heads: lc.heads, headDim: lc.headDim, rowStride: 3 * A, scale: lc.attnScale,
      });
      if (L.residual) await matmul(rec, x, L.residual, h); // h = x Wr + br; else x is h
      await matmul(rec, att, L.out, h, { accumulate: true }); // h += att Wo + bo
      await layerNorm(rec, h, L.ffnNorm.w, L.ffnNorm.b, this.t('norm', T, D), { eps });
      await matmul(rec, this.t('norm', T, D), L.ffnIn, ff);
      await act(rec, ff, ff, { act: 'relu' });
      await matmul(rec, ff, L.ffnOut, h, { accumulate: true });
    }
    return h;
  }

  destroy(): void {
    this.input.destroy();
    for (const b of Object.values(this.buf)) b.destroy();
  }
}
