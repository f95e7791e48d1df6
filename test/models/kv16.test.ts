/**
 * f16 KV cache (`kvCacheDtype: 'f16'`, halves packed two per u32; core/ops/kv_write.ts)
 * against the f32 cache, end to end, on every test backend, through the kernels each
 * variant runs: the cpu variant's paged attention, and the gpu variant's split-K decode
 * and tiled prefill attention (flash kernels reading packed halves):
 *
 *  - `auto`: f16 only where the adapter has shader-f16 and the megakernel does not run the
 *    model (autoKvDtype); the emulators here have no shader-f16, so `auto` stays f32.
 *  - pool sizing: the same byte budget holds twice the blocks.
 *  - stories260K: the prompt + the 64-token greedy reference teacher-forced through both
 *    caches (the f16 model on the generic path: the megakernel reads f32 and q8 rows only);
 *    logits within KV16_TOL_STORIES of the f32 cache and within KV16_TOL_EMULATED of the
 *    CPU reference whose cache rows round to f16; greedy ids at least as far as the
 *    margins guarantee.
 *  - the decoder fixtures (Qwen2 biases, Qwen3 q/k norms, Mistral sliding window, Llama3
 *    rope scaling): all-position logits within KV16_TOL_FIXTURE * max|golden| of the golden.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDecoder, type LoadedDecoder } from '../../core/api/load_decoder.ts';
import { f16ToF32, f32ToF16 } from '../../core/formats/gguf_quants.ts';
import { GpuContext } from '../../core/gpu/context.ts';
import { autoKvDtype } from '../../core/models/load.ts';
import { dirSource } from '../../server/fs_source.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { gpuFor, TEST_BACKENDS } from '../helpers/gpu.ts';
import { compareCaches, describeComparison } from '../helpers/kv_compare.ts';
import { absMax, allPositionLogits, DECODER_FIXTURES, fixtureSource, goldenLogits, maxAbsDiff, readGolden } from '../helpers/tiny_decoder.ts';
import { PROMPT_IDS, REFERENCE_IDS } from './stories260k.fixture.ts';

/**
 * stories260K, max |Δlogit| f16 vs f32 cache over the 64 steps (logit absmax 22): f16 keeps 11
 * bits of each value. Measured 1.7e-2 / 1.8e-2 (SwiftShader / llvmpipe; the q8 cache: 0.72).
 */
const KV16_TOL_STORIES = 0.1;
/**
 * GPU f16 cache vs the CPU reference whose cache rows round to f16: kernel error, plus the odd
 * half that rounds the other way where the GPU's rotated k differs from the float64 reference's
 * in the last f32 bit at a rounding boundary (one f16 step of a K row moves a score by ~1e-3
 * relative; measured 3.1e-3 on both backends).
 */
const KV16_TOL_EMULATED = 1e-2;
/** Fixtures, as a fraction of max|golden|: measured 1.6e-4 (Qwen3) .. 4.4e-4 (Qwen2), the same on both backends. */
const KV16_TOL_FIXTURE = 2e-3;

const observed: string[] = [];
afterAll(() => {
  if (observed.length) console.info(`f16 KV cache vs f32 / golden:\n  ${observed.join('\n  ')}`);
});

/** A cache row through f16 and back (clamped to f16's range, as the shaders store it). */
function f16RoundTrip(x: Float32Array): Float32Array {
  return Float32Array.from(x, (v) => f16ToF32(f32ToF16(Math.max(-65504, Math.min(65504, v)))));
}

describe('auto KV dtype', () => {
  it('is f16 only with shader-f16, a vec4 head dim and no megakernel', () => {
    expect(autoKvDtype({ shaderF16: true, headDim: 128, megakernelRuns: false })).toBe('f16');
    expect(autoKvDtype({ shaderF16: false, headDim: 128, megakernelRuns: false })).toBe('f32');
    expect(autoKvDtype({ shaderF16: true, headDim: 128, megakernelRuns: true })).toBe('f32');
    expect(autoKvDtype({ shaderF16: true, headDim: 6, megakernelRuns: false })).toBe('f32');
  });
});

