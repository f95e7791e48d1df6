/**
 * `GET /memory_plan` (management app): the device memory plan of a model on this server's
 * GPU without loading it — weights, activations, reserve, KV pool and the tokens of context
 * it holds (core/models/memory_plan.ts via planDecoder, from the checkpoint's headers only).
 * A model that cannot fit answers 507 `model_too_large` with every number in `details`.
 *
 * The budget is the request's `gpu_memory`, else WEFT_GPU_MEMORY, else the adapter's
 * default; the route never probes by allocation (readers may be running on the same device).
 * A GPU device is opened for the request and released after it.
 */
import { InvalidRequestError } from '../../core/errors.ts';
import { GpuContext } from '../../core/gpu/context.ts';
import { planDecoder, type LoadOptions } from '../../core/models/load.ts';
import { vendorMemory } from '../vendor_memory.ts';
import type { WeightDType } from '../../core/models/host_tensor.ts';
import type { KvDtype } from '../../core/ops/kv_write.ts';
import { openModelPath } from '../fs_source.ts';

export interface PlanQuery {
  model?: string;
  max_context?: string;
  max_seqs?: string;
  dtype?: string;
  kv_cache_dtype?: string;
  gpu_memory?: string;
}

const DTYPES: readonly WeightDType[] = ['auto', 'f32', 'f16', 'q8_0', 'q4_0'];
const KV_DTYPES: readonly (KvDtype | 'auto')[] = ['auto', 'f32', 'f16', 'q8'];

function positiveInt(v: string | undefined, field: string): number | undefined {
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidRequestError('invalid_request', `${field} must be a positive integer, got ${JSON.stringify(v)}`, { field });
  return n;
}

function oneOf<T extends string>(v: string | undefined, field: string, allowed: readonly T[]): T | undefined {
  if (v === undefined || v === '') return undefined;
  if (!(allowed as readonly string[]).includes(v)) throw new InvalidRequestError('invalid_request', `${field} must be one of ${allowed.join(', ')}, got ${JSON.stringify(v)}`, { field });
  return v as T;
}

/** Options of the plan from the query (validated before any device is opened). */
export function planOptions(q: PlanQuery, env: { WEFT_GPU_MEMORY?: string | undefined } = {}): { model: string; opts: LoadOptions } {
  if (!q.model) throw new InvalidRequestError('invalid_request', 'model is required: a model directory or .gguf file on the server', { field: 'model' });
  const maxContext = positiveInt(q.max_context, 'max_context');
  const maxSeqs = positiveInt(q.max_seqs, 'max_seqs') ?? 16;
  const gpuMemory = positiveInt(q.gpu_memory, 'gpu_memory') ?? positiveInt(env.WEFT_GPU_MEMORY, 'WEFT_GPU_MEMORY');
  const dtype = oneOf(q.dtype, 'dtype', DTYPES);
  const kv = oneOf(q.kv_cache_dtype, 'kv_cache_dtype', KV_DTYPES);
  return {
    model: q.model,
    opts: {
      maxSeqs,
      probeMemory: false,
      ...(maxContext ? { maxContext } : {}),
      ...(gpuMemory ? { gpuMemoryBytes: gpuMemory } : {}),
      ...(dtype ? { dtype } : {}),
      ...(kv ? { kvCacheDtype: kv } : {}),
    },
  };
}

/** The plan as the route answers it (snake_case, bytes). */
export async function planModel(q: PlanQuery, backend: string | undefined, env: { WEFT_GPU_MEMORY?: string | undefined } = {}): Promise<Record<string, unknown>> {
  const { model, opts } = planOptions(q, env);
  const ms = await openModelPath(model);
  const ctx = await GpuContext.create(backend && backend !== 'auto' ? { backend } : {});
  try {
    const reported = await vendorMemory(ctx.gpu.info);
    const r = await planDecoder(ctx, ms, { ...opts, ...(reported ? { reportedMemoryBytes: reported } : {}) });
    const p = r.plan;
    return {
      model,
      device: ctx.gpu.info.name,
      backend: ctx.gpu.info.backend,
      architecture: r.cfg.architecture,
      format: r.format,
      dtype: r.dtype,
      kv_dtype: r.kvDtype,
      max_context: r.maxContext,
      max_seqs: r.maxSeqs,
      plan: p && {
        budget_bytes: p.budget.bytes,
        budget_source: p.budget.source,
        weight_bytes: p.weightBytes,
        activation_bytes: p.activationBytes,
        reserve_bytes: p.reserveBytes,
        kv_pool_bytes: p.kvPoolBytes,
        kv_blocks: p.kvBlocks,
        kv_tokens: p.kvTokens,
        kv_bytes_per_token: p.kvBytesPerToken,
        full_context_seqs: p.fullContextSeqs,
        total_bytes: p.totalBytes,
      },
    };
  } finally {
    ctx.destroy();
  }
}
