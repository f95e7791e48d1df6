/**
 * Loads a decoder LM from a ModelSource — a Hugging Face directory
 * (config.json + safetensors, sharded or not) or a single GGUF file — onto a
 * GPU context: weights, the model's step recorder and the KV-pool geometry.
 * The engine around it is built by the composition root (core/api/load_decoder.ts):
 * models never depend on the engine.
 *
 * Geometry defaults: KV blocks of 16 tokens; the pool size comes from
 * `kvCacheBytes` (page_cache_size) or, by default, from the device memory plan
 * (memory_plan.ts): what the device budget leaves after weights, activations
 * and a reserve, up to `maxSeqs` full-context sequences. A model that cannot
 * fit is refused (ModelTooLargeError) before anything is allocated. The block
 * count uses the real bytes per token of the KV dtype (`kvCacheDtype: 'q8'`
 * holds ~4x the tokens of f32 at realistic head sizes). Float checkpoints are
 * stored as f16 under `auto` (f32 where the decode megakernel runs the model).
 */
import { parseDecoderConfig, parseGenerationConfig, type DecoderConfig, type GenerationDefaults } from '../formats/hf_config.ts';
import { openSafetensorsModel, toFloat32, toHalves } from '../formats/safetensors.ts';
import { ModelFormatError } from '../errors.ts';
import type { ModelSource } from '../formats/source.ts';
import type { GpuContext } from '../gpu/context.ts';
import { megakernelEligibility } from '../ops/decode_megakernel.ts';
import { resolveDecodePlan, type DecodePlan, type DecodeSettings } from './decode_plan.ts';
import { kvBytesPerTokenLayer, type KvDtype } from '../ops/kv_write.ts';
import { loadTokenizerFromSource } from '../tokenizer/tokenizer.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import { openGgufWeights } from './gguf_weights.ts';
import { HostBytes, type HostTensor, type WeightDType, type WeightSource } from './host_tensor.ts';
import { LlamaModel } from './llama/forward.ts';
import { isLlavaConfig, llavaParts } from './llava/load.ts';
import type { LlavaVision } from './llava/vision.ts';
import { describeAdapter, probeDeviceMemory } from '../gpu/memory_probe.ts';
import { estimateWeightBytes, planDecoderMemory } from './decoder_plan.ts';
import { deviceBudget, type DeviceBudget, type MemoryPlan } from './memory_plan.ts';
import { checkLlamaShapes, destroyLlamaWeights, loadLlamaWeights, packedLlamaBytes, type LlamaWeights } from './llama/weights.ts';
import type { StepGeometry } from './step.ts';
import type { ProgressCallback } from '../progress.ts';

/**
 * Reports weight-upload progress as the loader reads tensors: units are the
 * embedding, each layer (by the `layers.N.` in tensor names) and the final
 * norm + head, so done / total moves once per layer whatever the format.
 */
function withProgress(src: WeightSource, layers: number, startedAt: number, onProgress: ProgressCallback | undefined): { src: WeightSource; finish(): void } {
  const total = layers + 2;
  let done = 0;
  const report = (d: number, label: string): void => {
    if (d <= done) return;
    done = d;
    onProgress?.({ phase: 'weights', done, total, label, ms: performance.now() - startedAt });
  };
  if (!onProgress) return { src, finish: () => {} };
  return {
    src: {
      has: (n) => src.has(n),
      ...(src.info ? { info: (n: string) => src.info!(n) } : {}),
      async load(n) {
        const t = await src.load(n);
        const m = /layers\.(\d+)\./.exec(n);
        if (m) report(Number(m[1]) + 1, `${m[1]} of ${layers} layers`); // the embedding (unit 1) and layers 0..N-1 are done
        else if (/embed_tokens/.test(n)) report(1, 'embedding');
        return t;
      },
    },
    finish: () => report(total, 'head'),
  };
}

