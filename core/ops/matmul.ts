/**
 * Linear layer: y[M, N] = x[M, K] · W[N, K]ᵀ (+ bias[N]), optionally accumulated into y
 * (y += ...) so a residual add fuses into the output projection.
 * Shapes: x [..., K] f32 (M = product of leading dims), W [N, K] f32|f16|q8_0|q4_0|q4_k|q5_k|q6_k
 * (K-quants: the file's 256-element super-blocks, K % 256 == 0, decoded in registers; quant_k.ts)
 * (layouts in core/gpu/tensor.ts), bias [N] f32, y [..., N] f32. y must not alias x or W.
 * Kernel: shaders/matmul.wgsl (cpu: register-blocked; gpu: for M <= 16 a matrix-vector kernel
 * reducing over subgroups (sgemv) or workgroup memory (gemv), above it 64x64 or 32x32
 * shared-memory tiles; MatmulOptions.kernels, else kernel_select.ts from the adapter). Reference: matmul.ref.ts. The cpu kernel can read f32 W from a
 * weight texture instead (MatmulOptions.wTexture; llvmpipe's storage loads are slow).
 */
import type { GpuContext } from '../gpu/context.ts';
import type { Kernel, PipelineKey } from '../gpu/pipelines.ts';
import type { Binding, Recorder, TextureBinding } from '../gpu/recorder.ts';
import { numel, QK, scaleBytes, type Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { WEIGHT_TEXTURE_WIDTH } from './decode_megakernel.ts';
import { isKvTexture, type KvStore } from './kv_write.ts';
import { ceilDiv, grid1d } from './grid.ts';
import type { Variant } from './variant.ts';
import { isKQuant, QK_K, type KQuantDType } from './quant_k.ts';
import { contextMatmulKernels, type MatmulKernels } from './kernel_select.ts';

export interface LinearWeight {
  /** [N, K] dtype f32 | f16 | q8_0 | q4_0 | a K-quant. With `parts`: the first part's. */
  w: Tensor;
  /** [N] f32. With `parts`: the first part's. */
  bias?: Tensor;
  /**
   * A fused matrix whose row blocks keep different dtypes (a GGUF with attn_v in Q6_K beside
   * Q4_K attn_q / attn_k): each part runs from its own blocks into its columns of y.
   */
  parts?: readonly LinearPart[];
}

/** One row block of a LinearWeight in parts: W rows [col, col + rows) of the fused matrix. */
export interface LinearPart {
  w: Tensor;
  bias?: Tensor;
  /** First column of y (first row of the fused matrix) this part writes. */
  col: number;
}

export interface MatmulOptions {
  variant?: Variant;
  /**
   * Write y's columns [offset, offset + N) of a wider y [M, stride] (a part of a fused output).
   * Buffer weights only (no textures, no gated output).
   */
  yColumns?: { stride: number; offset: number };
  /** gpu variant: the decode and prefill kernels (the decode plan's choice; default: from the adapter, kernel_select.ts). */
  kernels?: MatmulKernels;
  /** y += x·Wᵀ (+bias) instead of y = ... : lets the residual add fuse into the output projection */
  accumulate?: boolean;
  /**
   * Read W from this texture instead of `weight.w.buffer` (cpu variant, f32 W, K % 4 == 0; other
   * cases ignore it and read the buffer). `binding`: a weightTexture() copy of the buffer that
   * holds W (decode_megakernel.ts, WEIGHT_TEXTURE_WIDTH texels per row); `offset4`: vec4 index
   * of W[0, 0] in it (W's byte offset in that buffer / 16). On llvmpipe a texel load costs ~1/10
   * of a vec4 storage load. Results are bit-identical to the buffer source.
   */
  wTexture?: { binding: TextureBinding; offset4: number };
  /**
   * With wTexture in use and M >= XTEX_MIN_ROWS: an rgba32float scratch texture
   * (WEIGHT_TEXTURE_WIDTH wide, COPY_DST | STORAGE_BINDING, >= M * K / 4 texels) that x is copied
   * into before the dispatch, so its reloads by every column group are texel loads. Bit-identical.
   */
  xTexture?: TextureBinding;
  /**
   * Fuse the input RMSNorm (texture weights only, see fusionApplies): x is the residual stream
   * [M, K] and the kernel computes (x * rsqrt(mean(x²) + eps) * wn) · Wᵀ, bit-identical to
   * rmsNorm into a buffer and then matmul. `offset4`: vec4 index of wn [K] in wTexture.
   */
  norm?: { offset4: number; eps: number };
  /**
   * SiLU-gated output (texture weights only): W is [2N, K] (gate rows, then up rows) and y is
   * [M, N] = silu(x · Wgᵀ) * (x · Wuᵀ), bit-identical to matmul into gu and then the gated
   * activation. No bias, no accumulation.
   */
  gated?: boolean;
  /**
   * The input RMSNorm as the prologue of the gpu decode kernel (sgemv: gpu variant, M <= 16,
   * K % 4 == 0; see gpuFusionApplies): x is the residual stream [M, K] and y = (x * rsqrt(mean(x²)
   * + eps) * weight) · Wᵀ, as rmsNorm into a buffer then matmul (within f32 rounding). Combines
   * with `gated`.
   */
  prenorm?: { weight: Tensor; eps: number };
  /**
   * rope_kv_write as the epilogue: W is the fused qkv projection and y the qkv rows
   * [M, (nH + 2 nKv) hd]; q and k heads are rotated and k and v heads stored into the cache at
   * `slots`. Half-split pairs over the whole head, no q/k norm, hd % 8 == 0. Two kernels take it:
   * - texture weights (cpu variant): f32 KV in textures, k and v columns of y not written
   *   (ropeFusionProblem); bit-identical to matmul then ropeKvWrite for what attention reads;
   * - sgemv (gpu variant, M <= 16; gpuFusionApplies): f32 or f16 KV in buffers, y holds what
   *   ropeKvWrite leaves in qkv (sgemvRopeProblem); combines with `prenorm`.
   */
  rope?: MatmulRope;
}

export interface MatmulRope {
  /** [M] u32 absolute positions. */
  positions: Tensor;
  /** [M] u32 cache slots (NO_SLOT: not stored). */
  slots: Tensor;
  /** [hd / 2] f32 radians per position (rope.ts invFreqTensor). */
  invFreq: Tensor;
  /** The layer's K and V caches: KV texture regions (texture weights) or buffer tensors (sgemv). */
  cacheK: KvStore;
  cacheV: KvStore;
  /** Buffer caches: f32 rows or packed halves (default f32; kv_write.ts layouts). */
  kvDtype?: 'f32' | 'f16';
  headDim: number;
  qHeads: number;
  kvHeads: number;
}

/** Fewest rows for which copying x into a texture pays for the copy (prefill; decode rows stay in the buffer). */
export const XTEX_MIN_ROWS = 32;

const layout = uniformLayout([
  ['M', 'u32'], // rows of x and y, in elements
  ['N', 'u32'], // rows of W = columns of y, in elements
  ['K', 'u32'], // columns of x and W (unpadded), in elements
  ['flags', 'u32'], // bit 0: add bias; bit 1: accumulate into y
  ['ldy', 'u32'], // row stride of y in elements (N, or wider: MatmulOptions.yColumns)
  ['y0', 'u32'], // column of y where this output starts
] as const);
/** The WTEX variant's layout: `layout` plus W's position in the weight texture and the fusions' parameters. */
const texLayout = uniformLayout([
  ['M', 'u32'],
  ['N', 'u32'], // GATED: output columns (W has 2N rows)
  ['K', 'u32'],
  ['flags', 'u32'],
  ['w4', 'u32'], // vec4 index of W[0, 0] in the weight texture
  ['eps', 'f32'], // NORM: RMSNorm epsilon
  ['wn4', 'u32'], // NORM: vec4 index of the norm weight in the weight texture
  ['hd', 'u32'], // ROPE: head dim, in elements
  ['nH', 'u32'], // ROPE: q heads
  ['nKv', 'u32'], // ROPE: kv heads
  ['kvBase4', 'u32'], // ROPE: vec4 index of the layer's region in the KV textures
  ['ldy', 'u32'], // as in `layout` (N here: the texture path writes whole rows)
  ['y0', 'u32'],
] as const);

/** The sgemv kernel's layout with fusions: `layout` plus the prenorm epsilon. */
const gpuFuseLayout = uniformLayout([
  ['M', 'u32'],
  ['N', 'u32'], // GATED: output columns (W has 2N rows)
  ['K', 'u32'],
  ['flags', 'u32'],
  ['eps', 'f32'], // PRENORM: RMSNorm epsilon
  ['ldy', 'u32'], // as in `layout`
  ['y0', 'u32'],
] as const);
/** The sgemv kernel's layout with the rope + KV store epilogue: `gpuFuseLayout` plus the head shape. */
const sgemvRopeLayout = uniformLayout([
  ...gpuFuseLayout.fields,
  ['hd', 'u32'], // head dim, in elements
  ['nH', 'u32'], // q heads
  ['nKv', 'u32'], // kv heads
] as const);

/** Workgroup size of the cpu variant (invocations, each MR rows × 8 NO columns); 16 measured best. */
const CPU_WG = 16;
/**
 * Column octets per invocation of the cpu kernel with texture weights: 8 NO columns share each x
 * chunk (MR vec4 storage loads, ~43 ns each on llvmpipe) while W costs 8 NO texel loads (~7 ns sampled, ~4 ns from the read-only storage binding used now).
 * 8 octets gain little on large grids, lose on small ones and compile several times slower on
 * llvmpipe, so 4 it is (the per-shape table: docs/kernels.md, "Tuning figures").
 */
export const TEX_OCTETS = 4;
/** Workgroup size of the gpu gemv variant (threads splitting K for 4 columns). */
const GEMV_WG = 64;
/** Largest M handled by the gpu matrix-vector kernels (one pass over W); above it, tiles. */
export const MATMUL_DECODE_MAX_M = 16;
/** Workgroup size of the sgemv kernel (a multiple of every subgroup size up to 128). */
const SGEMV_WG = 128;
/** Quads of W rows (4 columns) per sgemv workgroup: 2 per subgroup of 32. */
const SGEMV_QPW = 8;
/** The gpu kernels when none are given and no adapter is at hand (pure callers of matmulPlan). */
const BASELINE_KERNELS: MatmulKernels = { decode: 'gemv', prefill: 'tile' };

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
export type MatmulWdt = 'f32' | 'f16' | 'f16n' | 'q8_0' | 'q4_0' | KQuantDType;

/** Fusions of the texture-weight kernel (MatmulOptions.norm / gated / rope) and of sgemv (prenorm / gated). */
export interface MatmulFusion {
  norm?: boolean;
  /** sgemv: MatmulOptions.prenorm. */
  prenorm?: boolean;
  gated?: boolean;
  /** With rope: the number of rotation-pair quads, (nH + 2 nKv) · hd / 8. */
  ropePairs?: number;
  /** sgemv: the rope + KV store epilogue (MatmulOptions.rope), caches of this dtype. */
  ropeKv?: 'f32' | 'f16';
}

/** Pipeline key and workgroup count for one call (pure; exported for tests and tools). N: output columns. */
export function matmulPlan(
  wdt: MatmulWdt,
  M: number,
  N: number,
  K: number,
  variant: Variant,
  tex = false,
  xtex = false,
  fuse: MatmulFusion = {},
  kernels: MatmulKernels = BASELINE_KERNELS,
): { key: PipelineKey; groups: number } {
  const quant = wdt === 'q8_0' || wdt === 'q4_0';
  if (tex && !texWeightsApply(wdt, K, variant)) throw new Error('matmulPlan: texture weights need the cpu variant, f32 W and K % 4 == 0');
  const gpuFused = !tex && (!!fuse.prenorm || !!fuse.gated || !!fuse.ropeKv);
  if (gpuFused && !gpuFusionApplies(M, K, variant, kernels)) throw new Error('matmulPlan: the fused prenorm, gated output and rope need the sgemv kernel (gpu variant, M <= 16, K % 4 == 0)');
  if (fuse.ropeKv && (fuse.gated || N % 8 !== 0)) throw new Error('matmulPlan: the rope epilogue takes no gated output and needs N % 8 == 0');
  if ((fuse.norm || fuse.ropePairs) && !tex) throw new Error('matmulPlan: the fused norm and rope need texture weights');
  let kind: 'cpu' | 'gemv' | 'sgemv' | 'tile' | 'tile64';
  let MR: number;
  let WG: number;
  let NO = 1; // column octets per invocation (cpu)
  let groups: number;
  if (variant === 'cpu') {
    kind = 'cpu';
    MR = cpuRows(M);
    WG = CPU_WG;
    NO = tex ? TEX_OCTETS : 1;
    // MR rows × 8 NO columns per invocation (gated: 4 NO output columns, as many gate and up columns).
    // (rope: 4 rotation-pair quads, i.e. 32 qkv columns, per invocation.)
    const colGroups = fuse.ropePairs ? ceilDiv(fuse.ropePairs, 4) : ceilDiv(N, (fuse.gated ? 4 : 8) * NO);
    groups = ceilDiv(colGroups * ceilDiv(M, MR), WG);
  } else if (M <= MATMUL_DECODE_MAX_M) {
    kind = kernels.decode;
    MR = M <= 1 ? 1 : M <= 2 ? 2 : M <= 4 ? 4 : M <= 8 ? 8 : 16;
    WG = kind === 'sgemv' ? SGEMV_WG : GEMV_WG;
    // sgemv: QPW quads of 4 columns per workgroup (with the rope epilogue, pair quads of 8).
    groups = kind === 'sgemv' ? ceilDiv(N, (fuse.ropeKv && !tex ? 8 : 4) * SGEMV_QPW) : ceilDiv(N, 4);
  } else if (kernels.prefill === 'tile64') {
    kind = 'tile64';
    MR = 4;
    WG = 256;
    groups = ceilDiv(M, 64) * ceilDiv(N, 64);
  } else {
    kind = 'tile';
    MR = 4;
    WG = 64;
    groups = ceilDiv(M, 32) * ceilDiv(N, 32);
  }
  const defines = {
    WDT: wdt,
    VEC: K % 4 === 0,
    KIND: kind,
    MR,
    WG,
    QBLK: kind === 'cpu' && quant,
    NO,
    ...(kind === 'sgemv' ? { QPW: SGEMV_QPW } : {}),
    ...(isKQuant(wdt) ? { KQ: wdt } : {}),
  };
  if (gpuFused) {
    // The norm weight binds after y, the rope inputs and caches after it (bindings: x, W,
    // [scales], bias, y, [wn], [positions, slots, invFreq, cacheK, cacheV]).
    const pnBind = quant ? 6 : 5;
    const fusedDefines = { ...defines, PRENORM: !!fuse.prenorm, GATED: !!fuse.gated, PN_BIND: pnBind };
    if (!fuse.ropeKv) return { key: { shader: 'matmul', defines: fusedDefines, layout: gpuFuseLayout }, groups };
    const rb = pnBind + (fuse.prenorm ? 1 : 0);
    const ropeDefines = { ...fusedDefines, SROPE: true, KVF16: fuse.ropeKv === 'f16', RB_POS: rb, RB_SLOT: rb + 1, RB_FREQ: rb + 2, RB_K: rb + 3, RB_V: rb + 4 };
    return { key: { shader: 'matmul', defines: ropeDefines, layout: sgemvRopeLayout }, groups };
  }
  if (!tex) return { key: { shader: 'matmul', defines, layout }, groups };
  const texDefines = { ...defines, WTEX: true, XTEX: xtex, NORM: !!fuse.norm, GATED: !!fuse.gated, ROPE: !!fuse.ropePairs, TW: WEIGHT_TEXTURE_WIDTH, TW_LOG2: Math.log2(WEIGHT_TEXTURE_WIDTH) };
  return { key: { shader: 'matmul', defines: texDefines, layout: texLayout }, groups };
}

/** Whether MatmulOptions.prenorm / gated can run on the gpu decode kernel for this call (sgemv, M <= 16, K % 4 == 0). */
export function gpuFusionApplies(M: number, K: number, variant: Variant, kernels: MatmulKernels): boolean {
  return variant === 'gpu' && kernels.decode === 'sgemv' && M <= MATMUL_DECODE_MAX_M && K % 4 === 0;
}

/** Whether MatmulOptions.wTexture is used for this call (else W is read from its buffer). */
export function texWeightsApply(wdt: MatmulWdt, K: number, variant: Variant): boolean {
  return variant === 'cpu' && wdt === 'f32' && K % 4 === 0;
}

/** Why MatmulOptions.rope cannot apply to a qkv projection with N columns over K (null: it can). */
export function ropeFusionProblem(r: Pick<MatmulRope, 'headDim' | 'qHeads' | 'kvHeads' | 'cacheK' | 'cacheV'>, N: number, K: number): string | null {
  if (r.headDim % 8 !== 0) return `head dim ${r.headDim} is not a multiple of 8`;
  if ((r.qHeads + 2 * r.kvHeads) * r.headDim !== N) return `${N} columns are not ${r.qHeads} q + 2 x ${r.kvHeads} kv heads of ${r.headDim}`;
  if (!isKvTexture(r.cacheK) || !isKvTexture(r.cacheV)) return 'the KV cache is not in textures';
  if (r.cacheK.base4 !== r.cacheV.base4) return 'the K and V regions start at different texels';
  if (r.cacheK.texture.format !== 'r32float' || r.cacheV.texture.format !== 'r32float') return 'the KV textures do not hold f32 rows';
  if (K % 4 !== 0) return `K = ${K} is not a multiple of 4`;
  return null;
}

/**
 * Why the sgemv kernel's rope + KV store epilogue cannot serve a qkv projection with N columns
 * over K (null: it can): whole heads of q, k and v, pairs in quads, caches in buffers.
 */
export function sgemvRopeProblem(r: Pick<MatmulRope, 'headDim' | 'qHeads' | 'kvHeads' | 'cacheK' | 'cacheV' | 'kvDtype'>, N: number, K: number): string | null {
  if (r.headDim % 8 !== 0) return `head dim ${r.headDim} is not a multiple of 8`;
  if ((r.qHeads + 2 * r.kvHeads) * r.headDim !== N) return `${N} columns are not ${r.qHeads} q + 2 x ${r.kvHeads} kv heads of ${r.headDim}`;
  if (isKvTexture(r.cacheK) || isKvTexture(r.cacheV)) return 'the KV cache is in textures';
  const dt = r.kvDtype ?? 'f32';
  if (dt !== 'f32' && dt !== 'f16') return `KV dtype ${String(dt)}`;
  if (r.cacheK.dtype !== (dt === 'f32' ? 'f32' : 'u32') || r.cacheV.dtype !== r.cacheK.dtype) return `the caches are not ${dt} rows`;
  if (K % 4 !== 0) return `K = ${K} is not a multiple of 4`;
  return null;
}

/** Whether a call with W `w` may ask for MatmulOptions.norm / gated: where texture weights apply (f32 W, K % 4 == 0, cpu variant). */
export function fusionApplies(w: Tensor, variant: Variant, hasTexture: boolean): boolean {
  return hasTexture && w.dtype === 'f32' && w.shape.length === 2 && texWeightsApply('f32', w.shape[1]!, variant);
}

const FUSE_PRENORM = 1;
const FUSE_GATED = 2;
const FUSE_ROPE_F32 = 4;
const FUSE_ROPE_F16 = 8;

/** One resolved call shape of a weight: matmulPlan's inputs that vary per call, and its kernel and grid. */
interface PlannedCall {
  M: number;
  variant: Variant;
  fuse: number;
  decode: MatmulKernels['decode'];
  prefill: MatmulKernels['prefill'];
  kernel: Kernel;
  groups: number;
}

/** Per weight tensor (its N, K and dtype are fixed), the call shapes seen, newest last. */
const planned = new WeakMap<Tensor, PlannedCall[]>();
/** Call shapes remembered per weight: decode batch sizes and the prefill chunk sizes in use. */
const PLANNED_PER_WEIGHT = 16;

/**
 * matmulPlan and the pipeline for a buffer-weight call (no textures), remembered per weight:
 * decode steps repeat the same few shapes, and the hit is a few field comparisons instead of
 * a plan's define objects and the pipeline cache's lookup.
 */
async function plannedKernel(ctx: GpuContext, w: Tensor, wdt: MatmulWdt, M: number, N: number, K: number, variant: Variant, fuse: number, kernels: MatmulKernels): Promise<{ kernel: Kernel; groups: number }> {
  let list = planned.get(w);
  if (list) {
    for (let i = list.length - 1; i >= 0; i--) {
      const c = list[i]!;
      if (c.M === M && c.fuse === fuse && c.variant === variant && c.decode === kernels.decode && c.prefill === kernels.prefill) return c;
    }
  } else planned.set(w, (list = []));
  const ropeKv = fuse & FUSE_ROPE_F32 ? 'f32' : fuse & FUSE_ROPE_F16 ? 'f16' : undefined;
  const fusion: MatmulFusion = fuse ? { prenorm: (fuse & FUSE_PRENORM) !== 0, gated: (fuse & FUSE_GATED) !== 0, ...(ropeKv ? { ropeKv } : {}) } : {};
  const { key, groups } = matmulPlan(wdt, M, N, K, variant, false, false, fusion, kernels);
  const kernel = await ctx.pipelines.get(key);
  if (list.length >= PLANNED_PER_WEIGHT) list.shift();
  list.push({ M, variant, fuse, decode: kernels.decode, prefill: kernels.prefill, kernel, groups });
  return { kernel, groups };
}

/** y[M, N] = x[M, K] · W[N, K]ᵀ (+ bias). x, y f32. */
export async function matmul(rec: Recorder, x: Tensor, weight: LinearWeight, y: Tensor, opts: MatmulOptions = {}): Promise<void> {
  if (weight.parts) {
    if (opts.gated || opts.wTexture || opts.norm || opts.rope || opts.yColumns) throw new Error('matmul: a weight in parts takes no gated output, texture, norm / rope fusion or column window');
    const stride = y.shape[y.shape.length - 1]!;
    for (const p of weight.parts) await matmul(rec, x, { w: p.w, ...(p.bias ? { bias: p.bias } : {}) }, y, { ...opts, yColumns: { stride, offset: p.col } });
    return;
  }
  const { w, bias } = weight;
  if (w.shape.length !== 2) throw new Error(`matmul: weight must be [N, K], got [${w.shape.join(', ')}]`);
  const [NW, K] = w.shape as [number, number];
  const xk = x.shape[x.shape.length - 1];
  if (xk !== K) throw new Error(`matmul: x [${x.shape.join(', ')}] does not match weight [${NW}, ${K}]`);
  if (x.dtype !== 'f32' || y.dtype !== 'f32') throw new Error('matmul: x and y must be f32');
  if (opts.gated && (NW % 2 !== 0 || bias || opts.accumulate)) throw new Error('matmul: a gated output needs W [2N, K], no bias and no accumulation');
  const N = opts.gated ? NW / 2 : NW; // columns of y
  const M = numel(x.shape) / K;
  const yc = opts.yColumns;
  const ldy = yc ? yc.stride : N;
  if (yc && (opts.gated || opts.wTexture || !Number.isInteger(yc.offset) || yc.offset < 0 || yc.offset + N > yc.stride)) {
    throw new Error(`matmul: columns [${yc.offset}, ${yc.offset + N}) of a y of ${yc.stride} columns (buffer weights, no gated output)`);
  }
  if (numel(y.shape) !== M * ldy || y.shape[y.shape.length - 1] !== ldy) {
    throw new Error(`matmul: y [${y.shape.join(', ')}] is not [${M}, ${ldy}]`);
  }
  const y0 = yc ? yc.offset : 0;
  if (bias && (bias.dtype !== 'f32' || numel(bias.shape) !== N)) throw new Error(`matmul: bias must be [${N}] f32`);
  const quant = w.dtype === 'q8_0' || w.dtype === 'q4_0';
  if (quant) {
    if (K % QK !== 0) throw new Error(`matmul: ${w.dtype} weights need K % ${QK} == 0, got K = ${K}`);
    if (!w.scales) throw new Error(`matmul: ${w.dtype} weight has no scales buffer`);
  } else if (isKQuant(w.dtype)) {
    if (K % QK_K !== 0) throw new Error(`matmul: ${w.dtype} weights need K % ${QK_K} == 0, got K = ${K}`);
  } else if (w.dtype !== 'f32' && w.dtype !== 'f16') {
    throw new Error(`matmul: unsupported weight dtype ${w.dtype}`);
  }
  if (M === 0 || N === 0) return;

  const ctx = rec.ctx;
  const wdt = (w.dtype === 'f16' && ctx.gpu.caps.f16 ? 'f16n' : w.dtype) as MatmulWdt;
  const variant = opts.variant ?? ctx.variant;
  const flags = (bias ? 1 : 0) | (opts.accumulate ? 2 : 0);
  const wt = opts.wTexture;
  const fused = !!opts.norm || !!opts.gated || !!opts.rope;
  const rp = opts.rope;
  const kernels = opts.kernels ?? contextMatmulKernels(ctx);
  const pn = opts.prenorm;
  const texPath = !!wt && texWeightsApply(wdt, K, variant);
  if (rp) {
    const why = texPath ? ropeFusionProblem(rp, N, K) : sgemvRopeProblem(rp, N, K) ?? (yc ? 'y is a column window' : null);
    if (why || opts.gated || opts.accumulate) throw new Error(`matmul: cannot fuse rope: ${why ?? 'not with a gated or accumulated output'}`);
  }
  if (pn || ((opts.gated || rp) && !texPath)) {
    if (texPath || opts.norm) throw new Error('matmul: prenorm is the gpu decode kernel\'s fusion; it does not combine with texture weights or norm');
    if (!gpuFusionApplies(M, K, variant, kernels)) {
      if (pn) throw new Error('matmul: the fused prenorm needs the sgemv kernel (gpu variant, M <= 16, K % 4 == 0; gpuFusionApplies)');
      throw new Error(`matmul: a fused ${rp ? 'rope' : 'gated output'} needs texture weights (cpu variant; fusionApplies) or the sgemv kernel (gpu variant, M <= 16, K % 4 == 0; gpuFusionApplies)`);
    }
    if (pn && (pn.weight.dtype !== 'f32' || numel(pn.weight.shape) !== K)) throw new Error(`matmul: the prenorm weight must be [${K}] f32`);
    if (rp && (numel(rp.positions.shape) < M || numel(rp.slots.shape) < M)) throw new Error(`matmul: the rope epilogue needs ${M} positions and slots`);
    const ropeFuse = rp ? ((rp.kvDtype ?? 'f32') === 'f16' ? FUSE_ROPE_F16 : FUSE_ROPE_F32) : 0;
    const { kernel, groups } = await plannedKernel(ctx, w, wdt, M, N, K, variant, (pn ? FUSE_PRENORM : 0) | (opts.gated ? FUSE_GATED : 0) | ropeFuse, kernels);
    // Built without spreads: this runs for every matmul of every decode step.
    const binds: Binding[] = quant ? [x, w, { buffer: w.scales!, offset: 0, size: scaleBytes((NW * K) / QK) }, bias ?? dummyBias(ctx), y] : [x, w, bias ?? dummyBias(ctx), y];
    if (pn) binds.push(pn.weight);
    if (rp) binds.push(rp.positions, rp.slots, rp.invFreq, rp.cacheK, rp.cacheV);
    rec.dispatch(kernel, { M, N, K, flags, eps: pn?.eps ?? 0, ldy, y0, hd: rp?.headDim ?? 0, nH: rp?.qHeads ?? 0, nKv: rp?.kvHeads ?? 0 }, binds, grid1d(groups));
    return;
  }
  if (fused && !(wt && texWeightsApply(wdt, K, variant))) throw new Error('matmul: the fused norm and gated output need texture weights (fusionApplies)');
  if (wt && texWeightsApply(wdt, K, variant)) {
    const { width, height } = wt.binding.texture;
    const o = wt.offset4;
    if (!Number.isInteger(o) || o < 0 || o + (NW * K) / 4 > width * height || width !== WEIGHT_TEXTURE_WIDTH) {
      throw new Error(`matmul: W [${NW}, ${K}] at vec4 ${o} does not fit the ${width}x${height} weight texture`);
    }
    const nm = opts.norm;
    if (nm && (!Number.isInteger(nm.offset4) || nm.offset4 < 0 || nm.offset4 + K / 4 > width * height)) {
      throw new Error(`matmul: the norm weight [${K}] at vec4 ${nm.offset4} does not fit the weight texture`);
    }
    const xt = opts.xTexture;
    const useX = !!xt && M >= XTEX_MIN_ROWS;
    if (useX) {
      const { width, height } = xt.texture;
      if (width !== WEIGHT_TEXTURE_WIDTH || (M * K) / 4 > width * height) throw new Error(`matmul: x [${M}, ${K}] does not fit the ${width}x${height} x texture`);
      if (x.offset % 16 !== 0) throw new Error('matmul: x must start 16-byte aligned to be copied into a texture');
      rec.copyToTexture(x.buffer, x.offset, (M * K) / 4, xt.texture, width);
    }
    const ropePairs = rp ? ((rp.qHeads + 2 * rp.kvHeads) * rp.headDim) / 8 : 0;
    const { key, groups } = matmulPlan(wdt, M, N, K, variant, true, useX, { norm: !!nm, gated: !!opts.gated, ropePairs });
    const kernel = await ctx.pipelines.get(key);
    const params = { M, N, K, flags, w4: o, eps: nm?.eps ?? 0, wn4: nm?.offset4 ?? 0, hd: rp?.headDim ?? 0, nH: rp?.qHeads ?? 0, nKv: rp?.kvHeads ?? 0, kvBase4: rp && isKvTexture(rp.cacheK) ? rp.cacheK.base4 : 0, ldy, y0 };
    const ropeBound = rp ? [rp.positions, rp.slots, rp.invFreq, rp.cacheK, rp.cacheV] : [];
    rec.dispatch(kernel, params, [useX ? xt : x, wt.binding, bias ?? dummyBias(ctx), y, ...ropeBound], grid1d(groups));
    return;
  }
  const { kernel, groups } = await plannedKernel(ctx, w, wdt, M, N, K, variant, 0, kernels);
  const binds: Binding[] = quant ? [x, w, { buffer: w.scales!, offset: 0, size: scaleBytes((N * K) / QK) }, bias ?? dummyBias(ctx), y] : [x, w, bias ?? dummyBias(ctx), y];
  rec.dispatch(kernel, { M, N, K, flags, ldy, y0 }, binds, grid1d(groups));
}
