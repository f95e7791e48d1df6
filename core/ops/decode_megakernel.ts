/**
 * Decode megakernel: every layer, the final norm and the LM head of a small
 * Llama-family decoder for a set of token rows in ONE dispatch, up to 4 rows per
 * workgroup, all of a row's activations in workgroup memory (or llvmpipe's scratch
 * texture; shaders/decode_megakernel.wgsl). A decode step is one dispatch; a step with
 * short prompt chunks or verify rows a few, its waves (core/models/llama/megakernel_waves.ts:
 * a row attends to tokens of its own workgroup or of earlier dispatches). Why: on CPU
 * emulation (SwiftShader, llvmpipe) each dispatch costs ~0.5 ms fixed, and the generic
 * path records 9 dispatches per layer + 5; with this a decode step is 2 dispatches
 * (this + the sampler). Different workgroups run on different CPU cores.
 *
 * Inputs:
 *   weights — ONE packed f32 buffer holding every weight at 256-byte aligned
 *     offsets, layers at a uniform stride (core/models/llama/weights.ts packs it;
 *     the generic path reads the same buffer through Tensor offsets);
 *   input   — the model's packed step-input buffer (u32 sections: tokens,
 *     positions, slots, sequence and logit row per token [T + 1, the last a padding
 *     sentinel], block tables [S, maxBlocks], the dispatch's rows as token indices);
 *   cacheK / cacheV — ONE buffer each for all layers: per layer the paged
 *     layout of core/ops/kv_write.ts (f32 `[slots, nKv, hd]` or q8 rows
 *     `[slots, nKv, hd/4 + 1]` u32), layer l at l * kvLayerStride bytes;
 *   logits  — out [R, V] f32 (the step's logit rows; or greedy ids [R]).
 *
 * The arithmetic mirrors the `cpu` variants of the generic kernels op for op,
 * so logits equal the generic path's (tested in
 * test/numerics/decode_megakernel.test.ts). Reference: decode_megakernel.ref.ts
 * (the plain-TS Llama forward per sequence).
 *
 * Eligibility (`megakernelSupport`, else the generic path): f32 weights packed
 * into one buffer, hidden size and head dim multiples of 4, SiLU MLP,
 * activations within the adapter's workgroup memory, the packed weights within
 * one storage binding. On llvmpipe each step must also stay within the driver's
 * per-invocation loop budget (core/ops/loop_budget.ts; LlamaModel checks the
 * model at one sequence and position 0, then every step by its rows and latest
 * position). Mode (DecodeSettings.decodeMegakernel; the server's WEFT_DECODE_MEGAKERNEL):
 * `auto` (default: on for the `cpu` kernel variant, i.e. software adapters,
 * and packed weights ≤ megakernelWeightCap: 64 MiB from a buffer, one weight
 * texture from a texture), `on` (any adapter,
 * any size that fits a binding), `off`.
 */
import { decoderExtras, type DecoderConfig } from '../formats/hf_config.ts';
import type { GpuContext } from '../gpu/context.ts';
import { isLlvmpipe, isSwiftShader, type GpuInfo } from '../gpu/device.ts';
import { copyRowsToTexture, type Recorder, type TextureBinding } from '../gpu/recorder.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { checkKvTextureFormat, kvRowWords, type KvDtype } from './kv_write.ts';
import { LLVMPIPE_LOOP_PLAN, megakernelBudgetProblem } from './loop_budget.ts';

export type MegakernelMode = 'auto' | 'on' | 'off';
export const MEGAKERNEL_MODES: readonly MegakernelMode[] = ['auto', 'on', 'off'];

/** The largest workgroup (invocations) megakernelTuning picks: 32 on hardware adapters, 8 on the CPU emulators. */
export const MEGAKERNEL_MAX_WG = 32;

/** Where the megakernel reads the packed weights from: the storage buffer or an rgba32float texture copy. */
export type MegakernelWeightSource = 'buffer' | 'texture';
export const MEGAKERNEL_WEIGHT_SOURCES: readonly (MegakernelWeightSource | 'auto')[] = ['auto', 'buffer', 'texture'];