export interface LoadOptions {
  /** GPU weight dtype (default `auto`: f32 for float checkpoints, GGUF quantization kept). */
  dtype?: WeightDType;
  /** Tokens per engine step (default 256). */
  maxTokensPerStep?: number;
  /** Sequences per step (default 16). */
  maxSeqs?: number;
  /** Context limit (default: the model's max positions). */
  maxContext?: number;
  /** KV-cache pool size in bytes (default: what the device budget leaves, up to maxSeqs full contexts; memory_plan.ts). */
  kvCacheBytes?: number;
  /** Device memory budget in bytes, as configured by the operator (server config / WEFT_GPU_MEMORY); default: reported, probed or a default. */
  gpuMemoryBytes?: number;
  /**
   * Free device memory in bytes as the GPU vendor's tools report it (the server reads it:
   * server/vendor_memory.ts); used before a probe allocation, after a configured size.
   */
  reportedMemoryBytes?: number;
  blockSize?: number;
  prefixCaching?: boolean;
  /** Logit rows per step (default maxSeqs); a target verifying k draft tokens needs maxSeqs * (k + 1). */
  maxLogitRows?: number;
  /**
   * KV-cache storage (layouts in core/ops/kv_write.ts): f32; f16 (half the bytes); q8 = int8 with one
   * f32 scale per (token, kv head). Default `auto`: f16 where the adapter has `shader-f16`, except where
   * the decode megakernel runs the model (it reads f32 and q8 caches); f32 elsewhere.
   */
  kvCacheDtype?: KvDtype | 'auto';
  /** Llama family: prompt chunks through the decode megakernel in waves (default true; false = decode steps only, for A/B measurements). */
  megakernelWaves?: boolean;
  /**
   * Compile the pipelines of the common request shapes before returning
   * (core/engine/warmup.ts), so the first request pays no shader compilation. Default false.
   */
  warmUp?: boolean;
  /** Loading progress: weights uploaded, then (with warmUp) pipelines compiled, then 'ready'. */
  onProgress?: ProgressCallback;
  /** Decode-path settings (megakernel, its weight source, decode attention): the decode plan's inputs (core/models/decode_plan.ts). */
  decode?: DecodeSettings;
  /**
   * Largest single device tensor in bytes (default: the adapter's maxStorageBufferBindingSize /
   * maxBufferSize). An embedding or LM head above it is stored as row parts (Gemma's 256k
   * vocabulary at hidden 2304 is 1.18 GB in f16, over SwiftShader's 1 GiB); tests lower it.
   */
  maxTensorBytes?: number;
  /**
   * Probe a hardware adapter's memory by allocation when no budget is configured (default
   * true). A server planning beside running readers passes false (their buffers would make the
   * probe fail early, and the probe would take memory from them): the default budget applies.
   */
  probeMemory?: boolean;
}

export interface LoadStats {
  /** Most host bytes the loader held at once (tensors read, converted, fused, encoded: HostBytes). */
  peakHostBytes: number;
  /** Device bytes of the weights. */
  deviceWeightBytes: number;
  /** Wall time of the weight load (read, convert, upload), ms. */
  loadMs: number;
}

/** A decoder on the device, without an engine (core/api/load_decoder.ts adds one). */
export interface LoadedModel {
  cfg: DecoderConfig;
  generation: GenerationDefaults;
  tokenizer: Tokenizer;
  weights: LlamaWeights;
  model: LlamaModel;
  geometry: StepGeometry;
  /** Longest context (prompt + output) a sequence may reach, tokens. */
  maxContext: number;
  /** Token ids that end generation: generation_config, config and tokenizer together. */
  eosIds: number[];
  format: 'safetensors' | 'gguf';
  /** config.json as shipped; for GGUF, an HF-style config built from its metadata. */
  rawConfig: Record<string, unknown>;
  /** Image-to-text models (LLaVA): the image encoder; absent for text-only models. */
  vision?: LlavaVision;
  /** What the weight load cost: host bytes held at peak, device bytes, wall time. */
  loadStats: LoadStats;
  /** The device memory plan the KV pool was sized by. */
  memoryPlan: MemoryPlan;
  /** The decode plan the model runs (kernels per op, storage, megakernel). */
  decodePlan: DecodePlan;
  destroy(): void;
}

/**
 * A safetensors checkpoint (sharded or not) as a WeightSource: each tensor is read from its
 * shard by byte range when asked for (shards are never read whole); F16 / BF16 tensors arrive
 * as f16 halves, others as f32. `host` counts the file bytes held during a conversion.
 */
