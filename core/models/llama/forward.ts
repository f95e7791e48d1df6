/**
 * The Llama-family decoder on the GPU: records one engine step (a ragged
 * batch over the paged KV cache) into a Recorder, producing logits for the
 * requested rows. Nothing here submits or reads back; the runner does both,
 * once per step.
 *
 * Per layer: rms_norm, fused qkv matmul (+bias), rope_kv_write (rope + Qwen3
 * q/k norms + the paged KV-cache store, one dispatch), paged attention, o-proj
 * matmul accumulating into the residual, rms_norm, fused gate/up matmul, gated
 * activation, down-proj matmul accumulating into the residual — 9 dispatches.
 *
 * The KV cache is f32, f16 or q8 (`kvDtype`; packed halves, or int8 rows with one
 * f32 scale per (slot, kv head), layouts in core/ops/kv_write.ts): rope_kv_write
 * narrows on store, attention widens to f32 on read.
 *
 * Decode-only steps of eligible small models (weights packed into one f32
 * buffer, software adapters by default) run instead as ONE dispatch, the
 * decode megakernel (core/ops/decode_megakernel.ts), with bit-identical
 * results; the KV cache is then one K and one V buffer for all layers, which
 * the per-op path addresses through per-layer tensor offsets.
 */
import type { DecoderConfig } from '../../formats/hf_config.ts';
import type { GpuContext } from '../../gpu/context.ts';
import type { Recorder, TextureBinding } from '../../gpu/recorder.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import { gatedAct } from '../../ops/activation.ts';
import { attention } from '../../ops/attention.ts';
import { attentionPrefill } from '../../ops/attention_prefill.ts';
import { attentionSplitK, SPLIT_TARGET_WORKGROUPS, splitKPartialBytes, splitShape } from '../../ops/attention_splitk.ts';
import { StepGraphs } from '../../gpu/step_graph.ts';
import { resolveDecodePlan, type DecodePlan } from '../decode_plan.ts';
import {
  decodeMegakernel,
  megakernelEligibility,
  megakernelGC,
  megakernelRows,
  megakernelScratchFloats,
  megakernelTuning,
  megakernelWeights,
  stagingTexture,
  weightTexture,
  type MegakernelTuning,
  type MegakernelWeightSource,
  PACK_ALIGN_BYTES,
  type MegakernelMode,
  type MegakernelWeights,
} from '../../ops/decode_megakernel.ts';
import { embedding } from '../../ops/embedding.ts';
import { gatherRows } from '../../ops/gather_rows.ts';
import { createR32Texture, isKvTexture, kvRowWords, kvTensorDtype, type KvDtype, type KvStore } from '../../ops/kv_write.ts';
import { megakernelLoopCount } from '../../ops/loop_budget.ts';
import { fusionApplies, gpuFusionApplies, matmul, ropeFusionProblem, sgemvRopeProblem, type LinearWeight, type MatmulOptions, type MatmulRope } from '../../ops/matmul.ts';
import { rmsNorm } from '../../ops/rms_norm.ts';
import { scatterRows } from '../../ops/scatter_rows.ts';
import { invFreqTensor } from '../../ops/rope.ts';
import { ropeKvWrite, type RopeKvWriteOptions } from '../../ops/rope_kv_write.ts';
import type { DecodePathCounts } from '../step.ts';
import { add } from '../../ops/add.ts';
import { softcap } from '../../ops/softcap.ts';
import { attentionScale, globalRope, layerRope, layerWindow, mlpActivation } from './variant.ts';
import { layerOptions, type LayerOptions, stepAttentionOptions } from './layer_options.ts';
import type { RecordOptions, StepGeometry, StepInputs } from '../step.ts';
import { MEGAKERNEL_MAX_CHUNK, MEGAKERNEL_MAX_WAVES, megakernelScratchRows, megakernelWaves, type MegakernelWave } from './megakernel_waves.ts';
import type { LlamaWeights } from './weights.ts';

const STORAGE = 0x80 | 0x08 | 0x04;

export interface LlamaModelOptions {
  /** KV-cache storage with the megakernel and f32 KV (default: the adapter's tuning, texture on llvmpipe). */
  kvStorage?: 'buffer' | 'texture';
  /** The decode plan (load.ts resolves it); without one, resolved here from the adapter and the two settings below. */
  plan?: DecodePlan;
  /** Without a plan: megakernel weight source (default auto = texture on llvmpipe). */
  megakernelWeights?: MegakernelWeightSource | 'auto';
  /** Without a plan: decode megakernel mode (default auto); see core/ops/decode_megakernel.ts. */
  decodeMegakernel?: MegakernelMode;
  /** Steps with prompt chunks or verify rows through the megakernel in waves (default true; false: decode steps only). */
  megakernelWaves?: boolean;
  /** Without a plan: step graphs for decode steps (default on; DecodeSettings.stepGraphs). */
  stepGraphs?: 'on' | 'off';
}

/** The StepInputs fields the megakernel understands; a step carrying anything else (e.g. image rows) takes the generic path. */
const MEGAKERNEL_STEP_FIELDS = new Set(['tokens', 'positions', 'tokenSeq', 'slots', 'blockTables', 'numSeqs', 'logitRows']);

