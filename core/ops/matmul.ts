/**
 * Linear layer: y[M, N] = x[M, K] · W[N, K]ᵀ (+ bias[N]), optionally accumulated into y
 * (y += ...) so a residual add fuses into the output projection.
 * Shapes: x [..., K] f32 (M = product of leading dims), W [N, K] f32|f16|q8_0|q4_0
 * (layouts in core/gpu/tensor.ts), bias [N] f32, y [..., N] f32. y must not alias x or W.
 * Kernel: shaders/matmul.wgsl (cpu: register-blocked; gpu: gemv reduction for M <= 8,
 * shared-memory tiles above). Reference: matmul.ref.ts.
 */
import type { GpuContext } from '../gpu/context.ts';
import type { PipelineKey } from '../gpu/pipelines.ts';
import type { Recorder } from '../gpu/recorder.ts';
import { numel, QK, type Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { ceilDiv, grid1d } from './grid.ts';
import type { Variant } from './variant.ts';

export interface LinearWeight {
  /** [N, K] dtype f32 | f16 | q8_0 | q4_0. */
  w: Tensor;
  /** [N] f32. */
  bias?: Tensor;
}

export interface MatmulOptions {
  variant?: Variant;
  /** y += x·Wᵀ (+bias) instead of y = ... : lets the residual add fuse into the output projection */
  accumulate?: boolean;
}

const layout = uniformLayout([
  ['M', 'u32'], // rows of x and y, in elements
  ['N', 'u32'], // rows of W = columns of y, in elements
  ['K', 'u32'], // columns of x and W (unpadded), in elements
  ['flags', 'u32'], // bit 0: add bias; bit 1: accumulate into y
] as const);

/** Workgroup size of the cpu variant (invocations, each MR rows × 8 columns); 16 measured best. */
const CPU_WG = 16;
/** Workgroup size of the gpu gemv variant (threads splitting K for 4 columns). */
const GEMV_WG = 64;
/** Largest M handled by the gpu gemv kernel (one pass over W); above it, tiles. */
const GEMV_MAX_M = 8;

/** A zero f32 buffer bound as `bias` when there is none (auto layouts need every binding). */
const dummies = new WeakMap<GpuContext, Tensor>();
function dummyBias(ctx: GpuContext): Tensor {
  let t = dummies.get(ctx);
  if (!t) dummies.set(ctx, (t = ctx.tensor(new Float32Array(4), [4], 'f32')));
  return t;
}

/** Rows per invocation for the cpu kernel (1..4): fewest passes over W, then least padding. */
function cpuRows(M: number): number {
  return Math.ceil(M / Math.ceil(M / 4));
}

/** Weight format as the shader sees it: f16n = native f16 loads (device has shader-f16). */
export type MatmulWdt = 'f32' | 'f16' | 'f16n' | 'q8_0' | 'q4_0';

/** Pipeline key and workgroup count for one call (pure; exported for tests and tools). */
export function matmulPlan(wdt: MatmulWdt, M: number, N: number, K: number, variant: Variant): { key: PipelineKey; groups: number } {
  const quant = wdt === 'q8_0' || wdt === 'q4_0';
  let kind: 'cpu' | 'gemv' | 'tile';
  let MR: number;
  let WG: number;
  let groups: number;
  if (variant === 'cpu') {
    kind = 'cpu';
    MR = cpuRows(M);
    WG = CPU_WG;
    groups = ceilDiv(ceilDiv(N, 8) * ceilDiv(M, MR), WG); // MR rows × 8 columns per invocation
  } else if (M <= GEMV_MAX_M) {
    kind = 'gemv';
    MR = M <= 1 ? 1 : M <= 2 ? 2 : M <= 4 ? 4 : 8;
    WG = GEMV_WG;
    groups = ceilDiv(N, 4);
  } else {
    kind = 'tile';
    MR = 4;
    WG = 64;
    groups = ceilDiv(M, 32) * ceilDiv(N, 32);
  }
  const defines = { WDT: wdt, VEC: K % 4 === 0, KIND: kind, MR, WG, QBLK: kind === 'cpu' && quant };
  return { key: { shader: 'matmul', defines, layout }, groups };
}

/** y[M, N] = x[M, K] · W[N, K]ᵀ (+ bias). x, y f32. */
export async function matmul(rec: Recorder, x: Tensor, weight: LinearWeight, y: Tensor, opts: MatmulOptions = {}): Promise<void> {
  const { w, bias } = weight;
  if (w.shape.length !== 2) throw new Error(`matmul: weight must be [N, K], got [${w.shape.join(', ')}]`);
  const [N, K] = w.shape as [number, number];
  const xk = x.shape[x.shape.length - 1];
  if (xk !== K) throw new Error(`matmul: x [${x.shape.join(', ')}] does not match weight [${N}, ${K}]`);
  if (x.dtype !== 'f32' || y.dtype !== 'f32') throw new Error('matmul: x and y must be f32');
  const M = numel(x.shape) / K;
  if (numel(y.shape) !== M * N || y.shape[y.shape.length - 1] !== N) {
    throw new Error(`matmul: y [${y.shape.join(', ')}] is not [${M}, ${N}]`);
  }
  if (bias && (bias.dtype !== 'f32' || numel(bias.shape) !== N)) throw new Error(`matmul: bias must be [${N}] f32`);
  const quant = w.dtype === 'q8_0' || w.dtype === 'q4_0';
  if (quant) {
    if (K % QK !== 0) throw new Error(`matmul: ${w.dtype} weights need K % ${QK} == 0, got K = ${K}`);
    if (!w.scales) throw new Error(`matmul: ${w.dtype} weight has no scales buffer`);
  } else if (w.dtype !== 'f32' && w.dtype !== 'f16') {
    throw new Error(`matmul: unsupported weight dtype ${w.dtype}`);
  }
  if (M === 0 || N === 0) return;

  const ctx = rec.ctx;
  const wdt: MatmulWdt = w.dtype === 'f16' && ctx.gpu.caps.f16 ? 'f16n' : w.dtype;
  const { key, groups } = matmulPlan(wdt, M, N, K, opts.variant ?? ctx.variant);
  const kernel = await ctx.pipelines.get(key);
  const flags = (bias ? 1 : 0) | (opts.accumulate ? 2 : 0);
  const scales = quant ? [{ buffer: w.scales!, offset: 0, size: (N * K * 4) / QK }] : [];
  rec.dispatch(kernel, { M, N, K, flags }, [x, w, ...scales, bias ?? dummyBias(ctx), y], grid1d(groups));
}