async function safetensorsWeights(ms: ModelSource, host?: HostBytes): Promise<WeightSource & { files: string[] }> {
  const st = await openSafetensorsModel(ms);
  return {
    files: st.files,
    has: (n) => st.tensors.has(n),
    info: (n) => {
      const t = st.tensors.get(n);
      return t ? { shape: t.info.shape, file: t.file, type: t.info.dtype } : undefined;
    },
    async load(n): Promise<HostTensor> {
      const t = st.tensors.get(n);
      if (!t) throw new ModelFormatError(`missing tensor ${n}`, { tensor: n });
      const { dtype, shape } = t.info;
      const bytes = t.info.end - t.info.begin;
      if (dtype === 'F16' || dtype === 'BF16') {
        // Halves converted in chunks: the tensor's halves plus one chunk of file bytes are held, not two copies.
        const out = new Uint16Array(bytes / 2);
        for (let o = 0; o < bytes; o += READ_CHUNK) {
          const len = Math.min(READ_CHUNK, bytes - o);
          host?.hold(out.byteLength + len);
          out.set(toHalves(dtype, await st.readPart(n, o, len)), o / 2);
          host?.release(out.byteLength + len);
        }
        return { kind: 'f16', shape, data: out };
      }
      const raw = await st.read(n);
      host?.hold(2 * raw.byteLength); // file bytes and their f32 widening (at least as large)
      try {
        return { kind: 'f32', shape, data: toFloat32(dtype, raw) };
      } finally {
        host?.release(2 * raw.byteLength);
      }
    },
  };
}

/** The fields of an HF config.json that a DecoderConfig determines (for GGUF models). */
function hfStyleConfig(c: DecoderConfig): Record<string, unknown> {
  return {
    architectures: [c.architecture],
    hidden_size: c.hiddenSize,
    num_hidden_layers: c.layers,
    num_attention_heads: c.heads,
    num_key_value_heads: c.kvHeads,
    head_dim: c.headDim,
    intermediate_size: c.intermediateSize,
    vocab_size: c.vocabSize,
    max_position_embeddings: c.maxPositions,
    rms_norm_eps: c.rmsEps,
    rope_theta: c.ropeTheta,
    tie_word_embeddings: c.tieEmbeddings,
    bos_token_id: c.bosTokenId,
    eos_token_id: c.eosTokenIds.length === 1 ? c.eosTokenIds[0] : c.eosTokenIds,
    ...(c.slidingWindow ? { sliding_window: c.slidingWindow } : {}),
    hidden_act: c.hiddenAct,
    ...(c.slidingLayers ? { layer_types: c.slidingLayers.map((x) => (x ? 'sliding_attention' : 'full_attention')) } : {}),
    ...(c.attnSoftcap ? { attn_logit_softcapping: c.attnSoftcap } : {}),
    ...(c.finalSoftcap ? { final_logit_softcapping: c.finalSoftcap } : {}),
    ...(c.attnScale !== undefined ? { query_pre_attn_scalar: 1 / (c.attnScale * c.attnScale) } : {}),
    ...(c.localRope ? { rope_local_base_freq: c.localRope.theta } : {}),
  };
}

/** KV-cache bytes per token over all layers, K and V, for the cache dtype. */
export function kvBytesPerToken(cfg: DecoderConfig, kvDtype: KvDtype = 'f32'): number {
  return cfg.layers * kvBytesPerTokenLayer(cfg.kvHeads, cfg.headDim, kvDtype);
}

/** Bytes of a float tensor read per step while converting it to halves (8 MiB, even). */
const READ_CHUNK = 8 * 2 ** 20;

/** Largest f32 weights kept f32 under `auto` on a software adapter (the emulator paths' size class). */
const EMULATOR_F32_BYTES = 256 * 2 ** 20;

/** Probe ceiling: more device memory than any single accelerator has today. */
const PROBE_CAP = 256 * 2 ** 30;
const probed = new WeakMap<GpuContext, number>();