/** The step's latest token position (0 for an empty step). */
function latestPosition(s: StepInputs): number {
  let latest = 0;
  for (const p of s.positions) latest = Math.max(latest, p);
  return latest;
}

/** True when the step carries only what the megakernel reads (no image rows). */
function megakernelFields(s: StepInputs): boolean {
  if (s.numSeqs === 0) return false;
  for (const [k, v] of Object.entries(s)) {
    if (MEGAKERNEL_STEP_FIELDS.has(k) || v === undefined || v === null) continue;
    if (typeof v === 'object' && 'length' in v && (v as ArrayLike<unknown>).length === 0) continue;
    return false;
  }
  return true;
}

/** Out-row map entry (and padding slot) meaning none. */
const NO_ROW = 0xffffffff;

/** A region of the packed per-step input buffer. */
interface Section {
  offset: number;
  capacity: number; // in u32 elements
}

export class LlamaModel {
  readonly kvBytes: number;
  private readonly input: GPUBuffer;
  private readonly sections: Record<'tokens' | 'positions' | 'tokenSeq' | 'slots' | 'blockTables' | 'logitRows' | 'outRow' | 'waveRows', Section>;
  private readonly staging: Uint32Array<ArrayBuffer>;
  private readonly cacheK: KvStore[] = [];
  private readonly cacheV: KvStore[] = [];
  /** With KV textures: the two textures holding every layer (else null). */
  private readonly kvTextures: { k: TextureBinding; v: TextureBinding } | null = null;
  private readonly buf: Record<'x' | 'h' | 'h2' | 'qkv' | 'att' | 'gu' | 'act' | 'last' | 'lastN' | 'logits', GPUBuffer>;
  readonly qkvCols: number;
  /** Decode-only steps run as one megakernel dispatch (null: the generic path only; see megakernelOff). */
  private readonly mega: {
    weights: MegakernelWeights;
    kvLayerBytes: number;
    maxSeqs: number;
    /** Steps with multi-token chunks in waves (LlamaModelOptions.megakernelWaves). */
    waves: boolean;
    tuning: MegakernelTuning;
    texture: TextureBinding | null;
    scratch: TextureBinding | null;
    /** With the weight texture: the generic matmuls' x staging texture (MatmulOptions.xTexture). */
    xStage: TextureBinding | null;
  } | null;
  /** Why the megakernel is not used for this model (null when it is). */
  readonly megakernelOff: string | null;
  /** The decode plan this model runs (kernel per op, storage, megakernel mode). */
  readonly plan: DecodePlan;
  /** Per-layer op options that never change between steps (layer_options.ts), built on the first per-op step. */
  private layerOpts: LayerOptions[] | undefined;
  /** ropeKvWrite's options per layer for steps of T tokens (the latest T seen). */
  private ropeOpts: { T: number; list: RopeKvWriteOptions[] } | undefined;
  /** Decode steps' recorded dispatch lists, by stepGraphKey (core/gpu/step_graph.ts). */
  readonly graphs = new StepGraphs();
  /** Split-K partials shared by every layer of a step (attention_splitk.ts SplitAttentionOptions.partials); null without split-K. */
  private readonly partials: { buffer: GPUBuffer; size: number } | null;
  /** The distinct attention windows of the layers (null: global), for stepGraphKey. */
  private readonly windows: (number | null)[];
  /** Per layer for steps of T tokens: the qkv matmul's options with rope and the KV store as its epilogue (null: rope_kv_write runs). */
  private qkvRopeOpts: { T: number; list: (MatmulOptions | null)[] } | undefined;
  /** Steps recorded per path (the /metrics counters weft_engine_steps_total, weft_megakernel_dispatches_total). */
  readonly pathCounts: DecodePathCounts = { megakernelSteps: 0, megakernelDispatches: 0, genericSteps: 0 };

  /** Where the megakernel reads weights from (null when it is off). */
  get megakernelWeightSource(): MegakernelWeightSource | null {
    return this.mega?.tuning.weights ?? null;
  }