/**
 * Per-adapter shape of the megakernel, chosen from measurements on the software adapters
 * (docs/kernels.md, "Decode megakernel"): Mesa 22's llvmpipe executes every storage-buffer
 * and workgroup-memory load lane by lane (~11 ns per f32 per invocation) while a texel load
 * from a read-only rgba32float storage texture takes ~4 ns, so on llvmpipe the weights come
 * from a texture (and the KV cache and activations from r32float read-write textures). On
 * both CPU emulators a workgroup is one 8-lane SIMD block computing 8 columns per
 * invocation per pass: wider workgroups and 16 columns measured slower (idle blocks at every
 * barrier, register spills; docs/kernels.md, "Tuning figures").
 */
export interface MegakernelTuning {
  weights: MegakernelWeightSource;
  /** Invocations per workgroup. */
  wg: number;
  /** Where an f32 KV cache lives (core/ops/kv_write.ts KvTexture): textures on llvmpipe. */
  kv: 'buffer' | 'texture';
  /** Where a workgroup keeps its activations: workgroup memory, or an r32float scratch texture (llvmpipe). */
  scratch: 'workgroup' | 'texture';
  /** Octets (8 output columns) per invocation per matmul pass: 1, 2 or 4. */
  octs: 1 | 2 | 4;
  /** `auto` mode: largest decode-only step (sequences) that takes the megakernel. */
  autoMaxSeqs: number;
  /**
   * Most tokens of multi-token chunks (prompt chunks, verify rows) one step may put through
   * the megakernel's waves (core/models/llama/megakernel_waves.ts); past it the step takes the
   * generic path. Chosen per adapter from measurements (docs/benchmarks.md): on llvmpipe
   * with texture weights, KV and scratch the waves win up to the default step budget of 256
   * tokens; on SwiftShader the generic path wins past 64.
   */
  waveChunkTokens: number;
  /**
   * Loop iterations one invocation may plan to run (core/ops/loop_budget.ts): llvmpipe stops
   * every loop of an invocation past 65,535 in all, so a step whose megakernelLoopCount exceeds
   * this goes to the generic path; null where the driver has no such limit.
   */
  loopBudget: number | null;
}

/** MegakernelTuning.waveChunkTokens: the default, and llvmpipe's with texture weights (measured there up to 256). */
export const MEGAKERNEL_WAVE_CHUNK_TOKENS = 64;
export const MEGAKERNEL_LLVMPIPE_WAVE_CHUNK_TOKENS = 256;

/** The megakernel shape for this adapter; `weights` overrides the weight source (DecodeSettings.megakernelWeights). */
export function megakernelTuning(info: Pick<GpuInfo, 'name' | 'device'>, weights: MegakernelWeightSource | 'auto' = 'auto'): MegakernelTuning {
  const llvmpipe = isLlvmpipe(info);
  const software = llvmpipe || isSwiftShader(info);
  const source = weights === 'auto' ? (llvmpipe ? 'texture' : 'buffer') : weights;
  // On the CPU emulators, and with texture weights anywhere, the megakernel beats the generic
  // path at every batch size measured; elsewhere only up to MEGAKERNEL_AUTO_MAX_SEQS.
  return {
    weights: source,
    kv: llvmpipe ? 'texture' : 'buffer',
    scratch: llvmpipe ? 'texture' : 'workgroup',
    wg: software ? 8 : MEGAKERNEL_MAX_WG,
    octs: software ? 1 : 2,
    autoMaxSeqs: software || source === 'texture' ? Infinity : MEGAKERNEL_AUTO_MAX_SEQS,
    waveChunkTokens: llvmpipe && source === 'texture' ? MEGAKERNEL_LLVMPIPE_WAVE_CHUNK_TOKENS : MEGAKERNEL_WAVE_CHUNK_TOKENS,
    loopBudget: llvmpipe ? LLVMPIPE_LOOP_PLAN : null,
  };
}

