/**
 * Constraint masks overlap the device's forward: the runner submits a
 * constrained step's forward first and computes the masks while it runs, then
 * records the sampling with them. Checked on a real stories260K engine: at
 * every mask() call this step's tokens are already counted as computed (the
 * forward was recorded and submitted before the mask), every constrained step
 * is counted as overlapped, the greedy output is the one the mask allows, and
 * a mask that throws fails the request without leaving the engine stuck.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LoadedDecoder, loadDecoder } from '../../core/api/load_decoder.ts';
import { constraintCompilerFor } from '../../core/engine/constraints.ts';
import type { GenerationEvent, TokenConstraint } from '../../core/engine/engine.ts';
import { dirSource } from '../../server/fs_source.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { gpuFor } from '../helpers/gpu.ts';

let loaded: LoadedDecoder;
beforeAll(async () => {
  const ctx = await gpuFor(process.env.WEFT_TEST_MODEL_BACKEND ?? 'opengles');
  loaded = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { maxSeqs: 4 });
}, 120_000);
afterAll(() => loaded?.destroy());

async function collect(it: AsyncIterable<GenerationEvent>): Promise<GenerationEvent[]> {
  const out: GenerationEvent[] = [];
  for await (const ev of it) out.push(ev);
  return out;
}

describe('constraint masks overlap the forward', () => {
  it('each mask is computed after its step forward was submitted; the output obeys the constraint', async () => {
    const compile = constraintCompilerFor(loaded.tokenizer, loaded.cfg.vocabSize);
    const inner = compile({ kind: 'regex', pattern: '(cat|dog) (sat|ran)( fast)?' }) as TokenConstraint;
    const runner = loaded.engine.runner;
    const seen: number[] = [];
    const c: TokenConstraint = {
      mask: () => {
        seen.push(runner.computedTokens);
        return inner.mask();
      },
      advance: (t) => inner.advance(t),
      isComplete: () => inner.isComplete(),
      ...(inner.budget ? { budget: (n: number) => inner.budget!(n) } : {}),
      ...(inner.forced ? { forced: () => inner.forced!() } : {}),
    };
    const prompt = loaded.tokenizer.encode('Once upon a time');
    const computed0 = runner.computedTokens;
    const overlapped0 = runner.overlappedMaskSteps;
    const done = (await collect(loaded.engine.generate(prompt, { constraint: c, maxNewTokens: 16, sampling: { temperature: 0 } }))).at(-1) as { text: string; tokenIds: number[] };
    expect(done.text).toMatch(/^(cat|dog) (sat|ran)( fast)?$/);
    const n = done.tokenIds.length;
    expect(seen).toHaveLength(n);
    // Step 0 computes the prompt, step k one token: the mask of step k sees all of them.
    expect(seen).toEqual(Array.from({ length: n }, (_, k) => computed0 + prompt.length + k));
    expect(runner.overlappedMaskSteps - overlapped0).toBe(n);
  }, 120_000);

  it('a mask that throws fails its request; the engine keeps serving', async () => {
    const bad: TokenConstraint = {
      mask: () => {
        throw new Error('broken constraint');
      },
      advance: () => undefined,
      isComplete: () => false,
    };
    const failed = collect(loaded.engine.generate(loaded.tokenizer.encode('Once'), { constraint: bad, maxNewTokens: 4, sampling: { temperature: 0 } }));
    await expect(failed).rejects.toThrow();
    const ok = (await collect(loaded.engine.generate(loaded.tokenizer.encode('Once'), { maxNewTokens: 4, sampling: { temperature: 0 } }))).at(-1) as { tokenIds: number[] };
    expect(ok.tokenIds).toHaveLength(4);
  }, 120_000);
});
