/**
 * Speculative decoding on the GPU with stories260K as the target:
 *  - draft = the same model: every draft token is accepted (the counters
 *    prove it) and the output is the plain run's, id for id;
 *  - draft = stories260K quantized to Q4_0 GGUF (same vocabulary, different
 *    logits): drafts get rejected, greedy output is still identical, also for
 *    8 concurrent requests of mixed lengths against solo plain runs;
 *  - both KV pools return to their initial free counts after finishing and
 *    after cancellation; stop strings, EOS and max_new_tokens cut exactly;
 *  - sampled requests run through rejection sampling and stay in the
 *    target's support (the distribution itself: speculative_sampling.test.ts).
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GenerateOptions } from '../../core/engine/engine.ts';
import { draftIncompatibility, Speculator } from '../../core/engine/speculative.ts';
import { hfToGguf } from '../../core/formats/gguf_write.ts';
import { parseDecoderConfig } from '../../core/formats/hf_config.ts';
import type { GpuContext } from '../../core/gpu/context.ts';
import type { LoadOptions } from '../../core/models/load.ts';
import { loadDecoder, type LoadedDecoder } from '../../core/api/load_decoder.ts';
import { dirSource, openModelPath } from '../../server/fs_source.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { attachAssistant } from '../../server/readers/open_assistant.ts';
import { gpuFor, TEST_BACKENDS } from '../helpers/gpu.ts';
import { fixtureDir, hfTensors } from '../helpers/tiny_decoder.ts';

const K = 4;
const GEO: LoadOptions = { maxSeqs: 8, maxTokensPerStep: 64, blockSize: 4, kvCacheBytes: 2 ** 20 };

const PROMPTS = ['Once upon a time', 'The little dog', 'Lily and Tom went to the park. They', 'One day', 'There was a big red ball in the garden. The ball', 'Tim', 'The sun was shining and the birds were singing. A girl named Sue', 'He said'];

let dir: string;
let q4Path: string;
/** The random tiny Llama fixture with two token strings swapped: same size, other vocabulary. */
let swappedDir: string;

/** stories260K written as a GGUF file with 2-D weights in `type` (the existing HF -> GGUF writer). */
async function writeStoriesGguf(out: string, type: 'Q8_0' | 'Q4_0'): Promise<void> {
  const ms = dirSource(DEFAULT_MODEL_DIR);
  const config = parseDecoderConfig(await ms.readText('config.json'));
  const bytes = hfToGguf({ config, tensors: await hfTensors(ms), tokenizer: await ms.readText('tokenizer.json'), tokenizerConfig: JSON.parse(await ms.readText('tokenizer_config.json')), type, name: 'stories260K' });
  writeFileSync(out, bytes);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'weft-spec-'));
  q4Path = join(dir, 'stories260K-q4_0.gguf');
  await writeStoriesGguf(q4Path, 'Q4_0');
  swappedDir = join(dir, 'swapped');
  mkdirSync(swappedDir);
  for (const f of ['config.json', 'model.safetensors', 'tokenizer_config.json']) copyFileSync(join(fixtureDir('llama'), f), join(swappedDir, f));
  const tok = JSON.parse(readFileSync(join(fixtureDir('llama'), 'tokenizer.json'), 'utf8')) as { model: { vocab: Record<string, number> } };
  const byId = Object.fromEntries(Object.entries(tok.model.vocab).map(([s, i]) => [i, s]));
  tok.model.vocab[byId[300]!] = 301;
  tok.model.vocab[byId[301]!] = 300;
  writeFileSync(join(swappedDir, 'tokenizer.json'), JSON.stringify(tok));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function loadTarget(ctx: GpuContext): Promise<LoadedDecoder> {
  return loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { ...GEO, maxLogitRows: GEO.maxSeqs! * (K + 1) });
}

async function loadDraft(ctx: GpuContext, path: string): Promise<LoadedDecoder> {
  return loadDecoder(ctx, await openModelPath(path), { ...GEO, prefixCaching: false });
}