  constructor(
    readonly ctx: GpuContext,
    readonly cfg: DecoderConfig,
    readonly weights: LlamaWeights,
    readonly geo: StepGeometry,
    readonly kvDtype: KvDtype = 'f32',
    opts: LlamaModelOptions = {},
  ) {
    const { device } = ctx;
    const align = ctx.gpu.limits.minStorageBufferOffsetAlignment;
    const T = geo.maxTokens;
    // Per-token sections hold one more entry: the megakernel's padding sentinel (megakernel_waves.ts).
    const caps = {
      tokens: T + 1,
      positions: T + 1,
      tokenSeq: T + 1,
      slots: T + 1,
      blockTables: geo.maxSeqs * geo.maxBlocksPerSeq,
      logitRows: geo.maxLogitRows ?? geo.maxSeqs,
      outRow: T + 1, // megakernel: token -> logit row
      waveRows: megakernelScratchRows(geo) * MEGAKERNEL_MAX_WAVES, // megakernel: every wave's rows
    };
    let at = 0;
    const sections = {} as Record<keyof typeof caps, Section>;
    for (const [name, capacity] of Object.entries(caps) as [keyof typeof caps, number][]) {
      sections[name] = { offset: at, capacity };
      at += Math.ceil((capacity * 4) / align) * align;
    }
    this.sections = sections;
    this.input = device.createBuffer({ size: at, usage: STORAGE, label: 'step-inputs' });
    this.staging = new Uint32Array(at / 4);

    const c = cfg;
    this.qkvCols = (c.heads + 2 * c.kvHeads) * c.headDim;
    const f32 = (n: number, label: string): GPUBuffer => device.createBuffer({ size: Math.max(16, n * 4), usage: STORAGE, label });
    this.buf = {
      x: f32(T * c.hiddenSize, 'x'),
      h: f32(T * c.hiddenSize, 'h'),
      h2: f32(c.sandwichNorms ? T * c.hiddenSize : 4, 'h2'), // Gemma: a sublayer's normed output
      qkv: f32(T * this.qkvCols, 'qkv'),
      att: f32(T * c.heads * c.headDim, 'att'),
      gu: f32(T * 2 * c.intermediateSize, 'gu'),
      act: f32(T * c.intermediateSize, 'act'),
      last: f32((geo.maxLogitRows ?? geo.maxSeqs) * c.hiddenSize, 'last'),
      lastN: f32((geo.maxLogitRows ?? geo.maxSeqs) * c.hiddenSize, 'lastN'),
      logits: f32((geo.maxLogitRows ?? geo.maxSeqs) * c.vocabSize, 'logits'),
    };
    const slots = geo.numBlocks * geo.blockSize;
    // f32: [slots, kvHeads, headDim] f32; f16: [slots, kvHeads, headDim/2] u32 (packed halves);
    // q8: [slots, kvHeads, headDim/4 + 1] u32 (codes, scale).
    const row = kvRowWords(c.headDim, kvDtype);
    const kvShape = [slots, c.kvHeads, row];
    const dtype = kvTensorDtype(kvDtype);
    // Megakernel: one K and one V buffer for all layers (layer l at l * kvLayerBytes), so the
    // single dispatch binds 2 cache buffers instead of 2 per layer; the generic ops see the
    // same per-layer tensors through their offsets.
    const kvLayerBytes = Math.ceil((slots * c.kvHeads * row * 4) / PACK_ALIGN_BYTES) * PACK_ALIGN_BYTES;
    const mw = weights.packed ? megakernelWeights(weights) : 'weights are not packed into one f32 buffer';
    this.plan =
      opts.plan ??
      resolveDecodePlan(ctx.gpu, cfg, kvDtype, {
        variant: ctx.variant,
        ...(opts.decodeMegakernel ? { decodeMegakernel: opts.decodeMegakernel } : {}),
        ...(opts.megakernelWeights ? { megakernelWeights: opts.megakernelWeights } : {}),
        ...(opts.stepGraphs ? { stepGraphs: opts.stepGraphs } : {}),
      });
    const mode = this.plan.megakernel.mode;
    let tuning: MegakernelTuning = this.plan.megakernel.tuning;
    const eligibility = megakernelEligibility(
      ctx,
      c,
      { mode, kvDtype, f32Weights: !!weights.packed, weightBytes: weights.packed?.size ?? weights.bytes },
      tuning,
    );
    let off = eligibility.support ?? (typeof mw === 'string' ? mw : null);
    const lim = ctx.gpu.limits;
    if (!off && c.layers * kvLayerBytes > Math.min(lim.maxStorageBufferBindingSize, lim.maxBufferSize)) off = 'KV cache exceeds one storage binding';
    // Past llvmpipe's loop budget at one sequence no step takes the megakernel (the count only
    // grows with rows and position: withinLoopBudget refuses them all), but the generic path
    // keeps its texture storage (texture-weight matmuls, KV textures); no scratch is made.
    const budgetOff = off === null ? eligibility.budget : null;
    this.megakernelOff = off ?? budgetOff;
    let texture: TextureBinding | null = null;
    if (off === null && typeof mw !== 'string' && tuning.weights === 'texture') {
      // A copy of the packed weights as a texture (the generic path keeps reading the buffer).
      texture = weightTexture(ctx, mw.buffer, weights.packed!.size);
      if (!texture) tuning = megakernelTuning(ctx.gpu.info, 'buffer'); // (sized within one texture by megakernelWeightCap)
    }
    // x of the generic matmuls (prefill) as texels: up to maxTokens rows of the widest K.
    const xStage = texture ? stagingTexture(ctx, T * Math.ceil(Math.max(c.hiddenSize, c.heads * c.headDim, c.intermediateSize) / 4)) : null;
    let scratch: TextureBinding | null = null;
    if (off === null && budgetOff === null && typeof mw !== 'string' && tuning.scratch === 'texture') {
      scratch = createR32Texture(ctx, megakernelScratchFloats(c, megakernelScratchRows(geo)), 'megakernel-scratch');
      if (!scratch) tuning = { ...tuning, scratch: 'workgroup' };
    }
    this.mega =
      off === null && typeof mw !== 'string'
        ? { weights: mw, kvLayerBytes, maxSeqs: mode === 'on' ? Infinity : tuning.autoMaxSeqs, waves: opts.megakernelWaves ?? true, tuning, texture, scratch, xStage }
        : null;
    // (The megakernel, and with it KV textures, runs f32 and q8 caches only.)
    const kvTex = this.mega && (opts.kvStorage ?? this.mega.tuning.kv) === 'texture' ? this.kvTexturePair(c.layers * kvLayerBytes / 4, kvDtype === 'q8' ? 'r32uint' : 'r32float') : null;
    if (kvTex) {
      this.kvTextures = kvTex;
      for (let l = 0; l < c.layers; l++) {
        this.cacheK.push({ ...kvTex.k, base4: (l * kvLayerBytes) / 16 });
        this.cacheV.push({ ...kvTex.v, base4: (l * kvLayerBytes) / 16 });
      }
    } else if (this.mega) {
      const kAll = f32((c.layers * kvLayerBytes) / 4, 'k-all');
      const vAll = f32((c.layers * kvLayerBytes) / 4, 'v-all');
      for (let l = 0; l < c.layers; l++) {
        this.cacheK.push({ buffer: kAll, offset: l * kvLayerBytes, shape: kvShape, dtype });
        this.cacheV.push({ buffer: vAll, offset: l * kvLayerBytes, shape: kvShape, dtype });
      }
    } else {
      for (let l = 0; l < c.layers; l++) {
        this.cacheK.push({ buffer: f32(slots * c.kvHeads * row, `k${l}`), offset: 0, shape: kvShape, dtype });
        this.cacheV.push({ buffer: f32(slots * c.kvHeads * row, `v${l}`), offset: 0, shape: kvShape, dtype });
      }
    }
    this.kvBytes = 2 * c.layers * slots * c.kvHeads * row * 4;
    // Steps that need partials have splits >= 2, so at most SPLIT_TARGET_WORKGROUPS (token, head, split) rows.
    const partBytes = splitKPartialBytes(1, 1, c.headDim, SPLIT_TARGET_WORKGROUPS);
    this.partials = this.plan.attention.decode === 'splitk' ? { buffer: device.createBuffer({ size: partBytes, usage: STORAGE, label: 'splitk-partials' }), size: partBytes } : null;
    this.windows = [...new Set(Array.from({ length: c.layers }, (_, l) => layerWindow(c, l)))];
  }