/**
 * `auto` with the weights read from the storage buffer packs (and runs the megakernel for)
 * only models whose f32 weights fit this: one workgroup (one core) streams every weight per
 * token. With texture weights (llvmpipe) the bound is one weight texture (megakernelWeightCap)
 * and the loop budget decides which steps take the megakernel (core/ops/loop_budget.ts);
 * a model past that budget still gets the texture storage for its generic path, where texel
 * loads beat buffer loads too.
 */
export const MEGAKERNEL_AUTO_MAX_WEIGHT_BYTES = 64 * 2 ** 20;

/** Bytes of packed weights `auto` admits when the weights are read from `source`. */
export function megakernelWeightCap(limits: Pick<GPUSupportedLimits, 'maxTextureDimension2D'>, source: MegakernelWeightSource): number {
  return source === 'texture' ? WEIGHT_TEXTURE_WIDTH * limits.maxTextureDimension2D * 16 : MEGAKERNEL_AUTO_MAX_WEIGHT_BYTES;
}
/**
 * `auto` on a hardware adapter with weights read from the storage buffer runs the megakernel
 * for decode-only steps of at most this many sequences: one workgroup per sequence streams
 * every weight, while the generic path's many small workgroups balance over the cores, so
 * past a few sequences the two tie and larger batches stay generic. The CPU emulators'
 * 8-invocation shape and texture weights lift the cap (megakernelTuning); `on` uses the
 * megakernel for every decode-only step.
 */
export const MEGAKERNEL_AUTO_MAX_SEQS = 2;
/** Alignment of every packed tensor and of the per-layer KV regions (WebGPU's largest minStorageBufferOffsetAlignment). */
export const PACK_ALIGN_BYTES = 256;


/**
 * Token rows (sequences) per workgroup for a step of S sequences: each loaded
 * weight serves MR rows (per-lane weight loads dominate on CPU emulation). Up to 4
 * sequences share ONE workgroup: on both CPU emulators a second workgroup bought
 * no parallelism at that size (docs/kernels.md, "Tuning figures"). Larger steps split into workgroups of at
 * most 4 rows (register blocking, as matmul.wgsl), at least two of them, each within
 * workgroup memory.
 */
export function megakernelRows(cfg: Parameters<typeof megakernelSmem>[0], S: number, maxWorkgroupBytes: number): number {
  const fit = Math.floor((maxWorkgroupBytes - MEGAKERNEL_FIXED_SMEM_BYTES) / (megakernelSmem(cfg).vec4s * 16));
  return Math.max(1, Math.min(4, fit, S <= 4 ? S : Math.ceil(S / 2)));
}

/**
 * Workgroup memory besides the row regions: `red` (4 f32) and, with the fused argmax, `amM` /
 * `amI` (4 rows x WG each, 4-byte elements) at the largest workgroup size.
 */
export const MEGAKERNEL_FIXED_SMEM_BYTES = 16 + 2 * 4 * 4 * MEGAKERNEL_MAX_WG;

/** Query heads per attention invocation, as attention.ts picks it (largest divisor of the group <= 8). */
export function megakernelGC(cfg: Pick<DecoderConfig, 'heads' | 'kvHeads'>): number {
  const group = cfg.heads / cfg.kvHeads;
  for (let d = Math.min(group, 8); d > 1; d--) if (group % d === 0) return d;
  return 1;
}

/**
 * Workgroup-memory layout in vec4s of f32: x [D/4] at 0, region H (h, then att) at oH,
 * region B (qkv, then act zero-padded to a multiple of 4) at oB; `vec4s` in all.
 */
export function megakernelSmem(cfg: Pick<DecoderConfig, 'hiddenSize' | 'heads' | 'kvHeads' | 'headDim' | 'intermediateSize'>): { oH: number; oB: number; vec4s: number } {
  const D4 = Math.ceil(cfg.hiddenSize / 4);
  const att4 = Math.ceil((cfg.heads * cfg.headDim) / 4);
  const qkv4 = Math.ceil(((cfg.heads + 2 * cfg.kvHeads) * cfg.headDim) / 4);
  const oH = D4;
  const oB = oH + Math.max(D4, att4);
  return { oH, oB, vec4s: oB + Math.max(qkv4, Math.ceil(cfg.intermediateSize / 4)) };
}

