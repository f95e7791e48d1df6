/**
 * Which gpu-variant kernel an op runs, from the adapter's features and limits (never its
 * name). Pure: the decode plan (core/models/decode_plan.ts) resolves these once at load, and
 * ops called without a plan (tests, encoders) derive the same choice from their context.
 */
import type { GpuContext } from '../gpu/context.ts';

/** What kernel selection reads of an adapter: features and limits (GpuContext.gpu, or a plain object in tests). */
export interface KernelCaps {
  /** `subgroups` feature: subgroupAdd and friends in WGSL. */
  subgroups: boolean;
  /** `shader-f16` feature: native f16 loads and arithmetic. */
  f16: boolean;
  maxComputeInvocationsPerWorkgroup: number;
  maxComputeWorkgroupStorageSize: number;
}

/** Decode (M <= MATMUL_DECODE_MAX_M) and prefill matmul kernels of the gpu variant. */
export interface MatmulKernels {
  /** `sgemv`: subgroup reduction, no workgroup memory; `gemv`: workgroup-memory reduction. */
  decode: 'sgemv' | 'gemv';
  /** `tile64`: 64x64 tiles, 256 invocations, 10 KiB workgroup memory; `tile`: 32x32, 64 invocations, 3 KiB. */
  prefill: 'tile64' | 'tile';
}

/** Invocations and workgroup bytes the tile64 kernel needs (shaders/_matmul_tile64.wgsl). */
export const TILE64_INVOCATIONS = 256;
export const TILE64_WORKGROUP_BYTES = 2 * 320 * 16;

export function matmulKernelsFor(c: KernelCaps): MatmulKernels {
  return {
    decode: c.subgroups ? 'sgemv' : 'gemv',
    prefill: c.maxComputeInvocationsPerWorkgroup >= TILE64_INVOCATIONS && c.maxComputeWorkgroupStorageSize >= TILE64_WORKGROUP_BYTES ? 'tile64' : 'tile',
  };
}

/** The KernelCaps of a live context. */
export function kernelCaps(ctx: Pick<GpuContext, 'gpu'>): KernelCaps {
  const l = ctx.gpu.limits;
  return {
    subgroups: ctx.gpu.caps.subgroups,
    f16: ctx.gpu.caps.f16,
    maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup,
    maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
  };
}

const cached = new WeakMap<object, MatmulKernels>();
/** matmulKernelsFor the context's adapter, computed once per context. */
export function contextMatmulKernels(ctx: Pick<GpuContext, 'gpu'>): MatmulKernels {
  let k = cached.get(ctx.gpu);
  if (!k) cached.set(ctx.gpu, (k = matmulKernelsFor(kernelCaps(ctx))));
  return k;
}
