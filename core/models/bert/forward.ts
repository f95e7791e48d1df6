/**
 * The BERT-family encoder body on the GPU: records one forward pass over a padded batch
 * (B rows of S token slots, row b holding lengths[b] real tokens then padding) into a
 * Recorder and returns the last hidden states [B*S, D] (padding rows hold finite junk).
 * Nothing here submits or reads back; the caller does both (see encoder.ts).
 *
 * Embeddings: word + absolute position + token type rows, then LayerNorm (2 dispatches).
 * Per layer (post-norm, 8 dispatches): fused qkv matmul (+bias), bidirectional attention
 * with the padding mask (encoder_attention), output dense accumulated into the residual
 * stream x, LayerNorm(x) in place, intermediate matmul (+bias), activation (GELU) in place,
 * output dense accumulated into x, LayerNorm(x) in place.
 */
import { UnsupportedModelError } from '../../errors.ts';
import type { EncoderConfig } from '../../formats/hf_config.ts';
import type { GpuContext } from '../../gpu/context.ts';
import type { Recorder } from '../../gpu/recorder.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { act, type Act } from '../../ops/activation.ts';
import { embedding } from '../../ops/embedding.ts';
import { encoderAttention } from '../../ops/encoder_attention.ts';
import { gatherRows } from '../../ops/gather_rows.ts';
import { layerNorm } from '../../ops/layer_norm.ts';
import { matmul } from '../../ops/matmul.ts';
import type { BertWeights } from './weights.ts';

const STORAGE = 0x80 | 0x08 | 0x04; // STORAGE | COPY_DST | COPY_SRC

/** One padded batch, host side: all arrays [B * S] u32 except lengths [B]. */
export interface PaddedBatch {
  B: number;
  S: number;
  ids: Uint32Array;
  positions: Uint32Array;
  typeIds: Uint32Array;
  lengths: Uint32Array;
}

/** HF hidden_act -> our activation kernel. */
export function encoderAct(hiddenAct: string): Act {
  switch (hiddenAct) {
    case 'gelu':
      return 'gelu';
    case 'gelu_new':
    case 'gelu_pytorch_tanh':
    case 'gelu_fast':
      return 'gelu_tanh';
    case 'relu':
      return 'relu';
    case 'silu':
    case 'swish':
      return 'silu';
    default:
      throw new UnsupportedModelError(`hidden_act ${hiddenAct} is not supported (gelu, gelu_new, gelu_pytorch_tanh, relu, silu)`, { hiddenAct });
  }
}

type Section = 'ids' | 'positions' | 'typeIds' | 'lengths' | 'rows';

export class BertEncoder {
  private readonly input: GPUBuffer;
  private readonly offsets: Record<Section, number>;
  private readonly staging: Uint32Array<ArrayBuffer>;
  private readonly buf: Record<'x' | 'qkv' | 'att' | 'ff', GPUBuffer>;
  private readonly act: Act;

  /** `maxTokens`: capacity in token slots (B * S) per forward pass. */
  constructor(
    readonly ctx: GpuContext,
    readonly cfg: EncoderConfig,
    readonly weights: BertWeights,
    readonly maxTokens: number,
  ) {
    if ((cfg.hiddenSize / cfg.heads) % 4 !== 0 || cfg.hiddenSize % cfg.heads !== 0) {
      throw new UnsupportedModelError(`head size ${cfg.hiddenSize / cfg.heads} is not a multiple of 4`);
    }
    this.act = encoderAct(cfg.hiddenAct);
    const { device } = ctx;
    const align = ctx.gpu.limits.minStorageBufferOffsetAlignment;
    const T = maxTokens;
    let at = 0;
    const offsets = {} as Record<Section, number>;
    for (const name of ['ids', 'positions', 'typeIds', 'lengths', 'rows'] as const) {
      offsets[name] = at;
      at += Math.ceil((T * 4) / align) * align; // B <= T, so every section holds T entries
    }
    this.offsets = offsets;
    this.input = device.createBuffer({ size: at, usage: STORAGE, label: 'encoder-inputs' });
    this.staging = new Uint32Array(at / 4);
    const D = cfg.hiddenSize;
    const f32 = (n: number, label: string): GPUBuffer => device.createBuffer({ size: Math.max(16, n * 4), usage: STORAGE, label });
    this.buf = {
      x: f32(T * D, 'enc-x'),
      qkv: f32(T * 3 * D, 'enc-qkv'),
      att: f32(T * D, 'enc-att'),
      ff: f32(T * cfg.intermediateSize, 'enc-ff'),
    };
  }

