/**
 * llvmpipe's loop budget, and how the kernels that loop long stay within it.
 *
 * Mesa's gallivm (llvmpipe, Mesa 22.3 here) guards every shader invocation against endless
 * loops with ONE counter of LLVMPIPE_LOOP_BUDGET iterations shared by all the loops the
 * invocation runs, never reset (not by a new loop, not at a barrier): each loop iteration and
 * each loop exit takes one. Once it is spent, every loop still to come runs zero times and
 * the kernel's results are silently wrong. Loops the compiler unrolls (small compile-time trip
 * counts) take nothing. SwiftShader and hardware drivers have no such limit.
 *
 * So a kernel that loops over the whole model in one invocation (the decode megakernel) or
 * over a long context (attention) must stay within it. Where each kernel stands:
 *   decode megakernel — megakernelLoopCount per step; past the plan the step goes generic;
 *   attention (cpu variant) — long contexts in passes of attentionTilesPerPass tiles;
 *   encoder attention (cpu variant) — long rows in passes of encoderAttentionTilesPerPass
 *   tiles; the gpu variant, forced onto llvmpipe, refuses rows past the plan (input_too_long);
 *   sampler — the one-invocation-per-row variant only within the plan (sample.ts cpuLoops);
 *   matmul, norms, rope, KV writes, embeddings — loops of K/4, D or head_dim per
 *   invocation: far below the budget at any model size served here.
 * test/numerics/loop_budget.test.ts checks megakernelLoopCount against the counter itself,
 * read back on llvmpipe, for several shapes.
 */
import type { DecoderConfig } from '../formats/hf_config.ts';
import type { Kernel } from '../gpu/pipelines.ts';
import type { Binding, Recorder } from '../gpu/recorder.ts';

/** Loop iterations (and exits) one llvmpipe shader invocation may run in all. */
export const LLVMPIPE_LOOP_BUDGET = 65535;

/** What a kernel plans to use of the budget (sample.ts, encoder_attention.ts, attention.ts, the megakernel): the counts are upper bounds, this keeps a margin for what they miss. */
export const LLVMPIPE_LOOP_PLAN = 60_000;

/** The megakernel's shape that sets its loop counts (decode_megakernel.ts defines of the same names). */
export interface MegakernelLoopShape {
  /** Token rows per workgroup. */
  MR: number;
  /** Invocations per workgroup. */
  WG: number;
  /** Octets (8 columns) per invocation per matmul pass. */
  NO: number;
  /** Query heads per attention item. */
  GC: number;
  /** Greedy ids instead of logits. */
  argmax: boolean;
}

type LoopConfig = Pick<DecoderConfig, 'hiddenSize' | 'heads' | 'kvHeads' | 'headDim' | 'intermediateSize' | 'vocabSize' | 'layers' | 'attentionBias' | 'qkNorm' | 'slidingWindow'>;

/**
 * An upper bound on the loop iterations one megakernel invocation runs for a decode step
 * whose latest token sits at `maxPosition`. Counted per loop of decode_megakernel.wgsl and its
 * parts: a loop of n iterations takes n + 1 (its exit); the matmul passes, norms, rope and
 * attention loops have runtime bounds and always count; the small constant loops (octets,
 * rows, the 4 lanes of a store) are counted as if they were not unrolled, except attention's
 * per-tile loops over GC heads and head_dim / 4, which llvmpipe unrolls when GC · head_dim / 4
 * <= 32 (measured: one count per 8-key tile then, 2 · head_dim / 4 + 3 otherwise).
 */
export function megakernelLoopCount(c: LoopConfig, s: MegakernelLoopShape, maxPosition: number): number {
  const { MR, WG, NO, GC } = s;
  const D = c.hiddenSize;
  const hd = c.headDim;
  const hd4 = hd / 4;
  const k4 = (k: number): number => Math.ceil(k / 4);
  const passes = (n: number): number => Math.ceil(n / (8 * NO * WG));
  const strided = (n: number): number => Math.ceil(n / WG) + 1; // for (k = lid; k < n; k += WG)
  const store = NO + 1 + NO * (MR + 1); // putOcts: octets, then rows
  const matmul = (n: number, k: number): number => passes(n) * (k4(k) + 2 + store) + 1;
  const norm = k4(D) + 1 + strided(MR * k4(D)); // rmsInv, then normRows
  const qkvCols = (c.heads + 2 * c.kvHeads) * hd;
  const ropeHead = hd / 2 + 1 + 2 * (hd4 + 1) + 5 + (c.qkNorm ? hd + 1 : 0);
  const rope = strided(MR * (c.heads + c.kvHeads)) + Math.ceil((MR * (c.heads + c.kvHeads)) / WG) * ropeHead;
  const items = c.kvHeads * (c.heads / c.kvHeads / GC);
  const perLane = Math.ceil((MR * items) / WG);
  const span = c.slidingWindow ? Math.min(maxPosition + 1, c.slidingWindow) : maxPosition + 1;
  const tiles = Math.ceil(span / 8) + 1; // + 1: a window start off an 8-key boundary
  const tileCost = GC * hd4 <= 32 ? 1 : 2 * hd4 + 3;
  const attention = strided(MR * items) + perLane * (2 * GC * (hd4 + 1) + GC + 2 + tiles * tileCost);
  const gateUp = passes(c.intermediateSize) * (2 * (k4(D) + 1) + 1 + store) + 1;
  const down = c.intermediateSize % 4 === 0 ? matmul(D, c.intermediateSize) : Math.ceil(D / (8 * WG)) * (k4(c.intermediateSize) + 2 + MR + 2) + 1;
  const layer = matmul(qkvCols, D) + (c.attentionBias ? passes(qkvCols) * store : 0) + rope + attention + matmul(D, c.heads * hd) + 2 * norm + gateUp + down;
  const head = passes(c.vocabSize) * (k4(D) + 2 + (s.argmax ? 1 : store + 5)) + 1;
  return c.layers * layer + strided(MR * k4(D)) + norm + head + (s.argmax ? WG + 1 : 0);
}