export interface MegakernelSupportInput {
  mode: MegakernelMode;
  kvDtype: KvDtype;
  /** Every weight is f32 (packed into one buffer). */
  f32Weights: boolean;
  /** Bytes of the packed weight buffer. */
  weightBytes: number;
  /** Where the megakernel reads the weights from (megakernelTuning): sets `auto`'s size bound (megakernelWeightCap). */
  weightSource: MegakernelWeightSource;
}

/**
 * Model-level eligibility: null when the megakernel may run this model's
 * decode steps on this context, else the reason it does not.
 */
export function megakernelSupport(ctx: Pick<GpuContext, 'gpu' | 'variant'>, cfg: DecoderConfig, o: MegakernelSupportInput): string | null {
  if (o.mode === 'off') return 'decode megakernel off (configured)';
  if (o.mode === 'auto' && ctx.variant !== 'cpu') return 'auto: only on software adapters (kernel variant cpu); one workgroup per sequence would underuse a real GPU';
  // The size bound first: a model over it is not packed, and "not f32" would misstate why.
  const cap = megakernelWeightCap(ctx.gpu.limits, o.weightSource);
  if (o.mode === 'auto' && o.weightBytes > cap) {
    return `auto: packed weights ${(o.weightBytes / 2 ** 20).toFixed(1)} MiB > ${cap / 2 ** 20} MiB (weights read from a ${o.weightSource})`;
  }
  if (!o.f32Weights) return 'weights are not f32';
  const lim = ctx.gpu.limits;
  if (o.weightBytes > lim.maxStorageBufferBindingSize) return `packed weights (${o.weightBytes} B) exceed maxStorageBufferBindingSize`;
  if (cfg.hiddenSize % 4 !== 0 || cfg.headDim % 4 !== 0) return 'hidden size and head dim must be multiples of 4';
  if (cfg.heads % cfg.kvHeads !== 0) return 'heads not a multiple of kv heads';
  if (cfg.hiddenAct !== 'silu') return `activation ${cfg.hiddenAct} (the megakernel is SiLU-gated)`;
  const extras = decoderExtras(cfg);
  if (extras) return `${extras} (the megakernel runs the Llama layer only)`;
  const smem = megakernelSmem(cfg).vec4s * 16 + MEGAKERNEL_FIXED_SMEM_BYTES; // one token row

  if (smem > lim.maxComputeWorkgroupStorageSize) return `activations need ${smem} B of workgroup memory > ${lim.maxComputeWorkgroupStorageSize}`;
  if (MEGAKERNEL_MAX_WG > lim.maxComputeInvocationsPerWorkgroup) return 'workgroup size above the adapter limit';
  if (o.kvDtype !== 'f32' && o.kvDtype !== 'q8') return `KV dtype ${String(o.kvDtype)}`;
  return null;
}

/**
 * Whether the megakernel runs a model with `tuning` (whose weight source sets `auto`'s size
 * bound): `support` (megakernelSupport) and, where the driver has a loop budget, `budget` (one
 * sequence's step at position 0 within it: megakernelBudgetProblem; checked only for a
 * supported model). Both null: it runs. Kept apart because a model past the
 * budget still keeps the texture storage (weight and KV textures) for its generic path.
 * The one decision behind both load.ts (GGUF `auto` dequantization) and LlamaModel.
 */
export function megakernelEligibility(
  ctx: Pick<GpuContext, 'gpu' | 'variant'>,
  cfg: DecoderConfig,
  o: Omit<MegakernelSupportInput, 'weightSource'>,
  tuning: Pick<MegakernelTuning, 'weights' | 'wg' | 'octs' | 'loopBudget'>,
): { support: string | null; budget: string | null } {
  const support = megakernelSupport(ctx, cfg, { ...o, weightSource: tuning.weights });
  const budget = support === null ? megakernelBudgetProblem(cfg, { WG: tuning.wg, NO: tuning.octs, GC: megakernelGC(cfg) }, tuning.loopBudget) : null;
  return { support, budget };
}

