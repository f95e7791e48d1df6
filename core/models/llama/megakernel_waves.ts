/**
 * How a step with prompt chunks (or speculative-verify rows) runs through the decode
 * megakernel: in waves, one dispatch each. The megakernel orders a row's KV store before its
 * attention only within one workgroup (a storage barrier), so every token a row attends to
 * must come from an earlier dispatch or from its own workgroup. Wave w therefore takes
 * tokens w·C .. w·C + C - 1 of every sequence (C = maxChunk), each sequence's chunk inside
 * one workgroup of MR rows: chunk w of a sequence sees chunks 0..w-1 (earlier dispatches)
 * and its own earlier tokens (same workgroup). A decode-only step is one wave whose rows are
 * the tokens in order, exactly the layout the megakernel had before waves.
 *
 * Why: on the CPU emulators a step with any prompt chunk used to take the generic path for
 * all its rows, several times the cost of its decodes alone (figures: docs/kernels.md,
 * "Tuning figures"). Pure logic, no GPU.
 */
import type { StepGeometry, StepInputs } from '../step.ts';

/**
 * Most waves a step may take through the megakernel: past it the generic path's batched
 * matmuls are cheaper (docs/kernels.md, "Tuning figures"). The most tokens of multi-token chunks (prompt chunks, verify rows) per step is
 * the adapter's (MegakernelTuning.waveChunkTokens).
 */
export const MEGAKERNEL_MAX_WAVES = 8;

/** Most tokens of one sequence per wave: the megakernel's largest workgroup of rows. */
export const MEGAKERNEL_MAX_CHUNK = 4;

/** Rows one wave may hold, padding included: up to maxChunk tokens of each of maxSeqs sequences, within the step's tokens. */
export function megakernelScratchRows(geo: Pick<StepGeometry, 'maxSeqs' | 'maxTokens'>): number {
  return Math.max(geo.maxSeqs, Math.min(geo.maxTokens, MEGAKERNEL_MAX_CHUNK * geo.maxSeqs)) + 3;
}

/** One megakernel dispatch of a step. */
export interface MegakernelWave {
  /** Token index (into the step's T tokens) of each row, in workgroups of MR; T = padding (the sentinel token). */
  rows: Uint32Array;
  /** Rows per workgroup. */
  MR: number;
  /** Latest position of the wave's tokens (llvmpipe's loop budget grows with it). */
  latest: number;
}

export interface WavePlanLimits {
  /** Most tokens of one sequence in one wave (rows of one workgroup: 4). */
  maxChunk: number;
  /** Most waves (dispatches) a step may take; more and the generic path is cheaper. */
  maxWaves: number;
  /** Most tokens of sequences contributing more than one token to the step. */
  maxChunkTokens: number;
  /** Rows per workgroup the megakernel picks for a wave of n single-token rows (megakernelRows). */
  rowsFor: (n: number) => number;
  /** Most rows of one wave, padding included (the activation scratch's capacity). */
  maxRows: number;
}

/** The step's tokens grouped by sequence: runs of consecutive positions, each sequence one run. */
function sequenceRuns(s: StepInputs): { start: number; n: number }[] | null {
  const T = s.tokens.length;
  const runs: { start: number; n: number }[] = [];
  const seen = new Set<number>();
  for (let i = 0; i < T; i++) {
    const seq = s.tokenSeq[i]!;
    if (i > 0 && seq === s.tokenSeq[i - 1]) {
      if (s.positions[i] !== s.positions[i - 1]! + 1) return null;
      runs[runs.length - 1]!.n++;
      continue;
    }
    if (seen.has(seq)) return null; // a sequence's tokens split around another's
    seen.add(seq);
    runs.push({ start: i, n: 1 });
  }
  return runs;
}

/**
 * The waves of step `s`, or null when the megakernel cannot (or should not) take it: a
 * sequence's tokens not contiguous with consecutive positions, more than maxWaves waves or
 * maxChunkTokens tokens in multi-token chunks, a wave past maxRows. Within a wave, chunks
 * are packed first-fit by decreasing size (stable, so single-token rows keep the step's
 * order) into workgroups of MR rows, padding rows (the sentinel token T) where a chunk does
 * not fit the rest of a workgroup.
 */
export function megakernelWaves(s: StepInputs, lim: WavePlanLimits): MegakernelWave[] | null {
  const T = s.tokens.length;
  if (T === 0) return null;
  const runs = sequenceRuns(s);
  if (!runs) return null;
  const C = lim.maxChunk;
  if (runs.reduce((a, r) => a + (r.n > 1 ? r.n : 0), 0) > lim.maxChunkTokens) return null;
  const nWaves = Math.max(...runs.map((r) => Math.ceil(r.n / C)));
  if (nWaves > lim.maxWaves) return null;
  const waves: MegakernelWave[] = [];
  for (let w = 0; w < nWaves; w++) {
    const chunks = runs.filter((r) => r.n > w * C).map((r) => ({ start: r.start + w * C, n: Math.min(C, r.n - w * C) }));
    const total = chunks.reduce((a, c) => a + c.n, 0);
    const largest = Math.max(...chunks.map((c) => c.n));
    const MR = Math.max(lim.rowsFor(total), largest);
    if (largest > lim.rowsFor(C)) return null; // a chunk wider than a workgroup may hold
    const bins: number[][] = [];
    for (const c of [...chunks].sort((a, b) => b.n - a.n)) {
      let bin = bins.find((b) => b.length + c.n <= MR);
      if (!bin) bins.push((bin = []));
      for (let k = 0; k < c.n; k++) bin.push(c.start + k);
    }
    const rows: number[] = [];
    bins.forEach((b, k) => {
      rows.push(...b);
      if (k < bins.length - 1) for (let pad = b.length; pad < MR; pad++) rows.push(T);
    });
    if (rows.length > lim.maxRows) return null;
    let latest = 0;
    for (const c of chunks) latest = Math.max(latest, s.positions[c.start + c.n - 1]!);
    waves.push({ rows: Uint32Array.from(rows), MR, latest });
  }
  return waves;
}