/**
 * Key tiles (8 positions each) one invocation of attention.wgsl's cpu variant may walk in one
 * dispatch within LLVMPIPE_LOOP_PLAN; longer contexts take several passes (attention.ts). Per
 * tile the kernel runs two loops over head_dim / 4 and four over its GC heads, all counted as
 * if not unrolled (llvmpipe unrolls some of them, depending on their size: a pass costs a
 * dispatch, a miss costs wrong results); the fixed part is the q / accumulator setup and the
 * final normalization.
 */
export function attentionTilesPerPass(GC: number, hd4: number): number {
  const perTile = 1 + 2 * (hd4 + 1) + 4 * (GC + 1);
  const fixed = 4 * GC * (hd4 + 2) + 16;
  return Math.floor((LLVMPIPE_LOOP_PLAN - fixed) / perTile);
}

/** Dispatches needed for `tiles` key tiles at `perPass` tiles per dispatch (1 when they fit one). */
export function passCount(tiles: number, perPass: number): number {
  return tiles > perPass ? Math.ceil(tiles / perPass) : 1;
}

/**
 * Records an attention kernel with a PASSES variant: one dispatch when `passes` is 1, else
 * `passes` dispatches over tiles k·perPass .. (k + 1)·perPass - 1 (uniforms tileFrom / tileTo),
 * with a step-scoped state buffer of `stateBytes` (each invocation's running max and sum
 * between passes) bound after `bindings`. Used by attention.ts and encoder_attention.ts.
 */
export function dispatchInPasses(
  rec: Recorder,
  kernel: Kernel,
  params: Readonly<Record<string, number>>,
  bindings: readonly Binding[],
  groups: readonly [number, number?, number?],
  p: { passes: number; perPass: number; stateBytes: number },
): void {
  if (p.passes === 1) {
    rec.dispatch(kernel, params, bindings, groups);
    return;
  }
  const state = { buffer: rec.temp(p.stateBytes), size: p.stateBytes };
  for (let k = 0; k < p.passes; k++) rec.dispatch(kernel, { ...params, tileFrom: k * p.perPass, tileTo: (k + 1) * p.perPass }, [...bindings, state], groups);
}

/**
 * Key tiles (8 tokens each) one invocation of encoder_attention.wgsl's cpu variant may walk in
 * one dispatch within LLVMPIPE_LOOP_PLAN; longer rows take several passes (encoder_attention.ts).
 * Per tile: the score reset over the GQ queries, the K and V loops over head_dim / 4 each with
 * a loop over the GQ queries inside, and the softmax loop over the GQ queries, every loop
 * counted with its exit and as if not unrolled. Fixed: padding rows, state setup, the final
 * normalization (or the state store), each a loop over GQ queries of head_dim / 4.
 */
export function encoderAttentionTilesPerPass(GQ: number, hd4: number): number {
  const perTile = 1 + 2 * (GQ + 1) + 2 * (hd4 * (GQ + 2) + 1);
  const fixed = 3 * (GQ * (hd4 + 1) + 1) + GQ + 8;
  return Math.floor((LLVMPIPE_LOOP_PLAN - fixed) / perTile);
}

/**
 * Why no step of this model can take the megakernel within `budget` (its one-sequence step at
 * position 0 is already past it), or null. Such a model keeps the texture storage of the
 * megakernel's adapter for its generic path.
 */
export function megakernelBudgetProblem(c: LoopConfig, s: Omit<MegakernelLoopShape, 'MR' | 'argmax'>, budget: number | null): string | null {
  if (budget === null) return null;
  const loops = megakernelLoopCount(c, { ...s, MR: 1, argmax: false }, 0);
  return loops > budget ? `one sequence's step runs ~${loops} loop iterations per invocation, over llvmpipe's budget (${budget} of ${LLVMPIPE_LOOP_BUDGET})` : null;
}
