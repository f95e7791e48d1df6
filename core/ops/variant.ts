/**
 * Kernel variant choice per adapter.
 *
 * `cpu`: register-blocked, barrier-free kernels with no workgroup memory —
 *   several times faster on CPU emulation (SwiftShader, llvmpipe).
 * `gpu`: workgroup-tiled kernels with shared-memory reductions, for real GPUs.
 *
 * The choice can be set per context (GpuOptions.variant: the server's WEFT_KERNEL_VARIANT,
 * server/gpu_settings.ts); tests run both where possible. Core reads no environment.
 */
import type { GpuContext } from '../gpu/context.ts';

export type Variant = 'cpu' | 'gpu';
export const VARIANTS: readonly Variant[] = ['cpu', 'gpu'];

export function defaultVariant(ctx: Pick<GpuContext, 'gpu'>): Variant {
  return ctx.gpu.info.isCpu ? 'cpu' : 'gpu';
}
