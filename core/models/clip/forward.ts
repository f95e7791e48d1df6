/**
 * The CLIP vision transformer on the GPU (CLIPVisionTransformer up to an inner
 * layer; post_layernorm is not applied: LLaVA reads hidden states), built from
 * the encoder kernels: matmul, layer_norm, encoder_attention (bidirectional, every
 * image a full row of S = patches + 1 tokens), activation (quick_gelu).
 *
 * Embeddings (2 dispatches + 1 copy): x = base (position embeddings, class
 * embedding folded into row 0, copied per image) += patches · Wpatchᵀ, where
 * `patches` holds each image's flattened patches with an all-zero row 0 in the CLS
 * slot, so one accumulating matmul yields [cls; patch embeds] + positions; then
 * pre_layrnorm in place. Per layer (pre-norm, 8 dispatches): h = LN1(x), qkv (+bias),
 * attention, x += o-proj (+bias), h = LN2(x), fc1 (+bias), activation in place,
 * x += fc2 (+bias). Nothing here submits or reads back.
 */
import type { GpuContext } from '../../gpu/context.ts';
import type { Recorder } from '../../gpu/recorder.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { act, type Act } from '../../ops/activation.ts';
import { encoderAttention } from '../../ops/encoder_attention.ts';
import { layerNorm } from '../../ops/layer_norm.ts';
import { matmul } from '../../ops/matmul.ts';
import { encoderAct } from '../bert/forward.ts';
import type { ClipVisionConfig } from './config.ts';
import type { ClipVisionWeights } from './weights.ts';

const STORAGE = 0x80 | 0x08 | 0x04; // STORAGE | COPY_DST | COPY_SRC

/** HF hidden_act of a vision tower -> our activation kernel. */
export function visionAct(hiddenAct: string): Act {
  return hiddenAct === 'quick_gelu' ? 'quick_gelu' : encoderAct(hiddenAct);
}

/**
 * Writes image `pixels` [3, S, S] f32 (CHW) as patch rows into `out` from row
 * `row`: row `row` is the zero CLS slot, then one row of 3*p*p elements per
 * patch, patches row-major over the grid, elements in (channel, y, x) order
 * (the conv weight's [D, 3, p, p] order).
 */
export function patchify(pixels: Float32Array, cfg: ClipVisionConfig, out: Float32Array, row: number): void {
  const p = cfg.patchSize;
  const S = cfg.imageSize;
  const g = S / p;
  const K = 3 * p * p;
  out.fill(0, row * K, (row + 1) * K);
  for (let gy = 0; gy < g; gy++) {
    for (let gx = 0; gx < g; gx++) {
      let o = (row + 1 + gy * g + gx) * K;
      for (let c = 0; c < 3; c++) {
        for (let y = 0; y < p; y++) {
          const src = c * S * S + (gy * p + y) * S + gx * p;
          out.set(pixels.subarray(src, src + p), o);
          o += p;
        }
      }
    }
  }
}

export class ClipVisionTower {
  /** Token rows per image: patches + the CLS row. */
  readonly seqLen: number;
  private readonly base: GPUBuffer;
  private readonly lengths: GPUBuffer;
  private readonly buf: Record<'x' | 'h' | 'qkv' | 'att' | 'ff', GPUBuffer>;
  private readonly act: Act;

  /** `maxImages`: images per forward pass (sizes the activation buffers). */
  constructor(
    readonly ctx: GpuContext,
    readonly cfg: ClipVisionConfig,
    readonly weights: ClipVisionWeights,
    readonly maxImages: number,
  ) {
    this.act = visionAct(cfg.hiddenAct);
    const S = (this.seqLen = cfg.patches + 1);
    const D = cfg.hiddenSize;
    const T = maxImages * S;
    const { device } = ctx;
    const f32 = (n: number, label: string): GPUBuffer => device.createBuffer({ size: Math.max(16, n * 4), usage: STORAGE, label });
    this.buf = { x: f32(T * D, 'vit-x'), h: f32(T * D, 'vit-h'), qkv: f32(T * 3 * D, 'vit-qkv'), att: f32(T * D, 'vit-att'), ff: f32(T * cfg.intermediateSize, 'vit-ff') };
    const tiled = new Float32Array(T * D);
    for (let b = 0; b < maxImages; b++) tiled.set(weights.base, b * S * D);
    this.base = f32(T * D, 'vit-base');
    device.queue.writeBuffer(this.base, 0, tiled);
    this.lengths = device.createBuffer({ size: Math.max(16, maxImages * 4), usage: STORAGE, label: 'vit-lengths' });
    device.queue.writeBuffer(this.lengths, 0, new Uint32Array(maxImages).fill(S));
  }

  private t(name: keyof ClipVisionTower['buf'], shape: number[]): Tensor {
    return { buffer: this.buf[name], offset: 0, shape, dtype: 'f32' };
  }

  /**
   * Records the tower over B images. `patches` [B*S, 3*p*p] f32 from patchify.
   * Returns the hidden states after the loaded layers, [B*S, D] (valid after submit,
   * overwritten by the next record).
   */
  async record(rec: Recorder, patches: Tensor, B: number): Promise<Tensor> {
    if (B < 1 || B > this.maxImages) throw new Error(`ClipVisionTower: ${B} images per pass (max ${this.maxImages})`);
    const c = this.cfg;
    const w = this.weights;
    const S = this.seqLen;
    const D = c.hiddenSize;
    const T = B * S;
    const eps = c.layerNormEps;
    const x = this.t('x', [T, D]);
    const h = this.t('h', [T, D]);
    const qkv = this.t('qkv', [T, 3 * D]);
    const att = this.t('att', [T, D]);
    const ff = this.t('ff', [T, c.intermediateSize]);
    rec.copy(this.base, 0, this.buf.x, 0, T * D * 4);
    await matmul(rec, patches, w.patch, x, { accumulate: true });
    await layerNorm(rec, x, w.preNorm.w, w.preNorm.b, x, { eps });
    const lengths: Tensor = { buffer: this.lengths, offset: 0, shape: [B], dtype: 'u32' };
    const heads = { batch: B, seqLen: S, heads: c.heads, headDim: D / c.heads, rowStride: 3 * D };
    for (const L of w.layers) {
      await layerNorm(rec, x, L.ln1.w, L.ln1.b, h, { eps });
      await matmul(rec, h, L.qkv, qkv);
      await encoderAttention(rec, qkv, lengths, att, heads);
      await matmul(rec, att, L.o, x, { accumulate: true });
      await layerNorm(rec, x, L.ln2.w, L.ln2.b, h, { eps });
      await matmul(rec, h, L.fc1, ff);
      await act(rec, ff, ff, { act: this.act });
      await matmul(rec, ff, L.fc2, x, { accumulate: true });
    }
    return x;
  }

  destroy(): void {
    for (const b of [...Object.values(this.buf), this.base, this.lengths]) b.destroy();
  }
}