/** Element offsets (f32, multiples of 64) of every weight in the packed buffer. */
export interface MegakernelWeights {
  buffer: GPUBuffer;
  embed: number;
  norm: number;
  head: number;
  /** Offset of layer 0 and the stride between layers. */
  layer0: number;
  layerStride: number;
  /** The layers carry a qkv bias / Qwen3 q/k norms. */
  bias: boolean;
  qkNorm: boolean;
  /** Within a layer, relative to its first tensor (0 when absent). */
  inNorm: number;
  qkv: number;
  qkvBias: number;
  qNorm: number;
  kNorm: number;
  o: number;
  postNorm: number;
  gu: number;
  down: number;
}

interface LinearLike {
  w: Tensor;
  bias?: Tensor;
}
/** The parts of LlamaWeights the megakernel reads (structural, so ops need not import models). */
export interface LlamaWeightsLike {
  embed: Tensor;
  norm: Tensor;
  head: LinearLike;
  layers: readonly {
    inNorm: Tensor;
    qkv: LinearLike;
    qNorm?: Tensor;
    kNorm?: Tensor;
    o: LinearLike;
    postNorm: Tensor;
    gu: LinearLike;
    down: LinearLike;
  }[];
}

/**
 * The packed-buffer offsets of `w`, or the reason they cannot be used: every
 * tensor f32 in one buffer at 16-byte aligned offsets, and each layer's
 * tensors at the same offsets relative to the layer (uniform stride).
 */
export function megakernelWeights(w: LlamaWeightsLike): MegakernelWeights | string {
  const buffer = w.embed.buffer;
  const el = (t: Tensor, what: string): number => {
    if (t.buffer !== buffer) throw new Error(`${what} is not in the packed weight buffer`);
    if (t.dtype !== 'f32') throw new Error(`${what} is ${t.dtype}`);
    if (t.offset % 16 !== 0) throw new Error(`${what} offset ${t.offset} not 16-byte aligned`);
    return t.offset / 4;
  };
  try {
    const L = w.layers;
    if (!L.length) return 'no layers';
    if (w.head.bias) return 'LM head has a bias';
    const bias = !!L[0]!.qkv.bias;
    const qkNorm = !!(L[0]!.qNorm && L[0]!.kNorm);
    // Per layer: absolute element offsets of [inNorm, qkv, qkvBias, qNorm, kNorm, o, postNorm, gu, down].
    const abs = L.map((x) => {
      if (x.o.bias || x.gu.bias || x.down.bias) throw new Error('o/gate/up/down biases');
      if (!!x.qkv.bias !== bias || !!(x.qNorm && x.kNorm) !== qkNorm) throw new Error('layers differ in biases or q/k norms');
      return [
        el(x.inNorm, 'inNorm'),
        el(x.qkv.w, 'qkv'),
        x.qkv.bias ? el(x.qkv.bias, 'qkv bias') : -1,
        x.qNorm && qkNorm ? el(x.qNorm, 'qNorm') : -1,
        x.kNorm && qkNorm ? el(x.kNorm, 'kNorm') : -1,
        el(x.o.w, 'o'),
        el(x.postNorm, 'postNorm'),
        el(x.gu.w, 'gu'),
        el(x.down.w, 'down'),
      ];
    });
    const base = (a: number[]): number => Math.min(...a.filter((v) => v >= 0));
    const b0 = base(abs[0]!);
    const rel0 = abs[0]!.map((v) => (v < 0 ? 0 : v - b0));
    const stride = L.length > 1 ? base(abs[1]!) - b0 : 0;
    for (let l = 1; l < L.length; l++) {
      const rel = abs[l]!.map((v) => (v < 0 ? 0 : v - base(abs[l]!)));
      if (rel.join() !== rel0.join() || base(abs[l]!) !== b0 + l * stride) return 'layers are not packed at a uniform stride';
    }
    const [inNorm, qkv, qkvBias, qNorm, kNorm, o, postNorm, gu, down] = rel0 as [number, number, number, number, number, number, number, number, number];
    return { buffer, embed: el(w.embed, 'embed'), norm: el(w.norm, 'norm'), head: el(w.head.w, 'head'), layer0: b0, layerStride: stride, bias, qkNorm, inNorm, qkv, qkvBias, qNorm, kNorm, o, postNorm, gu, down };
  } catch (e) {
    return (e as Error).message;
  }
}

