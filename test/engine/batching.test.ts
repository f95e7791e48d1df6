/**
 * The batched engine on the GPU with stories260K: batch invariance (each of
 * 16 concurrent requests with mixed lengths and parameters yields exactly what
 * it yields alone), prefix reuse (a counter proves only new tokens are
 * computed), cancellation, and the block pool returning to its initial state.
 * Alone, plain greedy requests decode through the megakernel's fused argmax;
 * together, mixed with sampled and penalised rows, through the sampler: their
 * equality also checks one against the other.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GenerateOptions } from '../../core/engine/engine.ts';
import { loadDecoder, type LoadedDecoder } from '../../core/api/load_decoder.ts';
import { dirSource } from '../../server/fs_source.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { gpuFor, TEST_BACKENDS } from '../helpers/gpu.ts';

const PROMPTS = [
  'Once upon a time',
  'The little dog',
  'Lily and Tom went to the park. They',
  'One day',
  'There was a big red ball in the garden. The ball',
  'Tim',
  'The sun was shining and the birds were singing. A girl named Sue',
  'He said',
];

function requestOf(i: number): { prompt: string; opts: GenerateOptions } {
  const prompt = PROMPTS[i % PROMPTS.length]!;
  const sampled = i % 3 === 1;
  return {
    prompt,
    opts: {
      maxNewTokens: 6 + ((i * 5) % 17),
      sampling: sampled ? { temperature: 0.9, topK: 40, topP: 0.95, seed: 1000 + i } : i % 3 === 2 ? { temperature: 0, repetitionPenalty: 1.3 } : { temperature: 0 },
      ...(i % 4 === 3 ? { noRepeatNgramSize: 2 } : {}),
      ...(i % 5 === 4 ? { stop: ['.'] } : {}),
    },
  };
}

describe.each(TEST_BACKENDS)('batched engine on %s', (backend) => {
  let loaded: LoadedDecoder;
  beforeAll(async () => {
    const ctx = await gpuFor(backend);
    // Small token budget and block size so chunked prefill and many blocks are exercised.
    loaded = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { maxSeqs: 16, maxTokensPerStep: 24, blockSize: 4, kvCacheBytes: 2 ** 20 });
  });
  afterAll(() => loaded?.destroy());

  it('16 concurrent requests produce exactly what each produces alone', async () => {
    const { engine } = loaded;
    const free0 = engine.runner.kv.freeCount;
    const alone = [];
    const fused0 = engine.runner.fusedArgmaxSteps;
    for (let i = 0; i < 16; i++) {
      const r = requestOf(i);
      alone.push(await engine.complete(r.prompt, r.opts));
    }
    expect(engine.runner.fusedArgmaxSteps).toBeGreaterThan(fused0);
    const together = await Promise.all(Array.from({ length: 16 }, (_, i) => engine.complete(requestOf(i).prompt, requestOf(i).opts)));
    for (let i = 0; i < 16; i++) {
      expect(together[i]!.tokenIds, `request ${i}`).toEqual(alone[i]!.tokenIds);
      expect(together[i]!.text).toBe(alone[i]!.text);
      expect(together[i]!.finishReason).toBe(alone[i]!.finishReason);
    }
    expect(alone.some((r) => r.finishReason === 'stop')).toBe(true);
    expect(engine.runner.kv.freeCount).toBe(free0);
  });

  it('requests submitted in the same turn share their first step', async () => {
    const { engine } = loaded;
    const runner = engine.runner;
    const step = runner.step.bind(runner);
    const plans: number[] = [];
    runner.step = (plan, rows, o) => {
      plans.push(plan.scheduled.length);
      return step(plan, rows, o);
    };
    try {
      // Four short prompts (2-4 tokens each) fit the 24-token step budget together.
      const prompts = ['One day', 'Tim', 'He said', 'The little dog'];
      const outs = await Promise.all(prompts.map((p) => engine.complete(p, { maxNewTokens: 3, sampling: { temperature: 0 } })));
      expect(plans[0]).toBe(4);
      // Prefill together, then two decode steps of all four: 3 steps in all.
      expect(plans).toEqual([4, 4, 4]);
      for (const o of outs) expect(o.tokenIds).toHaveLength(3);
    } finally {
      runner.step = step;
    }
  });

  it('only steps of plain greedy rows take the fused argmax; it yields the sampler\'s tokens', async () => {
    const { engine } = loaded;
    const runner = engine.runner;
    const step = runner.step.bind(runner);
    let decodeOnly = 0; // steps of one token per sequence: the megakernel's
    runner.step = (plan, rows, o) => {
      if (plan.scheduled.every((s) => s.count === 1)) decodeOnly++;
      return step(plan, rows, o);
    };
    const fusedFor = async (opts: GenerateOptions): Promise<{ fused: number; ids: number[] }> => {
      const before = runner.fusedArgmaxSteps;
      decodeOnly = 0;
      const r = await engine.complete('The little dog', { maxNewTokens: 5, ...opts });
      return { fused: runner.fusedArgmaxSteps - before, ids: r.tokenIds };
    };
    // Tokens 2..5 come from decode steps (token 1 too when the prompt is a prefix-cache hit).
    const greedy = await fusedFor({ sampling: { temperature: 0 } });
    expect(decodeOnly).toBeGreaterThanOrEqual(4);
    expect(greedy.fused).toBe(decodeOnly);
    expect((await fusedFor({ sampling: { temperature: 0, repetitionPenalty: 1.3 } })).fused).toBe(0);
    expect((await fusedFor({ sampling: { temperature: 0.7, seed: 3 } })).fused).toBe(0);
    // A model that never fuses: the same request through the sampler.
    const model = engine.runner.model;
    const fuses = model.fusesArgmax;
    model.fusesArgmax = () => false;
    try {
      const viaSampler = await fusedFor({ sampling: { temperature: 0 } });
      expect(viaSampler.fused).toBe(0);
      expect(viaSampler.ids).toEqual(greedy.ids);
    } finally {
      model.fusesArgmax = fuses;
      runner.step = step;
    }
  });

  it('a record() wrapper that drops argmaxInto fails the request instead of streaming stale ids', async () => {
    const { engine } = loaded;
    const model = engine.runner.model;
    const record = model.record;
    model.record = (rec, s) => record.call(model, rec, s);
    try {
      await expect(engine.complete('Tim', { maxNewTokens: 3, sampling: { temperature: 0 } })).rejects.toThrow(/argmaxInto ignored/);
    } finally {
      model.record = record;
    }
    expect((await engine.complete('Tim', { maxNewTokens: 3, sampling: { temperature: 0 } })).tokenIds).toHaveLength(3);
  });

  it('a request in its admission turn is not counted as queued (stats, the autoscaler)', async () => {
    const { engine } = loaded;
    const stream = engine.generate('Tim', { maxNewTokens: 2, sampling: { temperature: 0 } });
    expect(engine.scheduler.waiting.length).toBe(0);
    await Promise.resolve();
    expect(engine.scheduler.waiting.length).toBe(0);
    let ids: number[] = [];
    for await (const ev of stream) if (ev.type === 'done') ids = ev.tokenIds;
    expect(ids).toHaveLength(2);
    expect(engine.scheduler.waiting.length + engine.scheduler.running.length).toBe(0);
  });

  it('a request sharing a long prefix computes only its new tokens and matches a cold run', async () => {
    const { engine } = loaded;
    const shared = 'Zed the purple frog lived by a quiet pond. Every morning he sang a song to the fish, and one day,';
    const a = await engine.complete(`${shared} she`, { maxNewTokens: 5, sampling: { temperature: 0 } });
    const before = engine.runner.computedTokens;
    const b = await engine.complete(`${shared} the`, { maxNewTokens: 5, sampling: { temperature: 0 } });
    const computed = engine.runner.computedTokens - before;
    const promptLen = b.usage.promptTokens;
    expect(b.usage.cachedTokens).toBeGreaterThanOrEqual(promptLen - 8);
    expect(computed).toBe(promptLen - b.usage.cachedTokens + b.tokenIds.length - 1);
    expect(a.usage.cachedTokens).toBe(0);
    // Cold: a fresh engine without prefix caching gives the same ids.
    const ctx = await gpuFor(backend);
    const cold = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { maxSeqs: 2, prefixCaching: false });
    const c = await cold.engine.complete(`${shared} the`, { maxNewTokens: 5, sampling: { temperature: 0 } });
    cold.destroy();
    expect(b.tokenIds).toEqual(c.tokenIds);
  });

  it('cancellation frees the blocks and ends the stream', async () => {
    const { engine } = loaded;
    const free0 = engine.runner.kv.freeCount;
    const ac = new AbortController();
    const stream = engine.generate('Once upon a time', { maxNewTokens: 200, signal: ac.signal, sampling: { temperature: 0 } });
    const other = engine.complete('The little dog', { maxNewTokens: 10, sampling: { temperature: 0 } });
    let n = 0;
    let reason = '';
    for await (const ev of stream) {
      if (ev.type === 'token' && ++n === 3) ac.abort();
      if (ev.type === 'done') reason = ev.finishReason;
    }
    expect(reason).toBe('cancelled');
    expect(n).toBeLessThan(10);
    expect((await other).tokenIds).toHaveLength(10);
    expect(engine.runner.kv.freeCount).toBe(free0);
  });

  it('breaking out of the stream cancels the request', async () => {
    const { engine } = loaded;
    const free0 = engine.runner.kv.freeCount;
    for await (const ev of engine.generate('Tim', { maxNewTokens: 200, sampling: { temperature: 0 } })) {
      if (ev.type === 'token') break;
    }
    await engine.complete('Tim', { maxNewTokens: 2 }); // lets the loop run a step
    expect(engine.load).toBe(0);
    expect(engine.runner.kv.freeCount).toBe(free0);
  });
});
