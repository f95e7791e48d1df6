/**
 * Image-to-text golden tests on the tiny LLaVA-1.5 fixture
 * (test/fixtures/decoders/llava_tiny, made by scripts/golden/make_llava.py: an
 * independent plain-PyTorch LLaVA in float64, Pillow for CLIP preprocessing).
 *
 * Checked:
 *  - preprocessing (decode, Pillow-exact bicubic shortest-edge resize, center crop,
 *    normalize) of the two PNGs equals Pillow's pixels to the golden's 6 decimals
 *    (|diff| <= 1e-6: every u8 identical); the JPEG within 2 u8 levels (jpeg-js and
 *    libjpeg round their IDCTs differently), mean |diff| < 0.01;
 *  - per test backend, in f32: the image features (vision tower to layer -2, CLS
 *    dropped, projector) and the logits at every non-image position and at the last
 *    placeholder of each image, with the image rows scattered over the placeholder
 *    embeddings in one ragged step: max |diff| <= 1e-4 * max|golden|;
 *  - the reader end to end (tags in the prompt, PNG bytes, chunked prefill over the
 *    16-token KV blocks) reproduces the 8 golden greedy tokens; the prefix cache reuses
 *    a block only when its images are the same (other second image: 16 tokens reused and
 *    different output; other first image: none), and a repeat reuses 32 tokens and gives
 *    the golden tokens again;
 *  - bad requests: a text-only model (images_not_supported), tag/image count
 *    mismatch, undecodable bytes (invalid_image), `<image>` typed in the text.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalReader } from '../../core/engine/local_reader.ts';
import type { GenerateRequest } from '../../core/engine/reader_api.ts';
import type { GenerationEvent } from '../../core/engine/engine.ts';
import { decodeImage } from '../../core/images/decode.ts';
import { parsePreprocessorConfig, preprocessImage } from '../../core/images/preprocess.ts';
import { loadDecoder, type LoadedDecoder } from '../../core/api/load_decoder.ts';
import type { StepInputs } from '../../core/models/step.ts';
import { dirSource } from '../../server/fs_source.ts';
import { gpuFor, TEST_BACKENDS } from '../helpers/gpu.ts';
import { fixtureSource, maxAbsDiff } from '../helpers/tiny_decoder.ts';

const DIR = fileURLToPath(new URL('../fixtures/decoders/llava_tiny', import.meta.url));

interface LlavaGolden {
  version: number;
  prompt_text: string;
  prompt_ids: number[];
  expanded_ids: number[];
  images: string[];
  logit_rows: number[];
  logits: number[][];
  greedy: number[];
  logit_absmax: number;
  features: number[][];
  pixel_files: string[];
  pixel_values: number[][];
}

const golden = JSON.parse(readFileSync(`${DIR}/golden.json`, 'utf8')) as LlavaGolden;
const bytesOf = (name: string): Uint8Array => new Uint8Array(readFileSync(`${DIR}/${name}`));
const dataUrl = (name: string): string => `data:image/${name.endsWith('.png') ? 'png' : 'jpeg'};base64,${Buffer.from(bytesOf(name)).toString('base64')}`;
/** The golden prompt with image i's tag in place of its i-th `<image>`. */
const promptWith = (urls: string[]): string => {
  let k = 0;
  return golden.prompt_text.replace(/<image>/g, () => `<image:${urls[k++]}>`);
};

async function run(reader: LocalReader, req: GenerateRequest): Promise<Extract<GenerationEvent, { type: 'done' }>> {
  for await (const ev of reader.generate(req)) if (ev.type === 'done') return ev;
  throw new Error('no done event');
}