  /**
   * The step graph key of a step recorded from the recorder's current position, or null when
   * the step does not take a graph: decode-only steps (one token per sequence) on split-K
   * attention over buffer caches, without image rows, a split LM head or the profiler. The key
   * holds every host value the per-op recording depends on beyond the model itself: where the
   * step starts in the recorder, its token, logit-row and sequence counts, and the split shape
   * of each attention window at its latest position (the only Params that move with the
   * context). Everything else a step changes is in the input buffer, written by upload().
   */
  private stepGraphKey(rec: Recorder, s: StepInputs, latest: number): string | null {
    if (!this.plan.stepGraphs || this.plan.attention.decode !== 'splitk' || rec.ctx.profiler) return null;
    const T = s.tokens.length;
    if (T !== s.numSeqs || s.embedAt?.length || this.weights.headParts || this.kvTextures) return null;
    let key = `${rec.paramsOffset}/${rec.dispatches}/${T}/${s.logitRows.length}`;
    const c = this.cfg;
    for (const window of this.windows) {
      const { splitKeys, splits } = splitShape({ tokens: T, qHeads: c.heads, blockSize: this.geo.blockSize, maxBlocksPerSeq: this.geo.maxBlocksPerSeq, ...(window ? { window } : {}), maxPosition: latest });
      key += `/${splitKeys}x${splits}`;
    }
    return key;
  }

  /** K and V textures of `floats` 4-byte elements each, or null when they exceed the adapter's texture size. */
  private kvTexturePair(floats: number, format: 'r32float' | 'r32uint'): { k: TextureBinding; v: TextureBinding } | null {
    const k = createR32Texture(this.ctx, floats, 'k-all', format);
    const v = k && createR32Texture(this.ctx, floats, 'v-all', format);
    if (k && !v) k.texture.destroy();
    return k && v ? { k, v } : null;
  }

  /**
   * With the megakernel's weight texture: the generic matmuls read W from it too (prefill on
   * llvmpipe; matmul ignores it where it does not apply). W's vec4 offset in the packed buffer.
   */
  private wtex(w: LinearWeight): MatmulOptions {
    const kernels = this.plan.matmul;
    const t = this.mega?.texture;
    if (!t || w.parts || w.w.buffer !== this.mega!.weights.buffer) return { kernels };
    const xs = this.mega!.xStage;
    return { kernels, wTexture: { binding: t, offset4: w.w.offset / 16 }, ...(xs ? { xTexture: xs } : {}) };
  }

  /**
   * The fused-norm option for the matmul of `next` that reads RMSNorm(x) * `norm`, or null when
   * it does not apply (no weight texture, either weight outside it, or a gated matmul with a
   * bias): the caller norms into h.
   */
  private normTex(norm: Tensor, next: LinearWeight, gated = false): { offset4: number; eps: number } | null {
    const mega = this.mega;
    if (!mega?.texture || next.parts || (gated && next.bias) || !fusionApplies(next.w, this.ctx.variant, true)) return null;
    if (next.w.buffer !== mega.weights.buffer || norm.buffer !== mega.weights.buffer || norm.dtype !== 'f32' || norm.offset % 16 !== 0) return null;
    return { offset4: norm.offset / 16, eps: this.cfg.rmsEps };
  }

