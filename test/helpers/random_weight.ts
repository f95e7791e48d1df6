/**
 * A random matmul weight [N, K] in any format the models load (f32, f16, Q8_0, Q4_0, the
 * K-quants) on the device, with its dequantized f32 values for the CPU references.
 */
import type { GpuContext } from '../../core/gpu/context.ts';
import type { DType, Tensor } from '../../core/gpu/tensor.ts';
import { dequantize, encodeWeight, uploadEncoded } from '../../core/ops/quant.ts';
import { dequantizeKQuant, isKQuant, randomKQuantBlocks, repackKQuant } from '../../core/ops/quant_k.ts';
import { randn } from './gpu.ts';

export function randomWeight(ctx: GpuContext, dtype: DType, N: number, K: number, seed: number): { tw: Tensor; wd: Float32Array } {
  if (isKQuant(dtype)) {
    const dev = repackKQuant(dtype, randomKQuantBlocks(dtype, N, K, seed), N, K);
    return { tw: ctx.tensor(dev, [N, K], dtype), wd: dequantizeKQuant(dtype, dev, N, K) };
  }
  const enc = encodeWeight(randn(N * K, seed, 0.5), N, K, dtype);
  return { tw: uploadEncoded(ctx, enc, N, K, dtype), wd: dequantize(dtype, enc, N, K) };
}
