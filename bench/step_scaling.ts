/**
 * Decode-step anatomy for the serving bench (the "≥ 6x the sequential run" goal): how the
 * cost of ONE decode-only step grows with its sequence count S, measured on the model itself
 * (no scheduler, no streams), so the serving ratios can be read against what the device does.
 *
 * Per S: greedy decode steps as the engine records them (argmax fused into the step when the
 * model can), every sequence at a mid-decode position, in interleaved blocks over all S (the
 * host's speed drifts within minutes; block interleaving spreads it evenly). Per step:
 *   step ms   — record + submit + readback resolved (what a step costs the engine's loop);
 *   submit ms — inside queue.submit(): on llvmpipe the device computes there, synchronously
 *               (its launch_grid waits for its workers); SwiftShader computes after it;
 *   compute   — step ms minus the median step of a one-workgroup trivial dispatch recorded
 *               the same way (the fixed cost of getting any dispatch to the device and back).
 * compute(S) / compute(1) says how much more device work S rows are than one row; S over it
 * is the batching gain of the device alone ("compute-only ratio"). Everything else in the
 * serving ratio is per-step fixed cost (JS, Dawn, driver) that a batch pays once and a
 * sequential run pays per token.
 */
import { add } from '../core/ops/add.ts';
import type { GpuContext } from '../core/gpu/context.ts';
import type { LoadedDecoder } from '../core/api/load_decoder.ts';
import type { StepInputs } from '../core/models/step.ts';
import { f2, mean, median } from './stats.ts';

export interface Spread {
  p10: number;
  p50: number;
  mean: number;
}

export interface StepScalingRow {
  seqs: number;
  stepMs: Spread;
  submitMs: Spread;
  /** stepMs minus the trivial dispatch's median step. */
  computeMs: Spread;
}

export interface StepScaling {
  /** Context position of the sequences' decode token (mid-decode of the serving requests). */
  position: number;
  /** Timed steps per S. */
  steps: number;
  /** A step of one one-workgroup dispatch (an element-wise add of 4 floats) and its submit. */
  trivialStepMs: Spread;
  trivialSubmitMs: Spread;
  rows: StepScalingRow[];
}

function spread(xs: number[]): Spread {
  const s = [...xs].sort((a, b) => a - b);
  return { p10: s[Math.floor(0.1 * (s.length - 1))] ?? NaN, p50: median(s), mean: mean(s) };
}

/** A decode-only step of S sequences, sequence s at position + s % 7 in its own KV blocks. */
function decodeStep(d: LoadedDecoder, S: number, position: number): StepInputs {
  const { blockSize, maxBlocksPerSeq: mb, numBlocks } = d.geometry;
  const need = Math.ceil((position + 8) / blockSize);
  if (S * need > numBlocks) throw new Error(`step scaling: ${S} sequences at position ${position} need ${S * need} KV blocks, the pool has ${numBlocks}`);
  const blockTables = new Uint32Array(S * mb);
  for (let s = 0; s < S; s++) for (let b = 0; b < need; b++) blockTables[s * mb + b] = s * need + b;
  const positions = Uint32Array.from({ length: S }, (_, s) => position + (s % 7));
  const slots = positions.map((p, s) => blockTables[s * mb + Math.floor(p / blockSize)]! * blockSize + (p % blockSize));
  const seqIdx = Uint32Array.from({ length: S }, (_, s) => s);
  return { tokens: Uint32Array.from({ length: S }, (_, s) => 10 + s), positions, tokenSeq: seqIdx, slots, blockTables, numSeqs: S, logitRows: seqIdx };
}

/**
 * Measures decode steps of each S in `sizes` on an idle decoder (its KV pool is overwritten
 * in blocks 0.. : call it between runs, never while the engine serves).
 */