  /**
   * The fused rope + KV store for layer l's qkv matmul (MatmulOptions.rope), or null when the
   * cache is not in textures or the head shape does not allow it (ropeFusionProblem).
   */
  private ropeTex(rec: Recorder, l: number, positions: Tensor, slots: Tensor): MatmulRope | null {
    const k = this.cacheK[l]!;
    const v = this.cacheV[l]!;
    if (this.kvDtype !== 'f32' || !isKvTexture(k) || !isKvTexture(v)) return null; // the epilogue stores f32 rows
    const c = this.cfg;
    const r = { positions, slots, cacheK: k, cacheV: v, headDim: c.headDim, qHeads: c.heads, kvHeads: c.kvHeads };
    if (ropeFusionProblem(r, this.qkvCols, c.hiddenSize)) return null;
    return { ...r, invFreq: invFreqTensor(rec.ctx, { headDim: c.headDim, ...layerRope(c, l, this.maxContext) }) };
  }

  /**
   * Layer l's qkv matmul options (fused input norm) with rope and the KV store as the sgemv
   * epilogue, for steps whose positions and slots are these views; null where the layer cannot
   * take it (q/k norm, qkv in parts, a q8 or texture cache, a head shape sgemvRopeProblem refuses).
   */
  private qkvWithRope(rec: Recorder, l: number, O: LayerOptions, positions: Tensor, slots: Tensor): MatmulOptions | null {
    const c = this.cfg;
    const L = this.weights.layers[l]!;
    const k = this.cacheK[l]!;
    const v = this.cacheV[l]!;
    const kvDtype = this.kvDtype;
    if ((L.qNorm && L.kNorm) || L.qkv.parts || kvDtype === 'q8' || isKvTexture(k) || isKvTexture(v)) return null;
    const invFreq = invFreqTensor(rec.ctx, { headDim: c.headDim, ...layerRope(c, l, this.maxContext) });
    const r: MatmulRope = { positions, slots, invFreq, cacheK: k, cacheV: v, kvDtype, headDim: c.headDim, qHeads: c.heads, kvHeads: c.kvHeads };
    if (sgemvRopeProblem(r, this.qkvCols, c.hiddenSize)) return null;
    return { ...O.qkvPrenorm, rope: r };
  }

  /** The cache dtype the flash kernels read (the plan takes them for f32 and f16 caches only: decode_plan.ts splitKProblem). */
  private flashKvDtype(): 'f32' | 'f16' {
    if (this.kvDtype === 'q8') throw new Error('LlamaModel: the flash attention kernels read f32 and f16 caches only');
    return this.kvDtype;
  }

  /** Context limit of a sequence in positions (the block tables' capacity): picks longrope's factors. */
  get maxContext(): number {
    return this.geo.maxBlocksPerSeq * this.geo.blockSize;
  }

  /** Where the KV cache lives. */
  get kvStorage(): 'buffer' | 'texture' {
    return this.kvTextures ? 'texture' : 'buffer';
  }

  private view(name: keyof LlamaModel['sections'], n: number): Tensor {
    return { buffer: this.input, offset: this.sections[name].offset, shape: [n], dtype: 'u32' };
  }

  private act(name: keyof LlamaModel['buf'], shape: number[]): Tensor {
    return { buffer: this.buf[name], offset: 0, shape, dtype: 'f32' };
  }

  /** Uploads the step's inputs with one queue write (ordered before the step's submit). */
  /** Writes the step's inputs (and, for the megakernel, its waves' row maps) into the input buffer. */
  private upload(s: StepInputs, waves: MegakernelWave[] | null): void {
    const put = (name: keyof LlamaModel['sections'], a: Uint32Array): void => {
      const sec = this.sections[name];
      if (a.length > sec.capacity) throw new Error(`step input ${name}: ${a.length} > capacity ${sec.capacity}`);
      this.staging.set(a, sec.offset / 4);
    };
    put('tokens', s.tokens);
    put('positions', s.positions);
    put('tokenSeq', s.tokenSeq);
    put('slots', s.slots);
    put('blockTables', s.blockTables);
    put('logitRows', s.logitRows);
    if (waves) {
      // The sentinel token T for padding rows, each token's logit row, the waves' rows.
      const T = s.tokens.length;
      const at = (name: keyof LlamaModel['sections'], i: number, v: number): void => {
        this.staging[this.sections[name].offset / 4 + i] = v;
      };
      at('tokens', T, 0);
      at('positions', T, 0);
      at('slots', T, NO_ROW);
      at('tokenSeq', T, 0);
      const out = new Uint32Array(T + 1).fill(NO_ROW);
      s.logitRows.forEach((t, r) => (out[t] = r));
      put('outRow', out);
      let o = this.sections.waveRows.offset / 4;
      for (const w of waves) {
        this.staging.set(w.rows, o);
        o += w.rows.length;
      }
    }
    this.ctx.device.queue.writeBuffer(this.input, 0, this.staging);
  }

