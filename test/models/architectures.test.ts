/**
 * Golden tests for the four decoder architectures (Llama with llama3 rope
 * scaling, Mistral with a sliding window shorter than the prompt, Qwen2 with
 * q/k/v biases and tied embeddings, Qwen3 with q/k norms and head_dim !=
 * hidden/heads). Fixtures and goldens come from an independent PyTorch
 * implementation of the transformers modeling code, in float64
 * (scripts/golden/make_decoders.py; test/fixtures/decoders/<arch>/).
 *
 * Checked per fixture: the plain-TypeScript reference (LlamaReference) and,
 * per test backend, the GPU model loaded by loadDecoder in f32, f16 and q8_0:
 *
 *  - logits of all 12 prompt positions in one ragged step, against the golden:
 *      f32:  max |diff| <= 1e-4 * max|golden|      (max|golden| is 20-29 here)
 *      f16:  max |diff| <= 5e-3 * max|golden|      (f16 weight rounding)
 *      q8_0: max |diff| <= 5e-2 * max|golden|      (8-bit weight rounding)
 *    and f16 / q8_0 additionally against the plain-TS reference run on the
 *    same rounded weights (dequantize(encodeWeight(w))), at the f32 tolerance:
 *    that isolates the kernels from the quantization noise. (Observed ~1e-5,
 *    except f16 on SwiftShader/Vulkan: 1e-4..4.4e-4, because the matmul's
 *    f16 decode (bits -> f32 x 2^-112) turns f16-subnormal weights into f32
 *    subnormals, which that backend flushes to zero; with those weights zeroed
 *    in the reference the difference is ~1e-5 again.)
 *  - greedy continuation of 8 tokens through engine.complete (prefill + 7
 *    decode steps over the paged KV cache, crossing the 16-token block and,
 *    for Mistral, sliding the window) equals the golden ids exactly (the
 *    goldens' smallest top-1/top-2 gap is >= 0.08, far above f32 noise); then
 *    the same prompt batched with a longer one whose first KV block comes
 *    from the prefix cache, both still on the golden trajectory.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDecoderConfig, type DecoderConfig } from '../../core/formats/hf_config.ts';
import { loadDecoder } from '../../core/api/load_decoder.ts';
import { dequantize, encodeWeight } from '../../core/ops/quant.ts';
import type { DType } from '../../core/gpu/tensor.ts';
import { gpuFor, TEST_BACKENDS } from '../helpers/gpu.ts';
import {
  absMax,
  allPositionLogits,
  DECODER_FIXTURES,
  FIXTURE_CONTEXT,
  VARIANT_FIXTURES,
  fixtureDir,
  fixtureSource,
  getter,
  goldenLogits,
  hfTensors,
  maxAbsDiff,
  readGolden,
  referenceRun,
  type DecoderFixture,
} from '../helpers/tiny_decoder.ts';

/** Tolerances as a fraction of the largest |golden logit|. */
const TOL = { f32: 1e-4, f16: 5e-3, q8_0: 5e-2 } as const;

/** What each fixture must parse to: the feature it exists to test. */
const EXPECT_CONFIG: Record<DecoderFixture, Partial<DecoderConfig>> = {
  llama: {
    architecture: 'LlamaForCausalLM',
    headDim: 8,
    tieEmbeddings: true,
    slidingWindow: null,
    ropeScaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 128 },
  },
  mistral: { architecture: 'MistralForCausalLM', headDim: 8, slidingWindow: 6, tieEmbeddings: false, ropeScaling: null },
  qwen2: { architecture: 'Qwen2ForCausalLM', headDim: 8, attentionBias: true, tieEmbeddings: true, slidingWindow: null, qkNorm: false },
  qwen3: { architecture: 'Qwen3ForCausalLM', headDim: 16, qkNorm: true, attentionBias: false, tieEmbeddings: false, slidingWindow: null },
  gemma2: {
    architecture: 'Gemma2ForCausalLM',
    headDim: 16,
    hiddenAct: 'gelu_pytorch_tanh',
    tieEmbeddings: true,
    normAddOne: true,
    sandwichNorms: true,
    embedScale: Math.fround(Math.sqrt(32)),
    attnScale: 1 / Math.sqrt(24),
    attnSoftcap: 2,
    finalSoftcap: 15,
    slidingWindow: 6,
    slidingLayers: [true, false],
  },
  gemma3: {
    architecture: 'Gemma3ForCausalLM',
    headDim: 16,
    qkNorm: true,
    normAddOne: true,
    sandwichNorms: true,
    ropeTheta: 1000000,
    ropeScaling: { type: 'linear', factor: 8 },
    localRope: { theta: 10000, scaling: null },
    slidingWindow: 6,
    slidingLayers: [true, false],
  },
  phi3: { architecture: 'Phi3ForCausalLM', headDim: 8, fusedProjections: true, slidingWindow: 2047, tieEmbeddings: false },
};

