/**
 * The decode plan: which kernel each op of a decoder step runs and where weights, KV cache
 * and scratch live, resolved ONCE when a model loads from the adapter's features and limits
 * (never its name, except to recognise the CPU emulators whose existing paths stay), the
 * model's config and the operator's settings. Pure and immutable: `load.ts` resolves it,
 * `LlamaModel` and the ops it calls read it, nothing re-decides per step. Settings arrive
 * as values (server config / API options); core reads no environment variables.
 */
import { WeftError } from '../errors.ts';
import type { DecoderConfig } from '../formats/hf_config.ts';
import {
  MEGAKERNEL_MODES,
  MEGAKERNEL_WEIGHT_SOURCES,
  megakernelTuning,
  type MegakernelMode,
  type MegakernelTuning,
  type MegakernelWeightSource,
} from '../ops/decode_megakernel.ts';
import { PREFILL_MAX_HEAD_DIM } from '../ops/attention_prefill.ts';
import { matmulKernelsFor, type MatmulKernels } from '../ops/kernel_select.ts';
import type { KvDtype } from '../ops/kv_write.ts';
import type { Variant } from '../ops/variant.ts';

/** What the plan reads of an adapter (a GpuContext's `gpu`, or a plain object in tests). */
export interface PlanAdapter {
  info: { name: string; device: string; isCpu: boolean };
  caps: { f16: boolean; subgroups: boolean };
  limits: Pick<GPUSupportedLimits, 'maxComputeInvocationsPerWorkgroup' | 'maxComputeWorkgroupStorageSize' | 'maxStorageBufferBindingSize' | 'maxTextureDimension2D'>;
}

/** Operator settings that shape the plan (server config / API options; all optional). */
export interface DecodeSettings {
  /** Kernel family (default: `cpu` on software adapters, `gpu` elsewhere). */
  variant?: Variant;
  /** Decode megakernel: `auto` (default), `on`, `off` (docs/kernels.md). */
  decodeMegakernel?: MegakernelMode;
  /** Where the megakernel and the cpu matmul read f32 weights: `auto` (default), `buffer`, `texture`. */
  megakernelWeights?: MegakernelWeightSource | 'auto';
  /**
   * Attention kernels: `auto` (default: flash kernels where they apply — split-K for decode
   * steps, tiled for prompt chunks), `paged` (attention.ts, one workgroup per token and head),
   * `flash` (the flash kernels, refused where they cannot run).
   */
  attention?: 'auto' | 'paged' | 'flash';
  /** Step graphs: decode steps replay a recorded dispatch list (`on`, default) or record through the ops every step (`off`). core/gpu/step_graph.ts. */
  stepGraphs?: 'on' | 'off';
}
export const ATTENTION_CHOICES = ['auto', 'paged', 'flash'] as const;
export const STEP_GRAPH_CHOICES = ['on', 'off'] as const;

export interface DecodePlan {
  readonly variant: Variant;
  /** gpu-variant matmul kernels (decode M <= 16, prefill above). */
  readonly matmul: Readonly<MatmulKernels>;
  readonly attention: {
    /** Decode-only steps: `splitk` (flash-decoding, attention_splitk.ts) or `paged` (attention.ts). */
    readonly decode: 'splitk' | 'paged';
    /** Steps with prompt chunks: `tiled` (flash attention, attention_prefill.ts) or `paged`. */
    readonly prefill: 'tiled' | 'paged';
    /** Why decode attention is `paged` (null when split-K). */
    readonly pagedBecause: string | null;
    /** Why prefill attention is `paged` (null when tiled). */
    readonly prefillPagedBecause: string | null;
  };
  /**
   * Rope and the KV store after the qkv projection of decode-sized steps: `fused` into the sgemv
   * kernel's epilogue (one dispatch fewer per layer; matmul.ts MatmulOptions.rope) or `separate`
   * (rope_kv_write.ts). Model conditions — no q/k norm, whole-head rotary, qkv in one dtype —
   * are LlamaModel's, from the loaded weights.
   */
  readonly ropeKv: {
    readonly decode: 'fused' | 'separate';
    /** Why `separate` (null when fused). */
    readonly separateBecause: string | null;
  };
  readonly kv: {
    readonly dtype: KvDtype;
    /** Where the cache lives when the megakernel runs the model: `texture` on llvmpipe, else `buffer` (per layer or packed). */
    readonly storage: 'buffer' | 'texture';
  };
  /**
   * Whether decode-only steps on split-K attention replay a step graph of their shape
   * (core/gpu/step_graph.ts) instead of recording through the ops (LlamaModel keys and checks them).
   */
  readonly stepGraphs: boolean;
  /** The megakernel's mode and its adapter tuning (weights, KV and scratch storage; model eligibility is LlamaModel's, from the loaded weights). */
  readonly megakernel: { readonly mode: MegakernelMode; readonly tuning: Readonly<MegakernelTuning> };
}