  /**
   * Records the forward pass; returns logits [R, V] (valid after the step is submitted), or null
   * when no row needs logits (a step of prompt chunks only). With `opts.argmaxInto` on a step
   * where fusesArgmax(s): each row's greedy id into that u32 tensor instead (returned as [R]).
   */
  async record(rec: Recorder, s: StepInputs, opts: RecordOptions = {}): Promise<Tensor | null> {
    const c = this.cfg;
    const R = s.logitRows.length;
    // Decode steps, and prompt chunks in at most a few waves (megakernel_waves.ts): the megakernel.
    const waves = this.planWaves(s);
    this.upload(s, waves);
    if (waves) {
      this.pathCounts.megakernelSteps++;
      this.pathCounts.megakernelDispatches += waves.length;
      return this.recordMegakernel(rec, s, waves, opts.argmaxInto);
    }
    if (opts.argmaxInto) throw new Error('LlamaModel.record: argmaxInto on a step that does not fuse the argmax');
    this.pathCounts.genericSteps++;
    const latest = latestPosition(s);
    const key = this.stepGraphKey(rec, s, latest);
    if (key === null) return this.recordOps(rec, s, latest);
    const graph = this.graphs.get(key);
    if (graph && rec.replay(graph)) {
      this.graphs.replayed++;
      return R === 0 ? null : this.act('logits', [R, c.vocabSize]);
    }
    rec.capture();
    let logits: Tensor | null;
    try {
      logits = await this.recordOps(rec, s, latest);
    } catch (e) {
      rec.endCapture(); // a recording cut short is no graph
      throw e;
    }
    const captured = rec.endCapture();
    if (captured) this.graphs.set(key, captured);
    return logits;
  }

  /** The generic path's forward, op by op (record() replays its step graph instead where one applies). */
  private async recordOps(rec: Recorder, s: StepInputs, latest: number): Promise<Tensor | null> {
    const c = this.cfg;
    const T = s.tokens.length;
    const R = s.logitRows.length;
    const D = c.hiddenSize;
    const w = this.weights;
    const positions = this.view('positions', T);
    const x = this.act('x', [T, D]);
    const h = this.act('h', [T, D]);
    const qkv = this.act('qkv', [T, this.qkvCols]);
    const att = this.act('att', [T, c.heads * c.headDim]);
    const gu = this.act('gu', [T, 2 * c.intermediateSize]);
    const a = this.act('act', [T, c.intermediateSize]);
    const heads = { tokens: T, qHeads: c.heads, kvHeads: c.kvHeads, headDim: c.headDim, rowStride: this.qkvCols, kvDtype: this.kvDtype };
    const slots = this.view('slots', T);
    const tokenSeq = this.view('tokenSeq', T);
    const blockTables = this.view('blockTables', s.numSeqs * this.geo.maxBlocksPerSeq);
    const perLayer = (this.layerOpts ??= layerOptions(c, w.layers, this.maxContext, (lw) => this.wtex(lw)));
    const att0 = stepAttentionOptions({
      ...heads,
      blockSize: this.geo.blockSize,
      maxBlocksPerSeq: this.geo.maxBlocksPerSeq,
      maxPosition: latest,
      scale: attentionScale(c),
      ...(this.partials ? { partials: this.partials } : {}),
      ...(c.attnSoftcap ? { softcap: c.attnSoftcap } : {}),
    }, () => this.flashKvDtype());
    // ropeKvWrite's options per layer for this token count (decode steps repeat theirs).
    if (this.ropeOpts?.T !== T) this.ropeOpts = { T, list: perLayer.map((O) => ({ ...heads, ...O.rope })) };
    const ropeOpts = this.ropeOpts.list;
    // Decode-sized steps on the sgemv kernel: rope and the KV store as the qkv matmul's epilogue where the plan and the layer allow.
    const gpuFuse = gpuFusionApplies(T, c.hiddenSize, this.ctx.variant, this.plan.matmul);
    if (gpuFuse && this.plan.ropeKv.decode === 'fused' && this.qkvRopeOpts?.T !== T) {
      this.qkvRopeOpts = { T, list: perLayer.map((O, l) => this.qkvWithRope(rec, l, O, positions, slots)) };
    }
    const qkvRope = gpuFuse && this.plan.ropeKv.decode === 'fused' ? this.qkvRopeOpts!.list : null;

    await this.embed(rec, this.view('tokens', T), x);
    if (s.embedAt?.length) {
      const E = s.embedAt.length; // image features over the placeholder tokens' embeddings
      await scatterRows(rec, { buffer: rec.upload(s.embedRows!).buffer, offset: 0, shape: [E, D], dtype: 'f32' }, { buffer: rec.upload(s.embedAt).buffer, offset: 0, shape: [E], dtype: 'u32' }, x);
    }
    // Decode-sized steps on the sgemv kernel: the input norms fuse into the matmuls that read
    // them and the SiLU gate into the gate/up matmul (no h or gu round trip, 2 fewer dispatches).
    for (let l = 0; l < c.layers; l++) {
      const L = w.layers[l]!;
      const O = perLayer[l]!;
      // With texture weights (llvmpipe) the input norms fuse into the matmuls that read them, rope
      // and the KV store into the qkv matmul, and the SiLU gate into the gate/up matmul:
      // bit-identical, without h, k, v and gu in storage buffers.
      const inNorm = this.normTex(L.inNorm, L.qkv);
      const rope = inNorm && !(L.qNorm && L.kNorm) ? this.ropeTex(rec, l, positions, slots) : null;
      const withRope = qkvRope?.[l] ?? null;
      if (inNorm) await matmul(rec, x, L.qkv, qkv, { ...O.qkv, norm: inNorm, ...(rope ? { rope } : {}) });
      else if (gpuFuse) await matmul(rec, x, L.qkv, qkv, withRope ?? O.qkvPrenorm);
      else {
        await rmsNorm(rec, x, L.inNorm, h, { eps: c.rmsEps });
        await matmul(rec, h, L.qkv, qkv, O.qkv);
      }
      if (!rope && !withRope) await ropeKvWrite(rec, qkv, positions, slots, this.cacheK[l]!, this.cacheV[l]!, ropeOpts[l]!);
      const ck = this.cacheK[l]!;
      const cv = this.cacheV[l]!;
      // Decode-only steps (one token per sequence) split the context across workgroups
      // (flash-decoding) where the plan says so; prompt chunks fill the GPU with tokens x heads.
      const buffers = !isKvTexture(ck) && !isKvTexture(cv);
      if (this.plan.attention.decode === 'splitk' && T === s.numSeqs && buffers) {
        await attentionSplitK(rec, qkv, ck, cv, positions, tokenSeq, blockTables, att, att0.flash(O.window));
      } else if (this.plan.attention.prefill === 'tiled' && T > s.numSeqs && buffers) {
        // Prompt chunks: queries in tiles of one sequence share each staged K/V tile.
        await attentionPrefill(rec, qkv, ck, cv, positions, tokenSeq, blockTables, att, { ...att0.flash(O.window), tokenSeqHost: s.tokenSeq });
      } else {
        await attention(rec, qkv, ck, cv, positions, tokenSeq, blockTables, att, att0.plain(O.window));
      }
      if (L.attnOutNorm) await this.sandwich(rec, att, L.o, L.attnOutNorm, x, h);
      else await matmul(rec, att, L.o, x, O.o);
      const postNorm = this.normTex(L.postNorm, L.gu, true);
      if (postNorm) await matmul(rec, x, L.gu, a, { ...O.gu, norm: postNorm, gated: true });
      else if (gpuFuse && !L.gu.bias && !L.gu.parts && mlpActivation(c) === 'silu') await matmul(rec, x, L.gu, a, O.guPrenorm);
      else {
        await rmsNorm(rec, x, L.postNorm, h, { eps: c.rmsEps });
        await matmul(rec, h, L.gu, gu, O.gu);
        await gatedAct(rec, gu, a, { act: mlpActivation(c), inter: c.intermediateSize });
      }
      if (L.mlpOutNorm) await this.sandwich(rec, a, L.down, L.mlpOutNorm, x, h);
      else await matmul(rec, a, L.down, x, O.down);
    }
    if (R === 0) return null;
    const last = this.act('last', [R, D]);
    const lastN = this.act('lastN', [R, D]);
    await gatherRows(rec, x, this.view('logitRows', R), last);
    const logits = this.act('logits', [R, c.vocabSize]);
    if (!w.headParts && gpuFusionApplies(R, D, this.ctx.variant, this.plan.matmul)) {
      await matmul(rec, last, w.head, logits, { ...this.wtex(w.head), prenorm: { weight: w.norm, eps: c.rmsEps } });
    } else {
      await rmsNorm(rec, last, w.norm, lastN, { eps: c.rmsEps });
      if (w.headParts) await this.splitHead(rec, lastN, w.headParts, logits);
      else await matmul(rec, lastN, w.head, logits, this.wtex(w.head));
    }
    if (c.finalSoftcap) await softcap(rec, logits, c.finalSoftcap);
    return logits;
  }

