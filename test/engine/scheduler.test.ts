/**
 * Scheduler tests with a fake runner: the "model" deterministically predicts
 * next = (sum of all previous tokens) % 97, so outputs can be checked exactly
 * whatever the batching, chunking or preemption.
 */
import { describe, expect, it } from 'vitest';
import { KvCacheManager } from '../../core/engine/kv_cache.ts';
import { Scheduler, type SchedSeq, type StepPlan } from '../../core/engine/scheduler.ts';

function seq(id: string, tokens: number[]): SchedSeq {
  return { id, tokens, computed: 0, salt: '', state: 'waiting', preemptions: 0, cancelled: false };
}

const fakeNext = (tokens: readonly number[]): number => tokens.reduce((a, b) => a + b, 0) % 97;

/** Runs the loop until every sequence produced `n` tokens; returns the plans. */
function run(s: Scheduler, seqs: SchedSeq[], n: number, computed: { tokens: number }): StepPlan[] {
  const plans: StepPlan[] = [];
  const prompts = new Map(seqs.map((q) => [q.id, q.tokens.length]));
  for (let guard = 0; s.hasWork && guard < 10_000; guard++) {
    const plan = s.schedule();
    plans.push(plan);
    computed.tokens += plan.tokens;
    expect(plan.tokens).toBeLessThanOrEqual(s.cfg.maxTokensPerStep);
    expect(plan.scheduled.length).toBeLessThanOrEqual(s.cfg.maxSeqs);
    s.complete(plan);
    for (const p of plan.scheduled) {
      if (!p.sample) continue;
      p.seq.tokens.push(fakeNext(p.seq.tokens));
      if (p.seq.tokens.length - prompts.get(p.seq.id)! >= n) s.finish(p.seq);
    }
  }
  return plans;
}

function expected(prompt: number[], n: number): number[] {
  const t = [...prompt];
  for (let i = 0; i < n; i++) t.push(fakeNext(t));
  return t;
}

describe('Scheduler', () => {
  it('batches decoding and chunks long prompts within the token budget', () => {
    const kv = new KvCacheManager(64, 4);
    const s = new Scheduler({ maxTokensPerStep: 8, maxSeqs: 4, maxContext: 256 }, kv);
    const a = seq('a', [1, 2, 3]);
    const b = seq('b', Array.from({ length: 20 }, (_, i) => i + 5));
    s.add(a);
    s.add(b);
    const first = s.schedule();
    expect(first.scheduled.map((x) => [x.seq.id, x.start, x.count, x.sample])).toEqual([
      ['a', 0, 3, true],
      ['b', 0, 5, false],
    ]);
    s.complete(first);
    a.tokens.push(9);
    const second = s.schedule();
    expect(second.scheduled.map((x) => [x.seq.id, x.start, x.count, x.sample])).toEqual([
      ['a', 3, 1, true],
      ['b', 5, 7, false],
    ]);
  });

  it('produces the same tokens whatever the budget (continuous batching + chunked prefill)', () => {
    const prompts = [[1, 2, 3], Array.from({ length: 37 }, (_, i) => i % 11), [5], Array.from({ length: 12 }, (_, i) => 40 - i)];
    for (const budget of [1, 3, 8, 64]) {
      const kv = new KvCacheManager(128, 4);
      const s = new Scheduler({ maxTokensPerStep: budget, maxSeqs: 3, maxContext: 512 }, kv);
      const seqs = prompts.map((p, i) => seq(`s${i}`, [...p]));
      seqs.forEach((q) => s.add(q));
      run(s, seqs, 10, { tokens: 0 });
      seqs.forEach((q, i) => expect(q.tokens).toEqual(expected(prompts[i]!, 10)));
      expect(kv.freeCount).toBe(128);
    }
  });

  it('admits first-come-first-served and respects the sequence cap', () => {
    const kv = new KvCacheManager(64, 4);
    const s = new Scheduler({ maxTokensPerStep: 100, maxSeqs: 2, maxContext: 64 }, kv);
    ['a', 'b', 'c'].forEach((id) => s.add(seq(id, [1, 2])));
    const plan = s.schedule();
    expect(plan.scheduled.map((x) => x.seq.id)).toEqual(['a', 'b']);
    expect(s.waiting.map((x) => x.id)).toEqual(['c']);
  });

  it('preempts the newest sequence when blocks run out, and outputs do not change', () => {
    const kv = new KvCacheManager(6, 2); // 12 slots for 3 sequences that each grow to 8 tokens
    const s = new Scheduler({ maxTokensPerStep: 16, maxSeqs: 3, maxContext: 64 }, kv);
    const prompts = [[1, 2], [3, 4], [5, 6]];
    const seqs = prompts.map((p, i) => seq(`p${i}`, [...p]));
    seqs.forEach((q) => s.add(q));
    const plans = run(s, seqs, 6, { tokens: 0 });
    expect(plans.some((p) => p.preempted.length > 0)).toBe(true);
    expect(seqs.some((q) => q.preemptions > 0)).toBe(true);
    seqs.forEach((q, i) => expect(q.tokens).toEqual(expected(prompts[i]!, 6)));
    expect(kv.freeCount).toBe(6);
  });

  it('drops cancelled sequences at the next step and frees their blocks', () => {
    const kv = new KvCacheManager(16, 4);
    const s = new Scheduler({ maxTokensPerStep: 16, maxSeqs: 4, maxContext: 64 }, kv);
    const a = seq('a', [1, 2, 3, 4, 5]);
    const b = seq('b', [6, 7]);
    s.add(a);
    s.add(b);
    const p = s.schedule();
    s.complete(p);
    expect(kv.freeCount).toBe(13);
    a.cancelled = true;
    b.cancelled = true;
    const next = s.schedule();
    expect(next.cancelled.map((x) => x.id).sort()).toEqual(['a', 'b']);
    expect(next.scheduled).toHaveLength(0);
    expect(kv.freeCount).toBe(16);
    expect(s.hasWork).toBe(false);
  });

  it('reuses a shared prefix: the second request computes only its new tokens', () => {
    const kv = new KvCacheManager(64, 4);
    const s = new Scheduler({ maxTokensPerStep: 64, maxSeqs: 4, maxContext: 128 }, kv);
    const shared = Array.from({ length: 24 }, (_, i) => (i * 7) % 50);
    const a = seq('a', [...shared, 1]);
    s.add(a);
    const counter = { tokens: 0 };
    run(s, [a], 3, counter);
    expect(counter.tokens).toBe(25 + 2);
    const b = seq('b', [...shared, 2]);
    s.add(b);
    const counter2 = { tokens: 0 };
    run(s, [b], 3, counter2);
    expect(b.cachedTokens).toBe(24);
    expect(counter2.tokens).toBe(1 + 2);
    expect(b.tokens).toEqual(expected([...shared, 2], 3));
  });
});