const layout = uniformLayout([
  ['seqs', 'u32'], // rows of this dispatch (workgroups of MR)
  ['layers', 'u32'],
  ['D', 'u32'], // hidden size, elements
  ['nH', 'u32'],
  ['nKv', 'u32'],
  ['hd', 'u32'], // head dim, elements
  ['group', 'u32'], // nH / nKv
  ['I', 'u32'], // intermediate size, elements
  ['V', 'u32'], // vocabulary
  ['qkvCols', 'u32'], // (nH + 2 nKv) * hd
  ['oH', 'u32'], // workgroup-memory region offsets, vec4s
  ['oB', 'u32'],
  ['eps', 'f32'],
  ['qScale', 'f32'], // 1 / sqrt(hd)
  ['blockSize', 'u32'], // KV slots per block
  ['maxBlocks', 'u32'], // block-table columns
  ['kvStride', 'u32'], // cache row stride: vec4s (f32) or words (q8)
  ['kvLayerStride', 'u32'], // one layer of the cache: vec4s (f32) or words (q8)
  ['window', 'u32'], // sliding window, positions; 0 = none
  ['inTokens', 'u32'], // input-buffer section offsets, u32 words
  ['inPositions', 'u32'],
  ['inSlots', 'u32'],
  ['inBlockTables', 'u32'],
  ['inTokSeq', 'u32'], // token -> sequence [T + 1]
  ['inOut', 'u32'], // token -> logit row or 0xffffffff [T + 1]
  ['inRows', 'u32'], // this dispatch's rows -> token [seqs]
  ['wEmbed', 'u32'], // weight offsets, f32 elements
  ['wNorm', 'u32'],
  ['wHead', 'u32'],
  ['wLayer0', 'u32'],
  ['wLayerStride', 'u32'],
  ['lIn', 'u32'], // within a layer
  ['lQkv', 'u32'],
  ['lQkvB', 'u32'],
  ['lQn', 'u32'],
  ['lKn', 'u32'],
  ['lO', 'u32'],
  ['lPost', 'u32'],
  ['lGu', 'u32'],
  ['lDown', 'u32'],
] as const);

/** Texels per row of the weight texture (a power of two; rows of 32 KiB, a multiple of 256 B). */
export const WEIGHT_TEXTURE_WIDTH = 2048;

/**
 * An rgba32float copy of the packed weight buffer (`bytes` long, a multiple of 16) for the
 * megakernel's texture weight source: vec4 i at texel (i % WEIGHT_TEXTURE_WIDTH,
 * i / WEIGHT_TEXTURE_WIDTH). Null when it does not fit the adapter's 2D texture limit.
 */
export function weightTexture(ctx: Pick<GpuContext, 'device' | 'gpu'>, buffer: GPUBuffer, bytes: number): TextureBinding | null {
  const n4 = Math.ceil(bytes / 16);
  const t = stagingTexture(ctx, n4, 'weights-texture');
  if (!t) return null;
  const enc = ctx.device.createCommandEncoder();
  copyRowsToTexture(enc, buffer, 0, n4, t.texture, WEIGHT_TEXTURE_WIDTH);
  ctx.device.queue.submit([enc.finish()]);
  return t;
}

/**
 * An empty rgba32float texture for `vec4s` elements in weightTexture's layout (a copy target,
 * bound as a read-only storage texture), or null when it exceeds the adapter's 2D texture size.
 */