  /** x [T, D] = the token rows (times embedScale), from the one table or its row parts. */
  private async embed(rec: Recorder, ids: Tensor, x: Tensor): Promise<void> {
    const scale = this.cfg.embedScale !== undefined ? { scale: this.cfg.embedScale } : {};
    const parts = this.weights.embedParts ?? [this.weights.embed];
    let base = 0;
    for (const [i, part] of parts.entries()) {
      await embedding(rec, ids, part, x, { ...scale, ...(i > 0 ? { base, part: true } : {}) });
      base += part.shape[0]!;
    }
  }

  /**
   * logits [R, V] from a row-split LM head: each part's [R, Vp] block into a step temp, then
   * copied row by row to its columns (copies end the compute pass; R <= maxLogitRows).
   */
  private async splitHead(rec: Recorder, h: Tensor, parts: Tensor[], logits: Tensor): Promise<void> {
    const [R, V] = logits.shape as [number, number];
    let col = 0;
    for (const part of parts) {
      const Vp = part.shape[0]!;
      const tmp: Tensor = { buffer: rec.temp(R * Vp * 4), offset: 0, shape: [R, Vp], dtype: 'f32' };
      await matmul(rec, h, { w: part }, tmp);
      for (let r = 0; r < R; r++) rec.copy(tmp.buffer, r * Vp * 4, logits.buffer, logits.offset + (r * V + col) * 4, Vp * 4);
      col += Vp;
    }
  }

  /** Gemma: x += RMSNorm(in · Wᵀ) * norm, through h [T, D] and h2 [T, D]. */
  private async sandwich(rec: Recorder, input: Tensor, w: { w: Tensor; bias?: Tensor }, norm: Tensor, x: Tensor, h: Tensor): Promise<void> {
    const h2 = { ...h, buffer: this.buf.h2 };
    await matmul(rec, input, w, h);
    await rmsNorm(rec, h, norm, h2, { eps: this.cfg.rmsEps });
    await add(rec, x, h2, x);
  }

