/**
 * megakernelWaves (core/models/llama/megakernel_waves.ts): how a step's rows go through the
 * megakernel in waves. Pure logic; the numerics of the waves are in
 * test/numerics/decode_megakernel.test.ts. Checked: a decode-only step is one wave in token
 * order (the layout before waves); chunk w of every sequence goes in wave w; no sequence's
 * chunk straddles a workgroup (padding with the sentinel token T where needed); every token
 * appears exactly once, in position order per sequence across waves; the limits send a step
 * to the generic path (null).
 */
import { describe, expect, it } from 'vitest';
import { megakernelWaves, type WavePlanLimits } from '../../core/models/llama/megakernel_waves.ts';
import type { StepInputs } from '../../core/models/step.ts';

/** megakernelRows' rule for single-token rows: up to 4 in one workgroup, else ceil(n / 2) capped at 4. */
const rowsFor = (n: number): number => Math.max(1, Math.min(4, n <= 4 ? n : Math.ceil(n / 2)));
const LIM: WavePlanLimits = { maxChunk: 4, maxWaves: 4, maxChunkTokens: 64, rowsFor, maxRows: 1000 };

/** A step of sequences contributing lens[i] tokens each, from position starts[i] (default 10). */
function step(lens: number[], starts: number[] = []): StepInputs {
  const tokens: number[] = [];
  const positions: number[] = [];
  const tokenSeq: number[] = [];
  lens.forEach((n, s) => {
    for (let k = 0; k < n; k++) {
      tokens.push(100 + tokens.length);
      positions.push((starts[s] ?? 10) + k);
      tokenSeq.push(s);
    }
  });
  const T = tokens.length;
  return {
    tokens: Uint32Array.from(tokens),
    positions: Uint32Array.from(positions),
    tokenSeq: Uint32Array.from(tokenSeq),
    slots: Uint32Array.from(positions),
    blockTables: new Uint32Array(lens.length),
    numSeqs: lens.length,
    logitRows: Uint32Array.from({ length: T }, (_, i) => i),
  };
}

/** Structural checks every plan must pass. */
function checkPlan(s: StepInputs, lim: WavePlanLimits = LIM): void {
  const waves = megakernelWaves(s, lim)!;
  expect(waves).not.toBeNull();
  const T = s.tokens.length;
  const seen = new Map<number, number>(); // token -> wave
  waves.forEach((w, wi) => {
    expect(w.MR).toBeGreaterThanOrEqual(1);
    expect(w.MR).toBeLessThanOrEqual(lim.maxChunk);
    for (let g = 0; g * w.MR < w.rows.length; g++) {
      const group = Array.from(w.rows.slice(g * w.MR, (g + 1) * w.MR)).filter((t) => t !== T);
      // Within a workgroup: each sequence's tokens consecutive and in position order.
      const bySeq = new Map<number, number[]>();
      for (const t of group) bySeq.set(s.tokenSeq[t]!, [...(bySeq.get(s.tokenSeq[t]!) ?? []), t]);
      for (const ts of bySeq.values()) for (let k = 1; k < ts.length; k++) expect(s.positions[ts[k]!]).toBe(s.positions[ts[k - 1]!]! + 1);
    }
    for (const t of w.rows) {
      if (t === T) continue;
      expect(seen.has(t), `token ${t} twice`).toBe(false);
      seen.set(t, wi);
    }
    let latest = 0;
    for (const t of w.rows) if (t !== T) latest = Math.max(latest, s.positions[t]!);
    expect(w.latest).toBe(latest);
  });
  expect(seen.size).toBe(T);
  // A sequence's chunk w sits in wave w: each token's wave is its index in the sequence / maxChunk,
  // and every sequence's chunk lies in one workgroup of its wave.
  const first = new Map<number, number>();
  for (let t = 0; t < T; t++) if (!first.has(s.tokenSeq[t]!)) first.set(s.tokenSeq[t]!, t);
  for (let t = 0; t < T; t++) expect(seen.get(t)).toBe(Math.floor((t - first.get(s.tokenSeq[t]!)!) / lim.maxChunk));
  for (const w of waves) {
    const groupOf = new Map<string, number>();
    w.rows.forEach((t, r) => {
      if (t === T) return;
      const key = `${s.tokenSeq[t]}`;
      const g = Math.floor(r / w.MR);
      if (groupOf.has(key)) expect(groupOf.get(key), `sequence ${key} straddles workgroups`).toBe(g);
      groupOf.set(key, g);
    });
  }
}

