/**
 * Scheduler tests with a fake runner: the "model" deterministically predicts
 * next = (sum of all previous tokens) % 97, so outputs can be checked exactly
 * whatever the batching, chunking or preemption.
 */
import { describe, expect, it } from 'vitest';
import { KvCacheManager } from '../../core/engine/kv_cache.ts';
import { Scheduler, type SchedSeq, type SeqOutput, type StepPlan } from '../../core/engine/scheduler.ts';

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
    const out = new Map<string, SeqOutput>();
    for (const p of plan.scheduled) {
      if (!p.sample) continue;
      out.set(p.seq.id, { tokens: [fakeNext(p.seq.tokens)], finished: p.seq.tokens.length + 1 - prompts.get(p.seq.id)! >= n });
    }
    s.updateFromOutput(plan, out);
  }
  return plans;
}

/**
 * As `run`, with speculative decoding: each decoding sequence asks for `k`
 * draft tokens from `draft` (a guess that may be wrong), the fake target
 * verifies them greedily, and the scheduler applies what it accepted.
 */
function runSpeculative(s: Scheduler, seqs: SchedSeq[], n: number, k: number, draft: (tokens: readonly number[], k: number) => number[]): { plans: StepPlan[]; accepted: number } {
  const plans: StepPlan[] = [];
  let accepted = 0;
  const prompts = new Map(seqs.map((q) => [q.id, q.tokens.length]));
  for (let guard = 0; s.hasWork && guard < 10_000; guard++) {
    const plan = s.schedule();
    const allowed = s.draftAllowance(plan, new Map(plan.scheduled.map((p) => [p.seq.id, Math.min(k, n - (p.seq.tokens.length - prompts.get(p.seq.id)!) - 1)])));
    s.attachDrafts(plan, new Map([...allowed].map(([id, m]) => [id, draft(seqs.find((q) => q.id === id)!.tokens, m)])));
    expect(plan.tokens).toBeLessThanOrEqual(s.cfg.maxTokensPerStep);
    plans.push(plan);
    const out = new Map<string, SeqOutput>();
    for (const p of plan.scheduled) {
      if (!p.sample) continue;
      // The fake target's greedy prediction after each fed position, drafts included.
      const fed = [...p.seq.tokens, ...(p.draft ?? [])];
      const tokens: number[] = [];
      for (let i = 0; i <= (p.draft?.length ?? 0); i++) {
        const t = fakeNext(fed.slice(0, p.seq.tokens.length + i));
        tokens.push(t);
        if (t !== p.draft?.[i]) break;
      }
      accepted += tokens.length - 1;
      const room = n - (p.seq.tokens.length - prompts.get(p.seq.id)!);
      const kept = tokens.slice(0, room);
      out.set(p.seq.id, { tokens: kept, finished: kept.length === room });
    }
    s.updateFromOutput(plan, out);
  }
  return { plans, accepted };
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
    s.updateFromOutput(first, new Map([['a', { tokens: [9] }]]));
    expect(a.tokens).toEqual([1, 2, 3, 9]);
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
    s.updateFromOutput(p, new Map());
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

  it('speculative decoding: drafts within the budget, accepted or rejected, never change the output', () => {
    const prompts = [[1, 2, 3], Array.from({ length: 17 }, (_, i) => i % 7), [5]];
    // Right for the first two draft tokens, then wrong: every round accepts some and rejects some.
    const draft = (tokens: readonly number[], m: number): number[] => {
      const t = [...tokens];
      const out: number[] = [];
      for (let i = 0; i < m; i++) out.push(i < 2 ? fakeNext(t.concat(out)) : (fakeNext(t.concat(out)) + 1) % 97);
      return out;
    };
    for (const budget of [4, 9, 64]) {
      const kv = new KvCacheManager(128, 4);
      const s = new Scheduler({ maxTokensPerStep: budget, maxSeqs: 3, maxContext: 512, maxLogitRows: 8 }, kv);
      const seqs = prompts.map((p, i) => seq(`s${i}`, [...p]));
      seqs.forEach((q) => s.add(q));
      const { plans, accepted } = runSpeculative(s, seqs, 12, 4, draft);
      seqs.forEach((q, i) => expect(q.tokens).toEqual(expected(prompts[i]!, 12)));
      expect(accepted).toBeGreaterThan(0);
      expect(plans.some((p) => p.scheduled.some((x) => x.draft))).toBe(true);
      for (const p of plans) {
        const rows = p.scheduled.reduce((n, x) => n + (x.sample ? 1 + (x.draft?.length ?? 0) : 0), 0);
        expect(rows).toBeLessThanOrEqual(8);
      }
      expect(kv.freeCount).toBe(128);
    }
  });

  it('keeps only committed positions of a verification entry: rejected drafts never reach the prefix cache', () => {
    const kv = new KvCacheManager(32, 4);
    const s = new Scheduler({ maxTokensPerStep: 32, maxSeqs: 2, maxContext: 64, maxLogitRows: 8 }, kv);
    const a = seq('a', [1, 2, 3, 4, 5, 6]);
    s.add(a);
    s.updateFromOutput(s.schedule(), new Map([['a', { tokens: [7] }]]));
    const plan = s.schedule();
    expect(s.draftAllowance(plan, new Map([['a', 5]]))).toEqual(new Map([['a', 5]]));
    expect(s.attachDrafts(plan, new Map([['a', [8, 9, 10, 11, 12]]]))).toEqual(new Map([['a', 5]]));
    expect(plan.scheduled[0]).toMatchObject({ start: 6, count: 6, draft: [8, 9, 10, 11, 12] });
    expect(plan.tokens).toBe(6);
    expect(kv.blockTable('a')).toHaveLength(3); // 12 positions
    // Accepted 8 and 9, rejected 10: the target's own token there is 20.
    s.updateFromOutput(plan, new Map([['a', { tokens: [8, 9, 20] }]]));
    expect(a.tokens).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 20]);
    expect(a.computed).toBe(9);
    expect(kv.blockTable('a')).toHaveLength(3); // 9 positions
    s.finish(a);
    // A new prompt that shares the committed tokens reuses two full blocks; one with the rejected draft would not match.
    const b = seq('b', [1, 2, 3, 4, 5, 6, 7, 8, 9, 20]);
    s.add(b);
    s.schedule();
    expect(b.cachedTokens).toBe(8);
    const c = seq('c', [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
    s.add(c);
    s.schedule();
    expect(c.cachedTokens).toBe(8);
  });

  it('rejects step output that contradicts the plan', () => {
    const kv = new KvCacheManager(32, 4);
    const s = new Scheduler({ maxTokensPerStep: 32, maxSeqs: 2, maxContext: 64, maxLogitRows: 8 }, kv);
    const a = seq('a', Array.from({ length: 20 }, (_, i) => i));
    s.add(a);
    const partial = new Scheduler({ maxTokensPerStep: 8, maxSeqs: 2, maxContext: 64 }, new KvCacheManager(32, 4));
    const b = seq('b', Array.from({ length: 20 }, (_, i) => i));
    partial.add(b);
    expect(() => partial.updateFromOutput(partial.schedule(), new Map([['b', { tokens: [1] }]]))).toThrow(/could take 0/);
    s.updateFromOutput(s.schedule(), new Map([['a', { tokens: [3] }]]));
    const plan = s.schedule();
    s.attachDrafts(plan, new Map([['a', [4, 5]]]));
    expect(() => s.updateFromOutput(plan, new Map([['a', { tokens: [4, 6, 7] }]]))).toThrow(/not the verified draft/);
  });

  it('finishes sequences from the output and counts teacher-forced prompt tokens as prefill', () => {
    const kv = new KvCacheManager(16, 4);
    const s = new Scheduler({ maxTokensPerStep: 16, maxSeqs: 2, maxContext: 64 }, kv);
    const a = seq('a', [1]);
    const b = seq('b', [2, 3]);
    s.add(a);
    s.add(b);
    const plan = s.schedule();
    const before = s.counters.prefillTokens;
    const done = s.updateFromOutput(plan, new Map([['a', { tokens: [4], prompt: true }], ['b', { tokens: [5], finished: true }]]));
    expect(done).toEqual([b]);
    expect(b.state).toBe('finished');
    expect(s.running).toEqual([a]);
    expect(s.counters.prefillTokens - before).toBe(1);
    expect(a.tokens).toEqual([1, 4]);
    expect(kv.blockTable('b')).toHaveLength(0);
  });

  it('grants no drafts beyond the token budget or to entries that are not decoding', () => {
    const kv = new KvCacheManager(64, 4);
    const s = new Scheduler({ maxTokensPerStep: 10, maxSeqs: 3, maxContext: 64, maxLogitRows: 6 }, kv);
    const a = seq('a', [1, 2]);
    const b = seq('b', [3, 4]);
    s.add(a);
    s.add(b);
    s.updateFromOutput(s.schedule(), new Map([['a', { tokens: [5] }], ['b', { tokens: [6] }]]));
    const c = seq('c', Array.from({ length: 6 }, (_, i) => i));
    s.add(c);
    const plan = s.schedule(); // a: 1, b: 1, c: 6 (prefill) = 8 tokens, 3 sampling rows
    expect(plan.tokens).toBe(8);
    // 2 tokens left in the budget, 3 rows: a gets 2, b none, c is prefilling.
    expect(s.draftAllowance(plan, new Map([['a', 4], ['b', 4], ['c', 4]]))).toEqual(new Map([['a', 2]]));
  });
});