/** Why tiled prefill attention cannot run this model on this plan (null: it can). */
export function tiledProblem(variant: Variant, cfg: Pick<DecoderConfig, 'headDim'>, kvDtype: KvDtype): string | null {
  const p = splitKProblem(variant, cfg, kvDtype);
  if (p) return p;
  if (cfg.headDim > PREFILL_MAX_HEAD_DIM) return `head dim ${cfg.headDim} > ${PREFILL_MAX_HEAD_DIM}`;
  return null;
}

/** Why split-K decode attention cannot run this model on this plan (null: it can). */
export function splitKProblem(variant: Variant, cfg: Pick<DecoderConfig, 'headDim'>, kvDtype: KvDtype): string | null {
  if (variant !== 'gpu') return 'kernel variant cpu (the CPU emulators keep their register-blocked kernels)';
  if (kvDtype === 'q8') return `KV dtype ${kvDtype}`;
  if (cfg.headDim % 4 !== 0 || cfg.headDim > 256) return `head dim ${cfg.headDim} (needs a multiple of 4, at most 256)`;
  return null;
}

/** Why the qkv projection cannot take rope and the KV store as its epilogue on this plan (null: it can). */
export function ropeKvFusionProblem(variant: Variant, matmul: MatmulKernels, cfg: Pick<DecoderConfig, 'headDim'>, kvDtype: KvDtype): string | null {
  if (variant !== 'gpu') return 'kernel variant cpu (the emulators fuse rope into their texture-weight kernel instead)';
  if (matmul.decode !== 'sgemv') return `decode matmul ${matmul.decode} (the epilogue is the sgemv kernel's; needs subgroups)`;
  if (kvDtype === 'q8') return 'KV dtype q8 (a row\'s scale needs the whole head)';
  if (cfg.headDim % 8 !== 0) return `head dim ${cfg.headDim} (needs a multiple of 8)`;
  return null;
}

function check<T extends string>(name: string, v: T | undefined, allowed: readonly string[]): void {
  if (v !== undefined && !allowed.includes(v)) throw new WeftError('invalid_config', `${name} must be one of ${allowed.join(', ')} (got "${v}")`);
}

/** Resolves the plan (pure; the result is frozen). Throws invalid_config for an unknown setting. */
export function resolveDecodePlan(adapter: PlanAdapter, cfg: Pick<DecoderConfig, 'headDim'>, kvDtype: KvDtype, settings: DecodeSettings = {}): DecodePlan {
  check('decodeMegakernel', settings.decodeMegakernel, MEGAKERNEL_MODES);
  check('megakernelWeights', settings.megakernelWeights, MEGAKERNEL_WEIGHT_SOURCES);
  check('attention', settings.attention, ATTENTION_CHOICES);
  check('variant', settings.variant, ['cpu', 'gpu']);
  check('stepGraphs', settings.stepGraphs, STEP_GRAPH_CHOICES);
  const variant: Variant = settings.variant ?? (adapter.info.isCpu ? 'cpu' : 'gpu');
  const l = adapter.limits;
  const matmul = matmulKernelsFor({
    subgroups: adapter.caps.subgroups,
    f16: adapter.caps.f16,
    maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup,
    maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
  });
  const choice = settings.attention ?? 'auto';
  const problem = splitKProblem(variant, cfg, kvDtype);
  const tiled = tiledProblem(variant, cfg, kvDtype);
  if (choice === 'flash' && (problem || tiled)) throw new WeftError('invalid_config', `attention flash cannot run this model: ${problem ?? tiled}`);
  const pagedBecause = choice === 'paged' ? 'attention: paged (configured)' : problem;
  const prefillPagedBecause = choice === 'paged' ? 'attention: paged (configured)' : tiled;
  const tuning = megakernelTuning(adapter.info, settings.megakernelWeights ?? 'auto');
  const ropeKv = ropeKvFusionProblem(variant, matmul, cfg, kvDtype);
  return Object.freeze({
    variant,
    matmul: Object.freeze(matmul),
    attention: Object.freeze({ decode: pagedBecause ? 'paged' : 'splitk', prefill: prefillPagedBecause ? 'paged' : 'tiled', pagedBecause, prefillPagedBecause }),
    ropeKv: Object.freeze({ decode: ropeKv ? 'separate' : 'fused', separateBecause: ropeKv }),
    kv: Object.freeze({ dtype: kvDtype, storage: tuning.kv }),
    stepGraphs: settings.stepGraphs !== 'off',
    megakernel: Object.freeze({ mode: settings.decodeMegakernel ?? 'auto', tuning: Object.freeze(tuning) }),
  } as const);
}
