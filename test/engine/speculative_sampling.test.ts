/**
 * The CPU side of speculative sampling: the processed distributions agree
 * with the sampler's reference (same draw for the same u), and rejection
 * sampling reproduces the target distribution (chi-square over the joint of
 * two emitted tokens), while a sampler that skips the rejection step fails
 * the same test (the test has power).
 */
import { describe, expect, it } from 'vitest';
import { sampleRef, uniform01 } from '../../core/ops/sample.ref.ts';
import { drawFrom, processedProbs, verifyGreedy, verifySampled, type Verdict } from '../../core/engine/speculative_sampling.ts';
import { validateSampling, type SamplingParams } from '../../core/sampling/params.ts';
import { randn, rng } from '../helpers/gpu.ts';

describe('processedProbs', () => {
  it('draws what the sampler reference draws for the same u', () => {
    const V = 97;
    const cases: Partial<SamplingParams>[] = [{ temperature: 1 }, { temperature: 0.7, topK: 5 }, { temperature: 1.3, topP: 0.8 }, { temperature: 0.9, minP: 0.05 }, { temperature: 0.5, topK: 20, topP: 0.9, minP: 0.01 }];
    let n = 0;
    cases.forEach((c, ci) => {
      for (let t = 0; t < 20; t++) {
        const logits = randn(V, 100 * ci + t, 2);
        const params = validateSampling({ ...c, seed: 17 + t });
        const p = processedProbs(logits, params);
        expect(p.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12);
        for (let step = 0; step < 10; step++) {
          const ref = sampleRef(logits, V, [{ params, step }])[0]!;
          expect(drawFrom(p, uniform01(params.seed, step))).toBe(ref);
          n++;
        }
      }
    });
    expect(n).toBe(1000);
  });
});

describe('verifyGreedy', () => {
  it('emits the target ids up to and including the first mismatch', () => {
    expect(verifyGreedy([5, 6, 7], [5, 6, 9, 1])).toEqual({ tokens: [5, 6, 9], accepted: 2 });
    expect(verifyGreedy([5, 6, 7], [5, 6, 7, 1])).toEqual({ tokens: [5, 6, 7, 1], accepted: 3 });
    expect(verifyGreedy([5], [4, 1])).toEqual({ tokens: [4], accepted: 0 });
  });
});

/** Normalised softmax of random logits over V, with some ids masked out (probability 0). */
function dist(V: number, seed: number, zeros: number[] = []): Float64Array {
  const l = randn(V, seed, 1.2);
  const p = new Float64Array(V);
  let S = 0;
  for (let v = 0; v < V; v++) if (!zeros.includes(v)) S += p[v] = Math.exp(l[v]!);
  for (let v = 0; v < V; v++) p[v]! /= S;
  return p;
}

/**
 * N sequences of two tokens with context-free target rows p[0], p[1] (so the
 * target's joint is p0 x p1): one round of k = 2 drafts from q, then, if the
 * round emitted one token, a plain draw of the second from p[1].
 */
function joint(p: Float64Array[], q: Float64Array[], N: number, verify: (d: number[], r: () => number) => Verdict): Float64Array {
  const V = p[0]!.length;
  const counts = new Float64Array(V * V);
  const r = rng(12345);
  for (let n = 0; n < N; n++) {
    const drafts = [drawFrom(q[0]!, r()), drawFrom(q[1]!, r())];
    const v = verify(drafts, r);
    const t1 = v.tokens.length >= 2 ? v.tokens[1]! : drawFrom(p[1]!, r());
    counts[v.tokens[0]! * V + t1]!++;
  }
  return counts;
}

function chiSquare(counts: Float64Array, expected: Float64Array): { stat: number; df: number } {
  let stat = 0;
  let df = -1;
  for (let i = 0; i < counts.length; i++) {
    if (expected[i]! === 0) {
      if (counts[i]! > 0) stat = Infinity; // a token the target never emits
      continue;
    }
    stat += (counts[i]! - expected[i]!) ** 2 / expected[i]!;
    df++;
  }
  return { stat, df };
}

/** Upper 0.1% point of chi-square with df degrees of freedom (Wilson–Hilferty). */
function chiCritical(df: number): number {
  const z = 3.09;
  return df * (1 - 2 / (9 * df) + z * Math.sqrt(2 / (9 * df))) ** 3;
}

describe('verifySampled', () => {
  const V = 8;
  // Target and draft differ noticeably; the target has an id the draft never proposes (q = 0) and vice versa.
  const p = [dist(V, 1, [7]), dist(V, 2), dist(V, 3)];
  const q = [dist(V, 4, [3]), dist(V, 5, [0])];
  const N = 60_000;
  const expected = new Float64Array(V * V);
  for (let a = 0; a < V; a++) for (let b = 0; b < V; b++) expected[a * V + b] = N * p[0]![a]! * p[1]![b]!;

  it('emits tokens distributed as the target (chi-square on the joint of two tokens)', () => {
    let accepted = 0;
    const counts = joint(p, q, N, (d, r) => {
      const v = verifySampled(d, q, p, r);
      accepted += v.accepted;
      return v;
    });
    const { stat, df } = chiSquare(counts, expected);
    expect(df).toBeGreaterThan(40);
    expect(stat).toBeLessThan(chiCritical(df));
    // Some drafts are accepted and some rejected.
    expect(accepted / (2 * N)).toBeGreaterThan(0.2);
    expect(accepted / (2 * N)).toBeLessThan(0.95);
  });

  it('a verifier that accepts every draft fails the same test', () => {
    const counts = joint(p, q, N, (d) => ({ tokens: [...d], accepted: d.length }));
    const { stat, df } = chiSquare(counts, expected);
    expect(stat).toBeGreaterThan(chiCritical(df));
  });

  it('with q = p every draft is accepted', () => {
    const r = rng(9);
    let acc = 0;
    for (let n = 0; n < 1000; n++) acc += verifySampled([drawFrom(p[0]!, r()), drawFrom(p[1]!, r())], [p[0]!, p[1]!], p, r).accepted;
    expect(acc).toBe(2000);
  });
});