/** Observed errors, printed at the end (for the record; assertions are per test). */
const observed: string[] = [];
afterAll(() => {
  if (observed.length) console.info(`decoder golden errors (max |diff|, fraction of max|golden|):\n  ${observed.join('\n  ')}`);
});

/** HF tensors with every matrix rounded through a GPU weight dtype, as WeightUploader stores them. */
function roundedTensors(src: Map<string, { shape: number[]; data: Float32Array }>, dtype: DType): Map<string, { shape: number[]; data: Float32Array }> {
  const out = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const [n, t] of src) {
    if (t.shape.length !== 2) {
      out.set(n, t);
      continue;
    }
    const [rows, cols] = t.shape as [number, number];
    out.set(n, { shape: t.shape, data: dequantize(dtype, encodeWeight(t.data, rows, cols, dtype), rows, cols) });
  }
  return out;
}

describe.each([...DECODER_FIXTURES, ...VARIANT_FIXTURES])('%s fixture', (arch) => {
  const golden = readGolden(arch);
  const maxContext = FIXTURE_CONTEXT[arch];
  const ctxOpt = maxContext !== undefined ? { maxContext } : {};
  const expected = goldenLogits(golden);
  const scale = absMax(expected);
  const [T, V] = golden.logits_shape;
  let cfg: DecoderConfig;
  let tensors: Map<string, { shape: number[]; data: Float32Array }>;

  beforeAll(async () => {
    cfg = parseDecoderConfig(readFileSync(`${fixtureDir(arch)}/config.json`, 'utf8'));
    tensors = await hfTensors(fixtureSource(arch));
  });

  it('golden and config are what the test expects', () => {
    expect(golden.version).toBe(1);
    expect(golden.architecture).toBe(EXPECT_CONFIG[arch].architecture);
    expect(golden.logits.length).toBe(T);
    expect(golden.prompt_ids.length).toBe(T);
    expect(golden.greedy.length).toBe(8);
    expect(cfg).toMatchObject({ ...EXPECT_CONFIG[arch], hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2, vocabSize: V });
  });

  it('plain-TypeScript reference matches the golden logits and greedy ids', () => {
    const r = referenceRun(cfg, getter(tensors), golden.prompt_ids, 8, maxContext);
    const err = maxAbsDiff(r.logits, expected);
    observed.push(`${arch} reference (CPU f32): ${err.toExponential(2)} (${(err / scale).toExponential(2)})`);
    expect(err).toBeLessThanOrEqual(TOL.f32 * scale);
    expect(r.greedy).toEqual(golden.greedy);
  });

  if (golden.logits_long_last) {
    const longLast = Float32Array.from(golden.logits_long_last);
    it('longrope: with a context beyond the original one the long factors apply (reference and GPU)', async () => {
      const r = referenceRun(cfg, getter(tensors), golden.prompt_ids, 0);
      const err = maxAbsDiff(r.lastLogits, longLast);
      expect(err).toBeLessThanOrEqual(TOL.f32 * absMax(longLast));
      // ... and they differ from the short-factor golden by far more than the tolerance.
      expect(maxAbsDiff(longLast, expected.subarray((T - 1) * V))).toBeGreaterThan(0.1);
      const ctx = await gpuFor(TEST_BACKENDS[0]!);
      const d = await loadDecoder(ctx, fixtureSource(arch), { dtype: 'f32' });
      try {
        expect(d.model.maxContext).toBeGreaterThan(64);
        const logits = await allPositionLogits(d, golden.prompt_ids);
        expect(maxAbsDiff(logits.subarray((T - 1) * V), longLast)).toBeLessThanOrEqual(TOL.f32 * absMax(longLast));
      } finally {
        d.destroy();
      }
    });
  }

  if (arch === 'gemma2' || arch === 'phi3') {
    it('embedding and LM head split by rows (a vocabulary over the binding limit) give the same logits', async () => {
      const ctx = await gpuFor(TEST_BACKENDS[0]!);
      // 512 x 32 f32 rows = 64 KiB; a 20,000-byte limit makes 4 parts of 156 rows (the last 44).
      const d = await loadDecoder(ctx, fixtureSource(arch), { dtype: 'f32', maxTensorBytes: 20_000, ...ctxOpt });
      try {
        expect(d.weights.embedParts?.map((t) => t.shape[0])).toEqual([156, 156, 156, 44]);
        expect(d.weights.headParts?.length).toBe(4);
        expect(d.model.megakernelOff).not.toBeNull();
        const err = maxAbsDiff(await allPositionLogits(d, golden.prompt_ids), expected);
        expect(err).toBeLessThanOrEqual(TOL.f32 * scale);
        const r = await d.engine.complete(golden.prompt_ids, { maxNewTokens: 8, sampling: { temperature: 0 }, ignoreEos: true });
        expect(r.tokenIds).toEqual(golden.greedy);
      } finally {
        d.destroy();
      }
    });
  }

  describe.each(TEST_BACKENDS)('on WebGPU (%s)', (backend) => {
    it('f32: logits of every prompt position match the golden; greedy continuation matches', async () => {
      const ctx = await gpuFor(backend);
      const d = await loadDecoder(ctx, fixtureSource(arch), { dtype: 'f32', ...ctxOpt });
      try {
        expect(d.format).toBe('safetensors');
        const logits = await allPositionLogits(d, golden.prompt_ids);
        const err = maxAbsDiff(logits, expected);
        observed.push(`${arch} ${backend} f32: ${err.toExponential(2)} (${(err / scale).toExponential(2)})`);
        expect(err).toBeLessThanOrEqual(TOL.f32 * scale);
        const r = await d.engine.complete(golden.prompt_ids, { maxNewTokens: 8, sampling: { temperature: 0 }, ignoreEos: true });
        expect(r.tokenIds).toEqual(golden.greedy);
        expect(r.finishReason).toBe('length');
        // Batched and prefix-cached: the golden prompt again, alongside the prompt extended
        // by 5 greedy tokens (17 tokens: its first 16-token block is in the prefix cache from
        // the run above), which must continue with the remaining 3 golden ids.
        const ext = [...golden.prompt_ids, ...golden.greedy.slice(0, 5)];
        const opts = { sampling: { temperature: 0 }, ignoreEos: true };
        const [a, b] = await Promise.all([
          d.engine.complete(golden.prompt_ids, { ...opts, maxNewTokens: 8 }),
          d.engine.complete(ext, { ...opts, maxNewTokens: 3 }),
        ]);
        expect(a.tokenIds).toEqual(golden.greedy);
        expect(b.tokenIds).toEqual(golden.greedy.slice(5));
        expect(b.usage.cachedTokens).toBe(16);
      } finally {
        d.destroy();
      }
    });

    it.each(['f16', 'q8_0'] as const)('%s weights: logits within the dtype tolerance of the golden, and exact on the rounded weights', async (dtype) => {
      const ctx = await gpuFor(backend);
      const d = await loadDecoder(ctx, fixtureSource(arch), { dtype, ...ctxOpt });
      try {
        // Every matrix really is stored in `dtype` (all inner dims are multiples of 32).
        expect(d.weights.layers[0]!.down.w.dtype).toBe(dtype);
        expect(d.weights.embed.dtype).toBe(dtype);
        const logits = await allPositionLogits(d, golden.prompt_ids);
        const err = maxAbsDiff(logits, expected);
        const ref = referenceRun(cfg, getter(roundedTensors(tensors, dtype)), golden.prompt_ids, 0, maxContext);
        const errRounded = maxAbsDiff(logits, ref.logits);
        observed.push(
          `${arch} ${backend} ${dtype}: vs golden ${err.toExponential(2)} (${(err / scale).toExponential(2)}), ` +
            `vs reference on ${dtype}-rounded weights ${errRounded.toExponential(2)}`,
        );
        expect(err).toBeLessThanOrEqual(TOL[dtype] * scale);
        expect(errRounded).toBeLessThanOrEqual(TOL.f32 * scale);
      } finally {
        d.destroy();
      }
    });
  });
});
