/**
 * Logprobs from the engine equal the log-softmax of the plain-TypeScript
 * reference forward's logits for stories260K, token by token, along the very
 * sequence the GPU sampled (temperature 0.8: the logprobs are the raw model
 * distribution, not the tempered one). Tolerance 2e-3 absolute: the GPU forward
 * and the float64-accumulating reference differ by ~1e-4 in the logits.
 * Prompt logprobs (the prompt teacher-forced one token per step) are checked
 * the same way, position by position.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { parseDecoderConfig } from '../../core/formats/hf_config.ts';
import { openSafetensorsModel, toFloat32 } from '../../core/formats/safetensors.ts';
import type { GenerationEvent } from '../../core/engine/engine.ts';
import { loadDecoder, type LoadedDecoder } from '../../core/api/load_decoder.ts';
import { LlamaReference } from '../../core/models/llama/reference.ts';
import { logSoftmaxRef } from '../../core/ops/logprobs.ref.ts';
import { dirSource } from '../../server/fs_source.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { gpuFor, TEST_BACKENDS } from '../helpers/gpu.ts';

const TOL = 2e-3;

async function reference(): Promise<LlamaReference> {
  const ms = dirSource(DEFAULT_MODEL_DIR);
  const cfg = parseDecoderConfig(await ms.readText('config.json'));
  const st = await openSafetensorsModel(ms);
  const weights = new Map<string, Float32Array>();
  for (const [name, t] of st.tensors) weights.set(name, toFloat32(t.info.dtype, await st.read(name)));
  return new LlamaReference(cfg, (n) => weights.get(n)!);
}

describe('logprobs against the reference forward', () => {
  let loaded: LoadedDecoder | undefined;
  afterAll(() => loaded?.destroy());

  it('sampled-token and top-5 logprobs match log-softmax of the reference logits', async () => {
    const ctx = await gpuFor(TEST_BACKENDS[0]!);
    loaded = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { maxSeqs: 4 });
    const prompt = 'Once upon a time';
    let done: Extract<GenerationEvent, { type: 'done' }> | undefined;
    const streamed: number[] = [];
    for await (const ev of loaded.engine.generate(prompt, { maxNewTokens: 16, sampling: { temperature: 0.8, seed: 5 }, logprobs: 5 })) {
      if (ev.type === 'done') done = ev;
      else streamed.push(ev.logprobs!.logprob);
    }
    expect(done!.logprobs).toHaveLength(done!.tokenIds.length);
    expect(streamed).toEqual(done!.logprobs!.map((l) => l.logprob));
    const ref = await reference();
    let logits = ref.prefill(loaded.engine.promptIds(prompt));
    let belowTop = 0;
    done!.tokenIds.forEach((tok, i) => {
      const lp = done!.logprobs![i]!;
      const want = logSoftmaxRef(logits);
      expect(lp.id).toBe(tok);
      expect(Math.abs(lp.logprob - want[tok]!)).toBeLessThan(TOL);
      expect(lp.bytes).toEqual(Array.from(loaded!.tokenizer.tokenBytes(tok)));
      const order = Array.from(want.keys()).sort((a, b) => want[b]! - want[a]! || a - b);
      expect(lp.top).toHaveLength(5);
      lp.top.forEach((t, j) => {
        expect(Math.abs(t.logprob - want[order[j]!]!)).toBeLessThan(TOL);
        expect(Math.abs(want[t.id]! - t.logprob)).toBeLessThan(TOL); // the id's own logprob (ids may swap on near-ties)
      });
      if (!lp.top.some((t) => t.id === tok)) belowTop++;
      logits = ref.step(tok);
    });
    // Sampling at 0.8 takes tokens outside the top 5 only rarely; the check above covers them too.
    expect(belowTop).toBeLessThan(done!.tokenIds.length);
  });
});

describe('prompt logprobs against the reference forward', () => {
  let loaded: LoadedDecoder | undefined;
  afterAll(() => loaded?.destroy());

  it('each prompt token after the first has the log-softmax of the reference logits at the position before it; generation is unchanged', async () => {
    const ctx = await gpuFor(TEST_BACKENDS[0]!);
    loaded = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { maxSeqs: 4 });
    const prompt = 'Once upon a time, a little dog';
    const opts = { maxNewTokens: 6, sampling: { temperature: 0.8, seed: 9 }, logprobs: 3 };
    const run = async (extra: object): Promise<Extract<GenerationEvent, { type: 'done' }>> => {
      for await (const ev of loaded!.engine.generate(prompt, { ...opts, ...extra })) if (ev.type === 'done') return ev;
      throw new Error('no done');
    };
    const plain = await run({});
    const forced = await run({ promptLogprobs: 3 });
    expect(forced.tokenIds).toEqual(plain.tokenIds);
    expect(forced.text).toBe(plain.text);
    const ids = loaded.engine.promptIds(prompt);
    const plp = forced.promptLogprobs!;
    expect(plp.map((t) => t.id)).toEqual(ids);
    expect(plp[0]!.logprob).toBeNull();
    expect(forced.usage.promptTokens).toBe(ids.length);
    const ref = await reference();
    let logits = ref.prefill(ids.slice(0, 1));
    for (let i = 1; i < ids.length; i++) {
      const want = logSoftmaxRef(logits);
      expect(Math.abs(plp[i]!.logprob! - want[ids[i]!]!)).toBeLessThan(TOL);
      const best = Array.from(want.keys()).sort((a, b) => want[b]! - want[a]! || a - b);
      expect(plp[i]!.top).toHaveLength(3);
      expect(Math.abs(plp[i]!.top[0]!.logprob - want[best[0]!]!)).toBeLessThan(TOL);
      logits = ref.step(ids[i]!);
    }
  });
});
