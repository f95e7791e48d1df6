/**
 * Token sampling on the GPU: every row of logits [B, V] f32 is sampled with
 * its own SamplingParams into out [B] u32, in one dispatch, so a decode step
 * reads back B ids instead of B * V logits. Order per row (HF transformers):
 * mask -> repetition / presence / frequency penalties -> greedy argmax if
 * temperature == 0, else / temperature -> top-k -> top-p -> min-p -> draw.
 * Thresholds come from bisection passes over the vocabulary (no sort), so
 * V = 152k costs a few dozen linear passes per sampled row. A row with no
 * allowed token yields NO_TOKEN (0xFFFFFFFF).
 *
 * RNG (counter-based, so a request's draws do not depend on its batch):
 *   [x, _] = pcg2d(seed, step)  (Jarzynski & Olano 2020, u32 wrapping math)
 *   u = (x >>> 8) / 2^24 in [0, 1)     -- exact in f32; see uniform01 in sample.ref.ts
 * and the token is the first id (ascending) whose cumulative kept probability
 * exceeds u. Shader: shaders/sample.wgsl; reference: sample.ref.ts.
 */
import type { Binding, Recorder } from '../gpu/recorder.ts';
import { numel, type Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { hasPenalties, NO_TOKEN, type SamplingParams } from '../sampling/params.ts';
import { ceilDiv, grid1d } from './grid.ts';
import { LLVMPIPE_LOOP_PLAN } from './loop_budget.ts';
import type { Variant } from './variant.ts';

export { NO_TOKEN };

export interface SampleRow {
  params: SamplingParams;
  /** Tokens generated so far for this request (the RNG counter). */
  step: number;
  /** Prompt + generated ids for the penalties; ids >= V are ignored. May be empty. */
  history?: Uint32Array;
}

export interface SampleOptions {
  /** [B, ceil(V/32)] u32: token v allowed iff bit v%32 of word v/32 is set. */
  mask?: Tensor;
  variant?: Variant;
}

const layout = uniformLayout([
  ['rows', 'u32'],
  ['vocab', 'u32'], // in elements
  ['maskWords', 'u32'], // u32 words per mask row
  ['hasMask', 'u32'],
] as const);

/**
 * A row sample.wgsl resolves as argmax_plain: greedy (temperature 0 in f32: a tiny temperature
 * rounds to greedy in the shader too), no penalised history, and (`masked` false) no allowed-token
 * mask. Such rows can take an argmax fused into the model (RecordOptions.argmaxInto).
 */
export function isPlainGreedy(row: SampleRow, masked: boolean): boolean {
  return Math.fround(row.params.temperature) === 0 && !masked && !(hasPenalties(row.params) && (row.history?.length ?? 0) > 0);
}

/** u32 words per row record; f32 fields are stored bit-cast. */
export const ROW_WORDS = 12;
// Record: 0 temperature f32, 1 topK, 2 topP f32, 3 minP f32, 4 repetitionPenalty f32,
// 5 presencePenalty f32, 6 frequencyPenalty f32, 7 seed, 8 step, 9 pair offset (in words,
// from the start of the buffer), 10 pair count, 11 scratch row (index into z [zRows, ceil(V/4)] vec4).

/** Distinct history tokens below V with their counts. */
function countHistory(h: Uint32Array, V: number): Map<number, number> {
  const m = new Map<number, number>();
  for (const t of h) if (t < V) m.set(t, (m.get(t) ?? 0) + 1);
  return m;
}

/**
 * Packs the row records, then the (token, count) pairs of every penalised row.
 * Returns the words, how many rows need the scratch z (all but greedy rows
 * without penalties) and each row's pair count.
 */
export function packRows(rows: readonly SampleRow[], V: number): { words: Uint32Array; zRows: number; pairs: number[] } {
  const counts = rows.map((r) => (hasPenalties(r.params) && r.history?.length ? countHistory(r.history, V) : null));
  const pairs = counts.reduce((a, c) => a + (c?.size ?? 0), 0);
  const words = new Uint32Array(rows.length * ROW_WORDS + 2 * pairs);
  const f = new Float32Array(words.buffer);
  let off = rows.length * ROW_WORDS;
  let zRows = 0;
  rows.forEach((row, b) => {
    const o = b * ROW_WORDS;
    const p = row.params;
    const c = counts[b];
    f[o] = p.temperature;
    words[o + 1] = Math.min(p.topK, 0xffffffff);
    f[o + 2] = p.topP;
    f[o + 3] = p.minP;
    f[o + 4] = p.repetitionPenalty;
    f[o + 5] = p.presencePenalty;
    f[o + 6] = p.frequencyPenalty;
    words[o + 7] = p.seed >>> 0;
    words[o + 8] = row.step >>> 0;
    words[o + 9] = off;
    words[o + 10] = c?.size ?? 0;
    // f32 rounding can turn a tiny temperature into 0: the shader then treats the row as greedy.
    words[o + 11] = f[o] === 0 && !c?.size ? 0 : zRows++;
    if (c) for (const [tok, n] of c) (words[off++] = tok), (words[off++] = n);
  });
  return { words, zRows, pairs: counts.map((c) => c?.size ?? 0) };
}

/** Invocations (rows) per workgroup of the SHARED=0 kernel: 4 measured fastest (SwiftShader's SIMD width). */
const CPU_WG = 4;

/**
 * Worst-case loop iterations of one SHARED=0 invocation batch (passes as in
 * sample.wgsl). Lanes of a batch run every loop any of them runs, so this
 * sums each loop's worst case over the rows that can reach it.
 */
function cpuLoops(V: number, rows: readonly SampleRow[], pairs: number[]): number {
  const q = Math.ceil(V / 4);
  const qb = q + Math.ceil(q / 256); // a blocked mass pass
  let fast = false;
  let filled = false;
  let drawn = false;
  let topK = false;
  let topP = false;
  let maxPairs = 0;
  rows.forEach(({ params: p }, b) => {
    if (p.temperature === 0 && !pairs[b]) return void (fast = true);
    filled = true;
    maxPairs = Math.max(maxPairs, pairs[b]!);
    if (p.temperature === 0) return;
    drawn = true;
    topK ||= p.topK > 0;
    topP ||= p.topP < 1;
  });
  const sampling = drawn ? q + (topK ? 32 * q : 0) + (topP ? 31 * qb : 0) + 2 * qb + 1280 : 0;
  return (fast ? q : 0) + (filled ? 2 * q + maxPairs : 0) + sampling;
}

/**
 * Kernel choice: `gpu` -> workgroup per row; `cpu` -> invocation per row while its worst case
 * fits llvmpipe's per-invocation loop budget (core/ops/loop_budget.ts), else workgroups.
 */
function kernelFor(variant: Variant, V: number, rows: readonly SampleRow[], pairs: number[]): { shared: boolean; WG: number } {
  if (variant === 'cpu' && cpuLoops(V, rows, pairs) <= LLVMPIPE_LOOP_PLAN) return { shared: false, WG: CPU_WG };
  // 128 measured fastest on SwiftShader and llvmpipe (V = 32k and 152k); 256 for real GPUs.
  // Per invocation that is ~68 * V / (4 * WG) loop iterations: under the cap up to V ~ 450k / 900k.
  return { shared: true, WG: variant === 'cpu' ? 128 : 256 };
}

/**
 * Records sampling of every row of logits [B, V] f32 into out [B] u32 (one
 * dispatch). Per-row params and history pairs are uploaded into step-scoped
 * buffers of the recorder.
 */
export async function sample(rec: Recorder, logits: Tensor, rows: readonly SampleRow[], out: Tensor, opts: SampleOptions = {}): Promise<void> {
  const B = rows.length;
  if (B === 0) return;
  const [lb, V] = logits.shape;
  if (logits.dtype !== 'f32' || logits.shape.length !== 2 || lb !== B || !V) {
    throw new Error(`sample: logits must be [${B}, V] f32, got [${logits.shape.join(', ')}] ${logits.dtype}`);
  }
  if (out.dtype !== 'u32' || numel(out.shape) < B) throw new Error(`sample: out must be u32 with >= ${B} elements`);
  const maskWords = Math.ceil(V / 32);
  const { mask } = opts;
  if (mask && (mask.dtype !== 'u32' || numel(mask.shape) !== B * maskWords)) {
    throw new Error(`sample: mask must be [${B}, ${maskWords}] u32, got [${mask.shape.join(', ')}] ${mask.dtype}`);
  }
  const { words, zRows, pairs } = packRows(rows, V);
  const { shared, WG } = kernelFor(opts.variant ?? rec.ctx.variant, V, rows, pairs);
  const kernel = await rec.ctx.pipelines.get({ shader: 'sample', defines: { WG, SHARED: shared }, layout });

  const info = rec.upload(words);
  const zBytes = Math.max(16, zRows * Math.ceil(V / 4) * 16);
  const z = rec.temp(zBytes);
  const maskBinding: Binding = mask ?? { buffer: rec.temp(4), size: 4 };
  rec.dispatch(
    kernel,
    { rows: B, vocab: V, maskWords, hasMask: mask ? 1 : 0 },
    [logits, maskBinding, info, { buffer: z, size: zBytes }, { buffer: out.buffer, offset: out.offset, size: B * 4 }],
    grid1d(shared ? B : ceilDiv(B, CPU_WG)),
  );
}