describe('llava preprocessing', () => {
  const cfg = parsePreprocessorConfig(JSON.parse(readFileSync(`${DIR}/preprocessor_config.json`, 'utf8')), 32);

  it.each([0, 1])('%i: the PNG pixels equal Pillow\'s (CLIPImageProcessor)', async (i) => {
    const img = await decodeImage(bytesOf(golden.pixel_files[i]!));
    const px = preprocessImage(img, cfg);
    expect(px.length).toBe(3 * 32 * 32);
    expect(maxAbsDiff(px, golden.pixel_values[i]!)).toBeLessThanOrEqual(1e-6);
  });

  it('the JPEG (decoded by jpeg-js) is within 2 levels of Pillow / libjpeg', async () => {
    const px = preprocessImage(await decodeImage(bytesOf(golden.pixel_files[2]!)), cfg);
    const g = golden.pixel_values[2]!;
    expect(maxAbsDiff(px, g)).toBeLessThanOrEqual(2.5 / 255 / 0.26);
    const mean = px.reduce((a, v, i) => a + Math.abs(v - g[i]!), 0) / px.length;
    expect(mean).toBeLessThan(0.01);
  });

  it('defaults to CLIP mean/std without a preprocessor config, and rejects other crops', () => {
    const d = parsePreprocessorConfig(null, 336);
    expect(d).toMatchObject({ size: 336, crop: 336, resample: 'bicubic' });
    expect(d.mean[0]).toBeCloseTo(0.48145466, 8);
    expect(() => parsePreprocessorConfig({ crop_size: { height: 224, width: 224 } }, 336)).toThrow(/crop/);
  });

  it('rejects bytes that are neither PNG nor JPEG, and truncated files', async () => {
    await expect(decodeImage(new TextEncoder().encode('GIF89a....'))).rejects.toMatchObject({ code: 'invalid_image' });
    await expect(decodeImage(bytesOf('image_a.png').slice(0, 200))).rejects.toMatchObject({ code: 'invalid_image' });
    await expect(decodeImage(bytesOf('image_c.jpg').slice(0, 300))).rejects.toMatchObject({ code: 'invalid_image' });
  });
});