  /**
   * The path of a step: the megakernel when the model is eligible and the step's rows fit it
   * (no image rows; each sequence's tokens contiguous, in at most MEGAKERNEL_MAX_WAVES waves
   * and tuning.waveChunkTokens chunk tokens: megakernel_waves.ts; within llvmpipe's loop
   * budget) — on hardware adapters with buffer weights only decode-only steps of at most
   * tuning.autoMaxSeqs sequences — else the generic path.
   */
  decodePath(s: StepInputs): 'megakernel' | 'generic' {
    return this.planWaves(s) ? 'megakernel' : 'generic';
  }

  /** The step's megakernel waves, or null for the generic path (a few µs: planned again by each caller rather than cached on a step object that could be mutated). */
  private planWaves(s: StepInputs): MegakernelWave[] | null {
    const m = this.mega;
    if (!m || !megakernelFields(s)) return null;
    const lim = this.ctx.gpu.limits.maxComputeWorkgroupStorageSize;
    const waves = megakernelWaves(s, {
      // 4 tokens of a sequence per wave, fewer where a workgroup's memory holds fewer rows.
      maxChunk: megakernelRows(this.cfg, MEGAKERNEL_MAX_CHUNK, lim),
      maxWaves: m.maxSeqs === Infinity && m.waves ? MEGAKERNEL_MAX_WAVES : 1,
      maxChunkTokens: m.tuning.waveChunkTokens,
      rowsFor: (n) => megakernelRows(this.cfg, n, lim),
      maxRows: megakernelScratchRows(this.geo),
    });
    if (!waves) return null;
    if ((m.maxSeqs !== Infinity || !m.waves) && (s.tokens.length !== s.numSeqs || s.numSeqs > m.maxSeqs)) return null;
    return waves.every((w) => this.withinLoopBudget(w)) ? waves : null;
  }

  /**
   * On llvmpipe: the wave's megakernel invocations stay within the driver's loop budget
   * (core/ops/loop_budget.ts) at its rows per workgroup and latest position; past it llvmpipe
   * would cut the kernel's loops short, so such steps take the generic path (bit-identical, so
   * a sequence may move between the paths as its context grows).
   */
  private withinLoopBudget(w: MegakernelWave): boolean {
    const t = this.mega!.tuning;
    if (t.loopBudget === null) return true;
    return megakernelLoopCount(this.cfg, { MR: w.MR, WG: t.wg, NO: t.octs, GC: megakernelGC(this.cfg), argmax: false }, w.latest) <= t.loopBudget;
  }

  /** True when record() can write greedy ids instead of logits for this step (the megakernel takes it). */
  fusesArgmax(s: StepInputs): boolean {
    return this.decodePath(s) === 'megakernel';
  }

  /**
   * A step through the megakernel, one dispatch per wave: every layer, the final norm and the LM
   * head; logits [R, V] (or the greedy ids into `ids`), null when no row needs logits.
   */
  private async recordMegakernel(rec: Recorder, s: StepInputs, waves: MegakernelWave[], ids?: Tensor): Promise<Tensor | null> {
    const c = this.cfg;
    const R = s.logitRows.length;
    const logits = ids ? null : this.act('logits', [Math.max(R, 1), c.vocabSize]);
    const words = (name: keyof LlamaModel['sections']): number => this.sections[name].offset / 4;
    const invFreq = invFreqTensor(rec.ctx, { headDim: c.headDim, ...globalRope(c, this.maxContext) });
    let rows = words('waveRows');
    for (const w of waves) {
      await decodeMegakernel(rec, {
        cfg: c,
        weights: this.mega!.weights,
        tuning: this.mega!.tuning,
        weightTexture: this.mega!.texture,
        scratch: this.mega!.scratch,
        input: { buffer: this.input, tokens: words('tokens'), positions: words('positions'), slots: words('slots'), tokenSeq: words('tokenSeq'), out: words('outRow'), blockTables: words('blockTables'), rows },
        invFreq,
        cacheK: this.kvTextures?.k ?? (this.cacheK[0] as Tensor).buffer,
        cacheV: this.kvTextures?.v ?? (this.cacheV[0] as Tensor).buffer,
        kvLayerBytes: this.mega!.kvLayerBytes,
        kvDtype: this.kvDtype,
        blockSize: this.geo.blockSize,
        maxBlocksPerSeq: this.geo.maxBlocksPerSeq,
        seqs: w.rows.length,
        MR: w.MR,
        out: logits ? { logits } : { ids: { ...ids!, shape: [Math.max(R, 1)] } },
      });
      rows += w.rows.length;
    }
    if (R === 0) return null;
    return logits ? { ...logits, shape: [R, c.vocabSize] } : { ...ids!, shape: [R] };
  }

  destroy(): void {
    this.graphs.clear();
    this.partials?.buffer.destroy();
    this.input.destroy();
    for (const b of Object.values(this.buf)) b.destroy();
    for (const t of [...this.cacheK, ...this.cacheV]) if (!isKvTexture(t)) t.buffer.destroy();
    this.kvTextures?.k.texture.destroy();
    this.kvTextures?.v.texture.destroy();
    this.mega?.texture?.texture.destroy();
    this.mega?.scratch?.texture.destroy();
    this.mega?.xStage?.texture.destroy();
  }
}