describe.each(TEST_BACKENDS)('speculative decoding on %s', (backend) => {
  let target: LoadedDecoder;
  let same: LoadedDecoder;
  let q4: LoadedDecoder;
  let sameSpec: Speculator;
  let q4Spec: Speculator;

  beforeAll(async () => {
    const ctx = await gpuFor(backend);
    target = await loadTarget(ctx);
    same = await loadDraft(ctx, DEFAULT_MODEL_DIR);
    q4 = await loadDraft(ctx, q4Path);
    sameSpec = new Speculator(same.engine.runner, K);
    q4Spec = new Speculator(q4.engine.runner, K);
  });
  afterAll(() => {
    target?.destroy();
    same?.destroy();
    q4?.destroy();
  });

  async function plain(prompt: string, opts: GenerateOptions) {
    target.engine.setSpeculator(null);
    return target.engine.complete(prompt, opts);
  }

  it('the drafts share the target vocabulary', () => {
    expect(draftIncompatibility({ vocabSize: target.cfg.vocabSize, tokenizer: target.tokenizer }, { vocabSize: q4.cfg.vocabSize, tokenizer: q4.tokenizer })).toBeNull();
  });

  it('a draft with another vocabulary is skipped with the reason, or refused when required', async () => {
    const ctx = await gpuFor(backend);
    target.engine.setSpeculator(null);
    const spec = { model: DEFAULT_MODEL_DIR, consumerGroup: 'primary', assistantModel: swappedDir };
    const info = await attachAssistant(ctx, target, spec, 'test-0');
    expect(info).toMatchObject({ active: false, tokens: 4 });
    expect(info!.reason).toMatch(/token 300 differs/);
    expect(target.engine.speculator).toBeNull();
    await expect(attachAssistant(ctx, target, { ...spec, assistantRequired: true }, 'test-0')).rejects.toThrow(/cannot draft for .*token 300 differs/);
    expect(target.engine.speculator).toBeNull();
  });

  it('draft = target: every draft token is accepted and the output is the plain run', async () => {
    const opts: GenerateOptions = { maxNewTokens: 40, sampling: { temperature: 0 }, ignoreEos: true };
    const ref = await plain(PROMPTS[0]!, opts);
    target.engine.setSpeculator(sameSpec);
    const before = { ...sameSpec.stats };
    const free0 = target.engine.runner.kv.freeCount;
    const draftFree0 = sameSpec.kv.freeCount;
    const computed0 = target.engine.runner.computedTokens;
    const got = await target.engine.complete(PROMPTS[0]!, opts);
    expect(got.tokenIds).toEqual(ref.tokenIds);
    expect(got.text).toBe(ref.text);
    const proposed = sameSpec.stats.proposed - before.proposed;
    const accepted = sameSpec.stats.accepted - before.accepted;
    expect(proposed).toBeGreaterThan(20);
    expect(accepted).toBe(proposed);
    // 40 tokens in rounds of k + 1 = 5: the first comes from prefill, then 39 / 5 -> 8 verification steps.
    expect(target.engine.runner.computedTokens - computed0).toBeLessThan(got.usage.promptTokens + 8 * (K + 1) + 1);
    expect(target.engine.runner.kv.freeCount).toBe(free0);
    expect(sameSpec.kv.freeCount).toBe(draftFree0);
  });

  it('draft = Q4_0 stories260K: rejections happen and greedy output is identical', async () => {
    const opts: GenerateOptions = { maxNewTokens: 60, sampling: { temperature: 0 }, ignoreEos: true };
    const refs = [];
    for (const p of PROMPTS.slice(0, 3)) refs.push(await plain(p, opts));
    target.engine.setSpeculator(q4Spec);
    const before = { ...q4Spec.stats };
    for (let i = 0; i < 3; i++) expect((await target.engine.complete(PROMPTS[i]!, opts)).tokenIds, `prompt ${i}`).toEqual(refs[i]!.tokenIds);
    const proposed = q4Spec.stats.proposed - before.proposed;
    const accepted = q4Spec.stats.accepted - before.accepted;
    expect(accepted).toBeLessThan(proposed);
    expect(accepted).toBeGreaterThan(0);
    console.info(`[${backend}] Q4_0 draft: ${accepted}/${proposed} draft tokens accepted`);
  });

  it('8 concurrent greedy requests of mixed lengths match solo plain runs; pools return to their free counts', async () => {
    const optsOf = (i: number): GenerateOptions => ({
      maxNewTokens: 5 + ((i * 7) % 30),
      sampling: { temperature: 0 },
      ...(i % 4 === 3 ? { stop: ['.'] } : {}),
      ...(i % 3 === 0 ? { ignoreEos: true } : {}),
    });
    const solo = [];
    for (let i = 0; i < 8; i++) solo.push(await plain(PROMPTS[i]!, optsOf(i)));
    target.engine.setSpeculator(q4Spec);
    const free0 = target.engine.runner.kv.freeCount;
    const draftFree0 = q4Spec.kv.freeCount;
    const before = { ...q4Spec.stats };
    const together = await Promise.all(PROMPTS.map((p, i) => target.engine.complete(p, optsOf(i))));
    for (let i = 0; i < 8; i++) {
      expect(together[i]!.tokenIds, `request ${i}`).toEqual(solo[i]!.tokenIds);
      expect(together[i]!.text).toBe(solo[i]!.text);
      expect(together[i]!.finishReason).toBe(solo[i]!.finishReason);
    }
    expect(q4Spec.stats.proposed).toBeGreaterThan(before.proposed);
    expect(target.engine.runner.kv.freeCount).toBe(free0);
    expect(q4Spec.kv.freeCount).toBe(draftFree0);
  });

  it('stop strings, EOS and max_new_tokens cut exactly as in the plain run', async () => {
    target.engine.setSpeculator(null);
    const cases: [string, GenerateOptions][] = [
      [PROMPTS[2]!, { maxNewTokens: 7, sampling: { temperature: 0 }, ignoreEos: true }],
      [PROMPTS[2]!, { maxNewTokens: 1, sampling: { temperature: 0 } }],
      [PROMPTS[4]!, { maxNewTokens: 80, sampling: { temperature: 0 }, stop: ['.'] }],
      [PROMPTS[6]!, { maxNewTokens: 80, sampling: { temperature: 0 }, stop: [' the', 'was'] }],
      [PROMPTS[1]!, { maxNewTokens: 200, sampling: { temperature: 0 } }],
    ];
    const refs = [];
    for (const [p, o] of cases) refs.push(await plain(p, o));
    expect(refs.map((r) => r.finishReason)).toContain('stop');
    for (const spec of [sameSpec, q4Spec]) {
      target.engine.setSpeculator(spec);
      for (let i = 0; i < cases.length; i++) {
        const got = await target.engine.complete(cases[i]![0], cases[i]![1]);
        expect(got.tokenIds, `case ${i}`).toEqual(refs[i]!.tokenIds);
        expect(got.text, `case ${i}`).toBe(refs[i]!.text);
        expect(got.finishReason, `case ${i}`).toBe(refs[i]!.finishReason);
      }
    }
    expect(refs[0]!.tokenIds).toHaveLength(7);
  });

  it('cancellation mid-generation returns every block of both pools', async () => {
    target.engine.setSpeculator(q4Spec);
    const free0 = target.engine.runner.kv.freeCount;
    const draftFree0 = q4Spec.kv.freeCount;
    const ac = new AbortController();
    const stream = target.engine.generate(PROMPTS[5]!, { maxNewTokens: 300, sampling: { temperature: 0 }, ignoreEos: true, signal: ac.signal });
    const other = target.engine.complete(PROMPTS[3]!, { maxNewTokens: 30, sampling: { temperature: 0 }, ignoreEos: true });
    let n = 0;
    let reason = '';
    for await (const ev of stream) {
      if (ev.type === 'token' && ++n === 12) ac.abort();
      if (ev.type === 'done') reason = ev.finishReason;
    }
    expect(reason).toBe('cancelled');
    await other;
    expect(target.engine.runner.kv.freeCount).toBe(free0);
    expect(q4Spec.kv.freeCount).toBe(draftFree0);
  });

  it('sampled requests run with rejection sampling, reproducibly per seed', async () => {
    target.engine.setSpeculator(q4Spec);
    const before = { ...q4Spec.stats };
    const opts: GenerateOptions = { maxNewTokens: 40, sampling: { temperature: 0.8, topK: 40, topP: 0.95, seed: 7 }, ignoreEos: true };
    const a = await target.engine.complete(PROMPTS[0]!, opts);
    const b = await target.engine.complete(PROMPTS[0]!, opts);
    expect(a.tokenIds).toHaveLength(40);
    expect(b.tokenIds).toEqual(a.tokenIds);
    expect(q4Spec.stats.proposed).toBeGreaterThan(before.proposed);
    expect(q4Spec.stats.accepted).toBeGreaterThan(before.accepted);
  });

  it('constrained and penalised requests decode without drafts', async () => {
    target.engine.setSpeculator(q4Spec);
    const before = q4Spec.stats.proposed;
    const opts: GenerateOptions = { maxNewTokens: 10, sampling: { temperature: 0, repetitionPenalty: 1.3 } };
    const got = await target.engine.complete(PROMPTS[1]!, opts);
    expect(q4Spec.stats.proposed).toBe(before);
    expect(got.tokenIds).toEqual((await plain(PROMPTS[1]!, opts)).tokenIds);
  });
});
