/**
 * The image side of LLaVA: bytes -> RGB -> CLIP pixels -> vision tower (to
 * `vision_feature_layer`) -> feature rows (CLS dropped for "default") ->
 * projector linear_2(act(linear_1(f))) -> rows in the text model's hidden size,
 * one per image placeholder token. Images run in passes of at most
 * `maxImagesPerPass`; one pass at a time (the activation buffers are shared),
 * each one submit and one readback of [B * tokensPerImage, hidden] f32.
 */
import { ModelFormatError } from '../../errors.ts';
import type { GpuContext } from '../../gpu/context.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { decodeImage } from '../../images/decode.ts';
import { parsePreprocessorConfig, preprocessImage, type PreprocessConfig } from '../../images/preprocess.ts';
import { act } from '../../ops/activation.ts';
import { gatherRows } from '../../ops/gather_rows.ts';
import type { LinearWeight } from '../../ops/matmul.ts';
import { matmul } from '../../ops/matmul.ts';
import type { WeightDType, WeightSource } from '../host_tensor.ts';
import { WeightUploader } from '../llama/weights.ts';
import { ClipVisionTower, patchify } from '../clip/forward.ts';
import { destroyClipVisionWeights, loadClipVisionWeights } from '../clip/weights.ts';
import type { LlavaConfig } from './config.ts';
import type { LlavaNames } from './weights.ts';

const STORAGE = 0x80 | 0x08 | 0x04;

export class LlavaVision {
  readonly imageTokenId: number;
  readonly tokensPerImage: number;
  /** Width of a feature row (the text model's hidden size). */
  readonly hiddenSize: number;
  private readonly buf: Record<'sel' | 'p1' | 'out', GPUBuffer>;
  private queue: Promise<unknown> = Promise.resolve();
  /** Forward passes run (tests). */
  passes = 0;

  private constructor(
    readonly ctx: GpuContext,
    readonly cfg: LlavaConfig,
    readonly preprocess: PreprocessConfig,
    private readonly tower: ClipVisionTower,
    private readonly proj: { l1: LinearWeight; l2: LinearWeight },
    readonly bytes: number,
  ) {
    this.imageTokenId = cfg.imageTokenId;
    this.tokensPerImage = cfg.tokensPerImage;
    this.hiddenSize = cfg.text.hiddenSize;
    const rows = tower.maxImages * cfg.tokensPerImage;
    const f32 = (n: number, label: string): GPUBuffer => ctx.device.createBuffer({ size: Math.max(16, n * 4), usage: STORAGE, label });
    this.buf = { sel: f32(rows * cfg.vision.hiddenSize, 'mm-sel'), p1: f32(rows * this.hiddenSize, 'mm-p1'), out: f32(rows * this.hiddenSize, 'mm-out') };
  }

  static async load(ctx: GpuContext, cfg: LlavaConfig, src: WeightSource, names: LlavaNames, preprocessor: unknown, dtype: WeightDType, maxImagesPerPass = 4): Promise<LlavaVision> {
    const pre = parsePreprocessorConfig(preprocessor, cfg.vision.imageSize);
    const w = await loadClipVisionWeights(ctx, cfg.vision, src, names.vision, cfg.visionLayers, dtype);
    const up = new WeightUploader(ctx, dtype);
    const linear = async (n: string): Promise<LinearWeight> => {
      const name = names.projector + n;
      if (!src.has(`${name}.weight`) || !src.has(`${name}.bias`)) throw new ModelFormatError(`missing projector tensors ${name}.weight / .bias`);
      return { w: up.matrix(await src.load(`${name}.weight`)), bias: up.vector(await src.load(`${name}.bias`)) };
    };
    const l1 = await linear('linear_1');
    const l2 = await linear('linear_2');
    if (l1.w.shape.join() !== [cfg.text.hiddenSize, cfg.vision.hiddenSize].join() || l2.w.shape.join() !== [cfg.text.hiddenSize, cfg.text.hiddenSize].join()) {
      throw new ModelFormatError(`projector shapes [${l1.w.shape}], [${l2.w.shape}] do not match vision ${cfg.vision.hiddenSize} -> text ${cfg.text.hiddenSize}`);
    }
    const tower = new ClipVisionTower(ctx, cfg.vision, w, maxImagesPerPass);
    return new LlavaVision(ctx, cfg, pre, tower, { l1, l2 }, w.bytes + up.bytes);
  }

  /** PNG / JPEG bytes -> pixels [3, S, S] f32. */
  async pixels(bytes: Uint8Array): Promise<Float32Array> {
    return preprocessImage(await decodeImage(bytes), this.preprocess);
  }

  /** Feature rows of images given as pixels [3, S, S]: [n * tokensPerImage, hiddenSize] f32, image after image. */
  encode(pixels: readonly Float32Array[]): Promise<Float32Array> {
    const run = this.queue.then(() => this.encodeNow(pixels));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async encodeNow(pixels: readonly Float32Array[]): Promise<Float32Array> {
    const v = this.cfg.vision;
    const N = this.tokensPerImage;
    const Dt = this.hiddenSize;
    const S = this.tower.seqLen;
    const K = 3 * v.patchSize * v.patchSize;
    const want = 3 * v.imageSize * v.imageSize;
    for (const p of pixels) if (p.length !== want) throw new Error(`LlavaVision: pixels of ${p.length} values, expected ${want}`);
    const out = new Float32Array(pixels.length * N * Dt);
    for (let first = 0; first < pixels.length; first += this.tower.maxImages) {
      const group = pixels.slice(first, first + this.tower.maxImages);
      const B = group.length;
      const host = new Float32Array(B * S * K);
      group.forEach((p, b) => patchify(p, v, host, b * S));
      const rec = this.ctx.recorder();
      const patches: Tensor = { buffer: rec.upload(host).buffer, offset: 0, shape: [B * S, K], dtype: 'f32' };
      const hidden = await this.tower.record(rec, patches, B);
      const skip = S - N; // 1 for "default" (drop CLS), 0 for "full"
      const rows = Uint32Array.from({ length: B * N }, (_, i) => Math.floor(i / N) * S + skip + (i % N));
      const at: Tensor = { buffer: rec.upload(rows).buffer, offset: 0, shape: [B * N], dtype: 'u32' };
      const sel: Tensor = { buffer: this.buf.sel, offset: 0, shape: [B * N, v.hiddenSize], dtype: 'f32' };
      const p1: Tensor = { buffer: this.buf.p1, offset: 0, shape: [B * N, Dt], dtype: 'f32' };
      const y: Tensor = { buffer: this.buf.out, offset: 0, shape: [B * N, Dt], dtype: 'f32' };
      await gatherRows(rec, hidden, at, sel);
      await matmul(rec, sel, this.proj.l1, p1);
      await act(rec, p1, p1, { act: this.cfg.projectorAct });
      await matmul(rec, p1, this.proj.l2, y);
      const read = rec.readback(y);
      rec.submit();
      out.set(new Float32Array(await read), first * N * Dt);
      this.passes++;
    }
    return out;
  }

  destroy(): void {
    this.tower.destroy();
    destroyClipVisionWeights(this.tower.weights);
    for (const t of [this.proj.l1.w, this.proj.l1.bias, this.proj.l2.w, this.proj.l2.bias]) t?.buffer.destroy();
    for (const b of Object.values(this.buf)) b.destroy();
  }
}