/** The device budget: configured, else reported by the vendor, else a probe on hardware adapters (once per context), else the default. */
export async function resolveBudget(ctx: GpuContext, configured?: number, probe = true, reported?: number): Promise<DeviceBudget> {
  if (configured && configured > 0) return deviceBudget(describeAdapter(ctx.gpu), configured);
  if (reported && reported > 0) return deviceBudget(describeAdapter(ctx.gpu, null, reported));
  if (ctx.gpu.info.isCpu || !probe) return deviceBudget(describeAdapter(ctx.gpu));
  let p = probed.get(ctx);
  if (p === undefined) probed.set(ctx, (p = await probeDeviceMemory(ctx.device, PROBE_CAP)));
  return deviceBudget(describeAdapter(ctx.gpu, p));
}

/** A checkpoint opened for loading: config, tokenizer and a weight source (headers read, no tensor data). */
interface OpenedDecoder {
  cfg: DecoderConfig;
  generation: GenerationDefaults;
  tokenizer: Tokenizer;
  weights: WeightSource;
  format: LoadedModel['format'];
  rawConfig: Record<string, unknown>;
  loadVision: ((dtype: WeightDType) => Promise<LlavaVision>) | null;
}

async function openDecoder(ctx: GpuContext, ms: ModelSource, host: HostBytes): Promise<OpenedDecoder> {
  let cfg: DecoderConfig;
  let generation: GenerationDefaults;
  let tokenizer: Tokenizer;
  let weights: WeightSource;
  let format: LoadedModel['format'];
  let rawConfig: Record<string, unknown>;
  let loadVision: ((dtype: WeightDType) => Promise<LlavaVision>) | null = null;
  if (await ms.exists('model.gguf')) {
    const g = await openGgufWeights(await ms.open('model.gguf'));
    cfg = g.config;
    tokenizer = g.tokenizer;
    generation = { eosTokenIds: cfg.eosTokenIds, ...(cfg.bosTokenId !== null ? { bosTokenId: cfg.bosTokenId } : {}) };
    weights = g.weights;
    format = 'gguf';
    rawConfig = hfStyleConfig(cfg);
  } else {
    rawConfig = JSON.parse(await ms.readText('config.json')) as Record<string, unknown>;
    const llava = isLlavaConfig(rawConfig) ? await llavaParts(ms, rawConfig, await safetensorsWeights(ms)) : null;
    cfg = llava ? llava.cfg.text : parseDecoderConfig(rawConfig);
    generation = (await ms.exists('generation_config.json'))
      ? parseGenerationConfig(await ms.readText('generation_config.json'))
      : { eosTokenIds: cfg.eosTokenIds };
    tokenizer = await loadTokenizerFromSource(ms);
    weights = llava ? llava.text : await safetensorsWeights(ms, host);
    loadVision = llava ? (dtype) => llava.vision(ctx, dtype) : null;
    format = 'safetensors';
  }
  return { cfg, generation, tokenizer, weights, format, rawConfig, loadVision };
}

/**
 * The KV dtype `auto` picks: f16 (half the bytes of f32, twice the tokens in the same pool) where
 * the adapter computes in f16 anyway (`shader-f16`) and the head dim packs into vec4s; f32 where
 * the decode megakernel runs the model (it reads f32 and q8 rows; such models' caches are small)
 * or the adapter lacks shader-f16 (the CPU emulators keep the paths they were tuned and checked on).
 */
export function autoKvDtype(a: { shaderF16: boolean; headDim: number; megakernelRuns: boolean }): 'f32' | 'f16' {
  return a.shaderF16 && a.headDim % 4 === 0 && !a.megakernelRuns ? 'f16' : 'f32';
}