  private view(name: Section, n: number): Tensor {
    return { buffer: this.input, offset: this.offsets[name], shape: [n], dtype: 'u32' };
  }

  private t(name: keyof BertEncoder['buf'], shape: number[]): Tensor {
    return { buffer: this.buf[name], offset: 0, shape, dtype: 'f32' };
  }

  /** Uploads the batch (and optional gather rows) with one queue write, ordered before the submit. */
  private upload(b: PaddedBatch, rows?: Uint32Array): void {
    const T = b.B * b.S;
    if (T > this.maxTokens) throw new Error(`encoder batch of ${b.B} x ${b.S} tokens exceeds capacity ${this.maxTokens}`);
    for (const [name, a] of [['ids', b.ids], ['positions', b.positions], ['typeIds', b.typeIds], ['lengths', b.lengths], ['rows', rows]] as const) {
      if (a) this.staging.set(a, this.offsets[name] / 4);
    }
    this.ctx.device.queue.writeBuffer(this.input, 0, this.staging);
  }

  /**
   * Records the forward pass. Returns the last hidden states [B*S, D], or, with `rows`
   * (token indices into the batch, e.g. each row's first token b*S), just those rows [R, D].
   * Valid once the recorder is submitted; overwritten by the next record().
   */
  async record(rec: Recorder, b: PaddedBatch, rows?: Uint32Array): Promise<Tensor> {
    const c = this.cfg;
    const w = this.weights;
    const T = b.B * b.S;
    const D = c.hiddenSize;
    this.upload(b, rows);
    const x = this.t('x', [T, D]);
    const qkv = this.t('qkv', [T, 3 * D]);
    const att = this.t('att', [T, D]);
    const ff = this.t('ff', [T, c.intermediateSize]);
    const eps = c.layerNormEps;

    await embedding(rec, this.view('ids', T), w.word, x, {
      positions: this.view('positions', T),
      posTable: w.pos,
      typeIds: this.view('typeIds', T),
      typeTable: w.type,
    });
    await layerNorm(rec, x, w.embNorm.w, w.embNorm.b, x, { eps });
    const heads = { batch: b.B, seqLen: b.S, heads: c.heads, headDim: D / c.heads, rowStride: 3 * D };
    for (const L of w.layers) {
      await matmul(rec, x, L.qkv, qkv);
      await encoderAttention(rec, qkv, this.view('lengths', b.B), att, heads);
      await matmul(rec, att, L.o, x, { accumulate: true }); // x += attn · Woᵀ + bo
      await layerNorm(rec, x, L.attnNorm.w, L.attnNorm.b, x, { eps });
      await matmul(rec, x, L.inter, ff);
      await act(rec, ff, ff, { act: this.act });
      await matmul(rec, ff, L.out, x, { accumulate: true });
      await layerNorm(rec, x, L.outNorm.w, L.outNorm.b, x, { eps });
    }
    if (!rows) return x;
    const out = this.t('att', [rows.length, D]); // att is free after the last layer
    await gatherRows(rec, x, this.view('rows', rows.length), out);
    return out;
  }

  destroy(): void {
    this.input.destroy();
    for (const b of Object.values(this.buf)) b.destroy();
  }
}