export function stagingTexture(ctx: Pick<GpuContext, 'device' | 'gpu'>, vec4s: number, label = 'x-stage'): TextureBinding | null {
  const rows = Math.max(1, Math.ceil(vec4s / WEIGHT_TEXTURE_WIDTH));
  if (rows > ctx.gpu.limits.maxTextureDimension2D) return null;
  const texture = ctx.device.createTexture({ label, size: [WEIGHT_TEXTURE_WIDTH, rows], format: 'rgba32float', usage: GPUTextureUsage.STORAGE_BINDING | GPUTextureUsage.COPY_DST });
  return { texture, view: texture.createView() };
}

export interface DecodeMegakernelArgs {
  cfg: DecoderConfig;
  weights: MegakernelWeights;
  /** Workgroup shape and weight source (megakernelTuning). */
  tuning: MegakernelTuning;
  /** With tuning.weights 'texture': the weightTexture copy of the packed weights. */
  weightTexture?: TextureBinding | null;
  /** With tuning.scratch 'texture': an r32float storage texture of megakernelScratchFloats(cfg, seqs) floats. */
  scratch?: TextureBinding | null;
  /**
   * The step-input buffer and its section offsets in u32 words: per token t < T (and the
   * padding sentinel t = T: token 0, position 0, slot 0xffffffff, sequence 0, no row) its id,
   * position, KV slot, sequence and logit row (0xffffffff: none); the block tables per
   * sequence; this dispatch's rows as token indices (core/models/llama/megakernel_waves.ts).
   */
  input: { buffer: GPUBuffer; tokens: number; positions: number; slots: number; tokenSeq: number; out: number; blockTables: number; rows: number };
  /** [headDim / 2] f32 inverse frequencies (rope.ts invFreqTensor, incl. rope scaling). */
  invFreq: Tensor;
  /** All layers' K / V caches: buffers, or (f32 only) KV textures (core/ops/kv_write.ts). */
  cacheK: GPUBuffer | TextureBinding;
  cacheV: GPUBuffer | TextureBinding;
  /** Bytes of one layer's region in cacheK / cacheV (multiple of 256; f32 bytes for textures). */
  kvLayerBytes: number;
  kvDtype: KvDtype;
  blockSize: number;
  maxBlocksPerSeq: number;
  /** Rows of this dispatch (its wave), padding included. */
  seqs: number;
  /** Rows per workgroup (default megakernelRows for `seqs` single-token rows). */
  MR?: number;
  /**
   * The step's output, one of: `logits` [R, V] f32; or `ids` [R] u32, each logit row's greedy
   * id by sample.wgsl argmax_plain's rules (NaN, -inf and -FLT_MAX never win, ties to the lowest
   * id, NO_TOKEN if nothing beats -FLT_MAX) with no logits stored: the sampler's dispatch saved.
   */
  out: { logits: Tensor } | { ids: Tensor };
}

function scratchOf(a: DecodeMegakernelArgs): TextureBinding {
  if (!a.scratch) throw new Error('decodeMegakernel: tuning.scratch is texture but no scratch texture was given');
  return a.scratch;
}

/** Floats of activation scratch for steps of up to `seqs` sequences (rows padded to whole workgroups of <= 4). */
export function megakernelScratchFloats(cfg: Parameters<typeof megakernelSmem>[0], seqs: number): number {
  return (seqs + 3) * megakernelSmem(cfg).vec4s * 4;
}

function kvBinding(c: GPUBuffer | TextureBinding): TextureBinding | { buffer: GPUBuffer } {
  return 'view' in c ? c : { buffer: c };
}