/** Geometry, weight dtype and the preflight memory plan of an opened decoder (nothing allocated). */
async function prepareDecoder(ctx: GpuContext, o: OpenedDecoder, opts: LoadOptions) {
  const { cfg, weights, format } = o;
  const blockSize = opts.blockSize ?? 16;
  const maxContext = Math.min(opts.maxContext ?? cfg.maxPositions, cfg.maxPositions);
  const maxSeqs = opts.maxSeqs ?? 16;
  const maxBlocksPerSeq = Math.ceil(maxContext / blockSize);
  const requestedKv = opts.kvCacheDtype ?? 'auto';
  if (requestedKv !== 'f32' && requestedKv !== 'auto' && cfg.headDim % 4 !== 0) throw new Error(`kvCacheDtype ${requestedKv} needs headDim % 4 == 0 (got ${cfg.headDim})`);
  const maxTokens = opts.maxTokensPerStep ?? 256;
  const logitRows = opts.maxLogitRows ? Math.max(opts.maxLogitRows, maxSeqs) : maxSeqs;
  // Device memory: the budget (configured, else probed on hardware adapters, else a default),
  // and the plan — checked before any allocation with the weights estimated from the headers,
  // then sized with the weights' real bytes (memory_plan.ts).
  const adapter = describeAdapter(ctx.gpu);
  const budget = await resolveBudget(ctx, opts.gpuMemoryBytes, opts.probeMemory ?? true, opts.reportedMemoryBytes);
  const planFor = (weightBytes: number): MemoryPlan =>
    planDecoderMemory({ cfg, weightBytes, kvDtype, maxTokens, logitRows, maxSeqs, maxContext, blockSize, ...(opts.kvCacheBytes !== undefined ? { kvCacheBytes: opts.kvCacheBytes } : {}) }, budget, adapter);
  // The decode plan, resolved once: kernels per op, storage, the megakernel's mode and tuning
  // (the tuning and mode do not depend on the KV dtype; the attention kernels do).
  const planWith = (kv: KvDtype): DecodePlan => resolveDecodePlan(ctx.gpu, cfg, kv, { ...opts.decode, variant: ctx.variant });
  const f32Plan = planWith('f32');
  // Weights go into ONE f32 buffer when the decode megakernel would run this model (it binds
  // them whole; the generic path reads the same buffer through tensor offsets).
  const tuning = f32Plan.megakernel.tuning;
  // (A model past llvmpipe's loop budget is still packed: its generic path reads the texture copy.)
  const eligibilityWith = (kv: KvDtype, f32Weights: boolean): ReturnType<typeof megakernelEligibility> =>
    megakernelEligibility(
      ctx,
      cfg,
      {
        mode: f32Plan.megakernel.mode,
        kvDtype: kv,
        f32Weights,
        weightBytes: packedLlamaBytes(cfg, !cfg.tieEmbeddings && weights.has('lm_head.weight')),
      },
      tuning,
    );
  // `auto` KV (autoKvDtype) asks whether the megakernel would run the model with an f32 cache.
  const megakernelRunsF32 = (() => {
    const e = eligibilityWith('f32', true);
    return e.support === null && e.budget === null;
  })();
  const kvDtype: KvDtype = requestedKv !== 'auto' ? requestedKv : autoKvDtype({ shaderF16: ctx.gpu.caps.f16, headDim: cfg.headDim, megakernelRuns: megakernelRunsF32 });
  const plan = kvDtype === 'f32' ? f32Plan : planWith(kvDtype);
  const eligibility = (f32Weights: boolean): ReturnType<typeof megakernelEligibility> => eligibilityWith(kvDtype, f32Weights);
  // `auto` over GGUF keeps the file's quantization, except where the megakernel would run the
  // model (software adapters, small models: megakernelEligibility, as LlamaModel decides it):
  // it reads f32 only, and decodes several times faster than the generic path over quantized
  // weights (docs/kernels.md, "Tuning figures"), so such weights are
  // dequantized at load: at most 64 MiB of f32 on SwiftShader, a few million parameters
  // within llvmpipe's budget. A reader asking for a dtype gets it.
  const requested = opts.dtype ?? 'auto';
  const asF32 = eligibility(true);
  const megakernelRuns = asF32.support === null && asF32.budget === null;
  const dtype: WeightDType = requested === 'auto' && format === 'gguf' && megakernelRuns ? 'f32' : requested;
  const pack = eligibility(dtype === 'f32' || (dtype === 'auto' && format === 'safetensors')).support === null;
  // Shapes against the config from the headers, before anything is allocated on the device.
  checkLlamaShapes(cfg, weights);
  // `auto` stores float checkpoints (bf16 / f16 / f32) as f16 — as compact as bf16 files — except
  // where the decode megakernel runs the model (small models on emulators: f32, packed). A reader
  // asking for `f32` gets f32.
  // f32 also where the existing CPU-emulation paths apply to the model (software adapter, f32
  // weights of at most 256 MiB: texture weights on llvmpipe read f32 only); f16 elsewhere.
  const floatAs: 'f32' | 'f16' =
    pack || dtype === 'f32' || (ctx.gpu.info.isCpu && packedLlamaBytes(cfg, !cfg.tieEmbeddings && weights.has('lm_head.weight')) <= EMULATOR_F32_BYTES) ? 'f32' : 'f16';
  const estimate = estimateWeightBytes(cfg, weights, dtype, floatAs);
  const preflight = estimate !== null ? planFor(estimate) : null;
  return { blockSize, maxContext, maxSeqs, maxBlocksPerSeq, kvDtype, maxTokens, logitRows, dtype, pack, floatAs, planFor, preflight, estimate, plan };
}