describe.each(TEST_BACKENDS)('llava_tiny on %s', (backend) => {
  let d: LoadedDecoder;
  let reader: LocalReader;
  const tol = 1e-4 * golden.logit_absmax;

  beforeAll(async () => {
    const ctx = await gpuFor(backend);
    d = await loadDecoder(ctx, dirSource(DIR), { maxSeqs: 4, maxTokensPerStep: 24, prefixCaching: true });
    reader = new LocalReader(d, { readerId: 'llava', model: 'llava_tiny', device: 'test', backend });
  }, 120_000);
  afterAll(() => d?.destroy());

  it('parses as a Llama text model with a CLIP tower, 16 placeholders per image', () => {
    expect(d.cfg).toMatchObject({ architecture: 'LlamaForCausalLM', vocabSize: 513, hiddenSize: 32 });
    expect(d.vision?.tokensPerImage).toBe(16);
    expect(d.vision?.imageTokenId).toBe(512);
    expect(reader.info().imageInput).toBe(true);
  });

  it('image features match the golden (vision tower to layer -2, CLS dropped, projector)', async () => {
    const feats = await d.vision!.encode(golden.pixel_values.slice(0, 2).map((p) => Float32Array.from(p)));
    const want = Float32Array.from(golden.features.flat());
    const scale = Math.max(...want.map(Math.abs));
    expect(maxAbsDiff(feats, want)).toBeLessThanOrEqual(1e-4 * scale);
  });

  it('logits with image rows over the placeholders match the golden in one ragged step', async () => {
    const ids = golden.expanded_ids;
    const T = ids.length;
    const feats = await d.vision!.encode(golden.pixel_values.slice(0, 2).map((p) => Float32Array.from(p)));
    const at = Uint32Array.from(ids.flatMap((t, i) => (t === 512 ? [i] : [])));
    // One step of all T tokens: a copy loaded with a step budget >= T (the reader's copy uses 24-token chunks).
      const big = await loadDecoder(await gpuFor(backend), dirSource(DIR), { maxSeqs: T, maxTokensPerStep: 64 });
      try {
        const inputs: StepInputs = {
          tokens: Uint32Array.from(ids),
          positions: Uint32Array.from(ids, (_, i) => i),
          tokenSeq: new Uint32Array(T),
          slots: Uint32Array.from(ids, (_, i) => i),
          blockTables: Uint32Array.from({ length: big.model.geo.maxBlocksPerSeq }, (_, i) => i),
          numSeqs: 1,
          logitRows: Uint32Array.from(golden.logit_rows),
          embedRows: feats,
          embedAt: at,
        };
        const rec = big.model.ctx.recorder();
        const logits = await big.model.record(rec, inputs);
        const read = rec.readback(logits!);
        rec.submit();
        const got = new Float32Array(await read);
        const diff = maxAbsDiff(got, Float32Array.from(golden.logits.flat()));
        console.info(`llava_tiny ${backend}: logits max |diff| ${diff.toExponential(2)} (${(diff / golden.logit_absmax).toExponential(2)} of max|golden|)`);
        expect(diff).toBeLessThanOrEqual(tol);
        // Without the image rows the logits after the first image are different: the merge matters.
        const rec2 = big.model.ctx.recorder();
        const plain = await big.model.record(rec2, { ...inputs, embedRows: new Float32Array(0), embedAt: new Uint32Array(0) });
        const read2 = rec2.readback(plain!);
        rec2.submit();
        expect(maxAbsDiff(new Float32Array(await read2), got)).toBeGreaterThan(0.1);
      } finally {
        big.destroy();
      }
  }, 120_000);

  it('the reader reproduces the golden greedy tokens from PNG data URLs, with chunked prefill', async () => {
    const images = golden.images.map(bytesOf);
    const done = await run(reader, { prompt: promptWith(golden.images.map(dataUrl)), images, maxNewTokens: 8, sampling: { temperature: 0 } });
    expect(done.tokenIds).toEqual(golden.greedy);
    expect(done.usage.promptTokens).toBe(golden.expanded_ids.length);
  }, 120_000);

  it('prefix caching keys image blocks by image content', async () => {
    // Runs after the golden request ([a, b]) registered its first two 16-token blocks:
    // block 0 = BOS + 15 placeholders of the first image, block 1 = the rest of it, text, and the second image's start.
    const [a, b] = golden.images.map(bytesOf) as [Uint8Array, Uint8Array];
    const prompt = promptWith(['#0', '#1']);
    const greedy = { maxNewTokens: 8, sampling: { temperature: 0 } };
    const aa = await run(reader, { prompt, images: [a, a], ...greedy });
    expect(aa.usage.cachedTokens).toBe(16); // block 0 (image a) is shared; block 1 holds a different second image
    expect(aa.tokenIds).not.toEqual(golden.greedy);
    const ba = await run(reader, { prompt, images: [b, a], ...greedy });
    expect(ba.usage.cachedTokens).toBe(0); // same placeholder ids, other image in block 0: no reuse
    const again = await run(reader, { prompt, images: [a, b], ...greedy });
    expect(again.usage.cachedTokens).toBe(32);
    expect(again.tokenIds).toEqual(golden.greedy);
  }, 120_000);

  it('rejects mismatched tags, bad bytes and a typed <image> token before any event', async () => {
    const [a] = golden.images.map(bytesOf) as [Uint8Array];
    await expect(run(reader, { prompt: 'look <image:#0> and <image:#1>', images: [a], maxNewTokens: 2 })).rejects.toMatchObject({ code: 'image_count_mismatch' });
    await expect(run(reader, { prompt: 'look <image:#0>', images: [new Uint8Array([1, 2, 3, 4])], maxNewTokens: 2 })).rejects.toMatchObject({ code: 'invalid_image' });
    await expect(run(reader, { prompt: 'look <image:#0> <image>', images: [a], maxNewTokens: 2 })).rejects.toMatchObject({ code: 'image_token_in_text' });
    await expect(run(reader, { prompt: 'look <image:#0>', images: [a], maxNewTokens: 2, promptMaxTokens: 8 })).rejects.toMatchObject({ code: 'prompt_too_long' });
  }, 60_000);

  it('a text-only reader answers images_not_supported', async () => {
    const text = await loadDecoder(await gpuFor(backend), fixtureSource('llama'), { maxSeqs: 2, maxTokensPerStep: 16 });
    try {
      const r = new LocalReader(text, { readerId: 't', model: 'llama', device: 'test', backend });
      expect(r.info().imageInput).toBeUndefined();
      await expect(run(r, { prompt: 'a <image:#0>', images: [bytesOf('image_a.png')], maxNewTokens: 2 })).rejects.toMatchObject({ code: 'images_not_supported' });
    } finally {
      text.destroy();
    }
  }, 60_000);
});