export async function decodeMegakernel(rec: Recorder, a: DecodeMegakernelArgs): Promise<void> {
  const c = a.cfg;
  if (a.seqs === 0) return;
  const q8 = a.kvDtype === 'q8';
  const GC = megakernelGC(c);
  const smem = megakernelSmem(c);
  const MR = a.MR ?? megakernelRows(c, a.seqs, rec.ctx.gpu.limits.maxComputeWorkgroupStorageSize);
  const groups = Math.ceil(a.seqs / MR); // one workgroup per MR rows
  const maxGroups = rec.ctx.gpu.limits.maxComputeWorkgroupsPerDimension;
  if (groups > maxGroups) throw new Error(`decodeMegakernel: ${a.seqs} rows in ${groups} workgroups of ${MR} > maxComputeWorkgroupsPerDimension ${maxGroups}`);
  if ((a.tuning.weights === 'texture') !== !!a.weightTexture) throw new Error('decodeMegakernel: tuning.weights and weightTexture disagree');
  const kvTex = 'view' in a.cacheK;
  if (kvTex !== 'view' in a.cacheV) throw new Error('decodeMegakernel: K and V must both be textures or both buffers');
  if ('view' in a.cacheK && 'view' in a.cacheV) checkKvTextureFormat(a.cacheK, a.cacheV, a.kvDtype, 'decodeMegakernel');
  const w = a.weights;
  const argmax = 'ids' in a.out;
  const out = 'ids' in a.out ? a.out.ids : a.out.logits;
  const kernel = await rec.ctx.pipelines.get({
    shader: 'decode_megakernel',
    defines: {
      WG: a.tuning.wg,
      MR,
      NO: a.tuning.octs,
      HD4: c.headDim / 4,
      // q and the attention accumulators in registers: the QREG form of the shared tile (_attention_tile8).
      QREG: true,
      BLOCK8: a.blockSize >= 8,
      PS: smem.vec4s,
      SM: MR * smem.vec4s,
      GC,
      BIAS: w.bias,
      QK_NORM: w.qkNorm,
      Q8: q8,
      VEC_I: c.intermediateSize % 4 === 0,
      TEX: !!a.weightTexture,
      TW: WEIGHT_TEXTURE_WIDTH,
      TW_LOG2: Math.log2(WEIGHT_TEXTURE_WIDTH),
      KV_TEX: kvTex,
      SCRATCH_TEX: a.tuning.scratch === 'texture',
      ARGMAX: argmax,
      SYNC: a.tuning.scratch === 'texture' ? 'textureBarrier(); workgroupBarrier();' : 'workgroupBarrier();',
    },
    layout,
  });
  const unit = q8 ? 4 : 16; // bytes per cache index unit (word / vec4)
  const hd4 = c.headDim / 4;
  rec.dispatch(
    kernel,
    {
      seqs: a.seqs,
      layers: c.layers,
      D: c.hiddenSize,
      nH: c.heads,
      nKv: c.kvHeads,
      hd: c.headDim,
      group: c.heads / c.kvHeads,
      I: c.intermediateSize,
      V: c.vocabSize,
      qkvCols: (c.heads + 2 * c.kvHeads) * c.headDim,
      oH: smem.oH,
      oB: smem.oB,
      eps: c.rmsEps,
      qScale: 1 / Math.sqrt(c.headDim),
      blockSize: a.blockSize,
      maxBlocks: a.maxBlocksPerSeq,
      kvStride: q8 ? kvRowWords(c.headDim, 'q8') : hd4,
      kvLayerStride: a.kvLayerBytes / unit,
      window: c.slidingWindow ?? 0,
      inTokens: a.input.tokens,
      inPositions: a.input.positions,
      inSlots: a.input.slots,
      inBlockTables: a.input.blockTables,
      inTokSeq: a.input.tokenSeq,
      inOut: a.input.out,
      inRows: a.input.rows,
      wEmbed: w.embed,
      wNorm: w.norm,
      wHead: w.head,
      wLayer0: w.layer0,
      wLayerStride: w.layerStride,
      lIn: w.inNorm,
      lQkv: w.qkv,
      lQkvB: w.qkvBias,
      lQn: w.qNorm,
      lKn: w.kNorm,
      lO: w.o,
      lPost: w.postNorm,
      lGu: w.gu,
      lDown: w.down,
    },
    [a.weightTexture ?? { buffer: w.buffer }, { buffer: a.input.buffer }, a.invFreq, kvBinding(a.cacheK), kvBinding(a.cacheV), out, ...(a.tuning.scratch === 'texture' ? [scratchOf(a)] : [])],
    [groups],
  );
}