describe.each(TEST_BACKENDS)('f16 KV cache on %s', (backend) => {
  describe('stories260K', () => {
    let f32: LoadedDecoder | undefined;
    let f16: LoadedDecoder | undefined;
    let auto: LoadedDecoder | undefined;
    beforeAll(async () => {
      const ctx = await gpuFor(backend);
      const opts = { maxSeqs: 2, kvCacheBytes: 2 ** 20 };
      f32 = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { ...opts, kvCacheDtype: 'f32' });
      f16 = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { ...opts, kvCacheDtype: 'f16' });
      auto = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), opts);
    });
    afterAll(() => {
      for (const d of [f32, f16, auto]) d?.destroy();
    });

    it('auto stays f32 on an adapter without shader-f16; f16 halves the block bytes and runs the generic path', async () => {
      const ctx = await gpuFor(backend);
      expect(ctx.gpu.caps.f16).toBe(false);
      expect(auto!.model.kvDtype).toBe('f32');
      expect(f16!.model.kvDtype).toBe('f16');
      expect(f16!.decodePlan.kv.dtype).toBe('f16');
      const f32Block = f32!.model.kvBytes / f32!.geometry.numBlocks;
      expect(f16!.model.kvBytes / f16!.geometry.numBlocks).toBe(f32Block / 2);
      expect(f16!.geometry.numBlocks).toBe(Math.floor(2 ** 20 / (f32Block / 2)));
      expect(f16!.model.kvBytes).toBeLessThanOrEqual(2 ** 20);
      expect(f32!.model.megakernelOff).toBeNull();
      expect(f16!.model.megakernelOff).not.toBeNull(); // (its weights are not packed for it either)
    });

    it('64-token greedy run: logits within tolerance of the f32 cache and of the emulated f16 reference; greedy ids', async () => {
      const c = await compareCaches(f32!, f16!, dirSource(DEFAULT_MODEL_DIR), PROMPT_IDS, REFERENCE_IDS, f16RoundTrip);
      observed.push(describeComparison(`stories260K ${backend}`, 'f16', c, REFERENCE_IDS.length));
      expect(c.vsF32).toBeLessThanOrEqual(KV16_TOL_STORIES);
      expect(c.vsEmulated).toBeLessThanOrEqual(KV16_TOL_EMULATED);
      expect(c.agree).toBeGreaterThanOrEqual(c.guaranteed);
    });
  });

  it('the gpu variant (split-K decode, tiled prefill over packed halves) reproduces the reference ids', async () => {
    const ctx = await GpuContext.create({ backend, variant: 'gpu' });
    const d = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { maxSeqs: 4, kvCacheDtype: 'f16' });
    try {
      expect(d.decodePlan.attention).toMatchObject({ decode: 'splitk', prefill: 'tiled' });
      const r = await d.engine.complete('Once upon a time', { maxNewTokens: 64, sampling: { temperature: 0 } });
      observed.push(`stories260K ${backend} gpu variant: ${r.tokenIds.filter((t, i) => t === REFERENCE_IDS[i]).length}/64 reference ids`);
      expect(r.tokenIds).toEqual(REFERENCE_IDS);
    } finally {
      d.destroy();
      ctx.destroy();
    }
  });

  it.each(DECODER_FIXTURES)('%s fixture: all-position logits within tolerance of the golden', async (arch) => {
    const golden = readGolden(arch);
    const expected = goldenLogits(golden);
    const scale = absMax(expected);
    const ctx = await gpuFor(backend);
    const d = await loadDecoder(ctx, fixtureSource(arch), { dtype: 'f32', kvCacheDtype: 'f16' });
    try {
      const err = maxAbsDiff(await allPositionLogits(d, golden.prompt_ids), expected);
      observed.push(`${arch} ${backend}: vs golden ${err.toExponential(2)} = ${(err / scale).toExponential(2)} of max|golden|`);
      expect(err).toBeLessThanOrEqual(KV16_TOL_FIXTURE * scale);
    } finally {
      d.destroy();
    }
  });
});
