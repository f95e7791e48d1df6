/**
 * Kernel variant choice per adapter.
 *
 * `cpu`: register-blocked, barrier-free kernels with no workgroup memory —
 *   several times faster on CPU emulation (SwiftShader, llvmpipe).
 * `gpu`: workgroup-tiled kernels with shared-memory reductions, for real GPUs.
 *
 * WEFT_KERNEL_VARIANT overrides the choice (tests run both where possible).
 */
import type { GpuContext } from '../gpu/context.ts';

export type Variant = 'cpu' | 'gpu';
export const VARIANTS: readonly Variant[] = ['cpu', 'gpu'];

export function defaultVariant(ctx: Pick<GpuContext, 'gpu'>): Variant {
  const forced = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.WEFT_KERNEL_VARIANT;
  if (forced === 'cpu' || forced === 'gpu') return forced;
  return ctx.gpu.info.isCpu ? 'cpu' : 'gpu';
}