describe('megakernelWaves', () => {
  it('a decode-only step is one wave of the tokens in order, as megakernelRows lays them out', () => {
    for (const S of [1, 3, 4, 5, 8, 16, 17]) {
      const waves = megakernelWaves(step(Array(S).fill(1)), LIM)!;
      expect(waves).toHaveLength(1);
      expect(Array.from(waves[0]!.rows)).toEqual(Array.from({ length: S }, (_, i) => i));
      expect(waves[0]!.MR).toBe(rowsFor(S));
    }
  });

  it('chunk w of every sequence in wave w, packed without straddling, padded with the sentinel', () => {
    for (const lens of [[2], [5], [16], [3, 2], [3, 3], [4, 1, 1, 1, 1], [16, 3, 2, 1], [1, 4, 1, 6, 1, 1, 2], [7, 7, 7]]) checkPlan(step(lens));
    // 3 + 3 rows: MR 3, two full workgroups. 3 + 2 + 2 rows: MR 4, the 3-token chunk's workgroup
    // padded with one sentinel row (T = 7), the two 2-token chunks share the second.
    const w = megakernelWaves(step([3, 3]), LIM)!;
    expect(w.map((x) => [x.MR, Array.from(x.rows)])).toEqual([[3, [0, 1, 2, 3, 4, 5]]]);
    const p = megakernelWaves(step([3, 2, 2]), LIM)!;
    expect(p.map((x) => [x.MR, Array.from(x.rows)])).toEqual([[4, [0, 1, 2, 7, 3, 4, 5, 6]]]);
    // A 5-token prompt and two decodes: wave 0 = the prompt's first 4 tokens, then both decodes
    // (MR 4: 6 rows); wave 1 = its fifth token alone.
    const m = megakernelWaves(step([1, 5, 1]), LIM)!;
    expect(m.map((x) => Array.from(x.rows))).toEqual([[1, 2, 3, 4, 0, 6], [5]]);
    expect(m.map((x) => x.latest)).toEqual([13, 14]);
  });

  it('sends steps the megakernel should not take to the generic path', () => {
    expect(megakernelWaves(step([17]), LIM)).toBeNull(); // 5 waves
    expect(megakernelWaves(step([16]), LIM)).not.toBeNull();
    expect(megakernelWaves(step([15, 15, 15, 15, 5]), LIM)).toBeNull(); // 65 chunk tokens
    expect(megakernelWaves(step([16, 16, 16, 16, 1, 1, 1]), LIM)).not.toBeNull(); // decodes do not count
    expect(megakernelWaves(step([4, 4, 4]), { ...LIM, maxRows: 8 })).toBeNull(); // a wave past the scratch rows
    expect(megakernelWaves(step([4]), { ...LIM, rowsFor: (n) => Math.min(2, rowsFor(n)) })).toBeNull(); // chunk wider than a workgroup may hold
    expect(megakernelWaves(step([]), LIM)).toBeNull();
    const split = step([2, 1]);
    expect(megakernelWaves({ ...split, tokenSeq: Uint32Array.of(0, 1, 0), positions: Uint32Array.of(10, 10, 11) }, LIM)).toBeNull(); // sequence 0 split
    expect(megakernelWaves({ ...split, positions: Uint32Array.of(10, 12, 10) }, LIM)).toBeNull(); // a position gap
  });
});