/** What `weft generate --dry-run` prints: the plan for a model on this device, without loading its weights. */
export interface DecoderPlanReport {
  cfg: DecoderConfig;
  format: LoadedModel['format'];
  /** Weight dtype under the options (`auto` resolved per tensor: see estimateWeightBytes). */
  dtype: WeightDType;
  kvDtype: KvDtype;
  maxContext: number;
  maxSeqs: number;
  /** Null when the source has no headers to estimate from. */
  plan: MemoryPlan | null;
}

/** Opens the checkpoint's headers and plans its device memory; throws ModelTooLargeError when it cannot fit. */
export async function planDecoder(ctx: GpuContext, ms: ModelSource, opts: LoadOptions = {}): Promise<DecoderPlanReport> {
  const o = await openDecoder(ctx, ms, new HostBytes());
  const p = await prepareDecoder(ctx, o, opts);
  return { cfg: o.cfg, format: o.format, dtype: p.dtype, kvDtype: p.kvDtype, maxContext: p.maxContext, maxSeqs: p.maxSeqs, plan: p.preflight };
}

/** Loads the weights and builds the model; `startedAt` (performance.now()) is when the whole load began, for progress. */
export async function loadDecoderModel(ctx: GpuContext, ms: ModelSource, opts: LoadOptions = {}, startedAt = performance.now()): Promise<LoadedModel> {
  const host = new HostBytes();
  const { cfg, generation, tokenizer, weights, format, rawConfig, loadVision } = await openDecoder(ctx, ms, host);
  const o = { cfg, generation, tokenizer, weights, format, rawConfig, loadVision };
  const { blockSize, maxSeqs, maxBlocksPerSeq, kvDtype, maxTokens, logitRows, dtype, pack, floatAs, planFor, maxContext, plan } = await prepareDecoder(ctx, o, opts);
  const t0 = Date.now();
  const progress = withProgress(weights, cfg.layers, startedAt, opts.onProgress);
  const w = await loadLlamaWeights(ctx, cfg, progress.src, dtype, { pack, autoFloat: floatAs, host, ...(opts.maxTensorBytes ? { maxTensorBytes: opts.maxTensorBytes } : {}) });
  progress.finish();
  let memoryPlan: MemoryPlan;
  try {
    memoryPlan = planFor(w.bytes);
  } catch (e) {
    destroyLlamaWeights(w);
    throw e;
  }
  const numBlocks = memoryPlan.kvBlocks;
  const geometry: StepGeometry = {
    maxTokens,
    maxSeqs,
    numBlocks,
    blockSize,
    maxBlocksPerSeq,
    ...(opts.maxLogitRows ? { maxLogitRows: logitRows } : {}),
  };
  const loadStats: LoadStats = { peakHostBytes: host.peak, deviceWeightBytes: w.bytes, loadMs: Date.now() - t0 };
  const model = new LlamaModel(ctx, cfg, w, geometry, kvDtype, { plan, ...(opts.megakernelWaves === false ? { megakernelWaves: false } : {}) });
  const vision = loadVision ? await loadVision(opts.dtype ?? 'auto') : undefined;
  const eosIds = [...new Set([...generation.eosTokenIds, ...cfg.eosTokenIds, ...tokenizer.eosIds])];
  return {
    cfg,
    generation,
    tokenizer,
    weights: w,
    model,
    geometry,
    maxContext,
    eosIds,
    format,
    rawConfig,
    loadStats,
    memoryPlan,
    decodePlan: plan,
    ...(vision ? { vision } : {}),
    destroy() {
      vision?.destroy();
      model.destroy();
      destroyLlamaWeights(w);
    },
  };
}