export async function measureStepScaling(ctx: GpuContext, d: LoadedDecoder, sizes: number[], position: number, blocks = 8, perBlock = 30): Promise<StepScaling> {
  const steps = sizes.map((S) => {
    const inputs = decodeStep(d, S, position);
    const fused = d.model.fusesArgmax?.(inputs) ?? false;
    const ids = ctx.tensor(new Uint32Array(S), [S], 'u32');
    return { S, inputs, fused, ids, step: [] as number[], submit: [] as number[] };
  });
  const a = ctx.tensor(new Float32Array([1, 2, 3, 4]), [4], 'f32');
  const b = ctx.tensor(new Float32Array([4, 3, 2, 1]), [4], 'f32');
  const c = ctx.tensor(new Float32Array(4), [4], 'f32');
  const trivial: number[] = [];
  const trivialSubmit: number[] = [];
  try {
    const once = async (x: (typeof steps)[number] | null): Promise<[number, number]> => {
      const t0 = performance.now();
      const rec = ctx.recorder();
      let read: Promise<ArrayBuffer>;
      if (x) {
        const out = await d.model.record(rec, x.inputs, x.fused ? { argmaxInto: x.ids } : {});
        read = rec.readback(out!, x.fused ? x.S * 4 : 16);
      } else {
        await add(rec, a, b, c);
        read = rec.readback(c);
      }
      const t1 = performance.now();
      rec.submit();
      const t2 = performance.now();
      await read;
      return [performance.now() - t0, t2 - t1];
    };
    for (const x of [null, ...steps]) for (let i = 0; i < 5; i++) await once(x); // compile, warm
    for (let blk = 0; blk < blocks; blk++) {
      // Rotate the order so no S always follows the same neighbour.
      const order = [null, ...steps];
      for (let k = 0; k < blk % order.length; k++) order.push(order.shift()!);
      for (const x of order) {
        for (let i = 0; i < 3; i++) await once(x);
        for (let i = 0; i < perBlock; i++) {
          const [stepMs, submitMs] = await once(x);
          if (x) {
            x.step.push(stepMs);
            x.submit.push(submitMs);
          } else {
            trivial.push(stepMs);
            trivialSubmit.push(submitMs);
          }
        }
      }
    }
  } finally {
    for (const t of [a, b, c, ...steps.map((x) => x.ids)]) t.buffer.destroy();
  }
  const base = median(trivial);
  return {
    position,
    steps: blocks * perBlock,
    trivialStepMs: spread(trivial),
    trivialSubmitMs: spread(trivialSubmit),
    rows: steps.map((x) => ({ seqs: x.S, stepMs: spread(x.step), submitMs: spread(x.submit), computeMs: spread(x.step.map((v) => v - base)) })),
  };
}


/** Markdown: one row per S, compute and step scaling against S = 1 (p50 / mean). */
export function stepScalingTable(s: StepScaling): string {
  const one = s.rows.find((r) => r.seqs === 1);
  // x(S) / x(1) for the p50 and the mean of one measure (NaN without an S = 1 row).
  const vsOne = (x: Spread, y: Spread | undefined): [number, number] => (y ? [x.p50 / y.p50, x.mean / y.mean] : [NaN, NaN]);
  const lines = [
    `Decode-step anatomy (model-level: greedy decode-only steps at position ${s.position}, ${s.steps} per S in interleaved blocks; ` +
      `compute = step − the median step of a trivial one-workgroup dispatch, ${f2(s.trivialStepMs.p50)} ms (its submit ${f2(s.trivialSubmitMs.p50)} ms); p10 / p50 / mean ms). ` +
      'Compute-only ratio = S / (compute(S) / compute(1)): what batching gains on the device alone; the rest of the serving ratio is per-step fixed cost paid once per batch.',
    '',
    '| S | step ms | submit ms | compute ms | compute vs S = 1 (p50 / mean) | compute-only ratio (p50 / mean) | step vs S = 1 (p50 / mean) | step ratio (p50 / mean) |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of s.rows) {
    const sp = (x: Spread): string => `${f2(x.p10)} / ${f2(x.p50)} / ${f2(x.mean)}`;
    const [cp, cm] = vsOne(r.computeMs, one?.computeMs);
    const [sp50, smean] = vsOne(r.stepMs, one?.stepMs);
    lines.push(
      `| ${r.seqs} | ${sp(r.stepMs)} | ${sp(r.submitMs)} | ${sp(r.computeMs)} | ${f2(cp)}x / ${f2(cm)}x | ${f2(r.seqs / cp)}x / ${f2(r.seqs / cm)}x | ${f2(sp50)}x / ${f2(smean)}x | ${f2(r.seqs / sp50)}x / ${f2(r.seqs / smean)}x |`,
    );
  }
  return lines.join('\n');
}
