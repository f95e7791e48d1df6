/**
 * stories260K through the GPU decode plan on CPU emulation: a context forced to the `gpu`
 * kernel variant with the megakernel off runs the plan a GPU adapter gets — sgemv (SwiftShader
 * has `subgroups`) or gemv for decode matmuls, 64x64 tiles and tiled flash attention for the
 * prompt, split-K (flash-decoding) attention for decode steps, rope and the KV store in the qkv
 * matmul's epilogue with sgemv — and must reproduce llama2.c's greedy ids.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { GpuContext } from '../../core/gpu/context.ts';
import { type LoadedDecoder, loadDecoder } from '../../core/api/load_decoder.ts';
import { dirSource } from '../../server/fs_source.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { TEST_BACKENDS } from '../helpers/gpu.ts';
import { PROMPT_IDS, REFERENCE_IDS } from './stories260k.fixture.ts';

describe.each(TEST_BACKENDS)('stories260K on the GPU decode plan (%s, gpu variant)', (backend) => {
  let ctx: GpuContext | undefined;
  let loaded: LoadedDecoder | undefined;
  afterAll(() => {
    loaded?.destroy();
    ctx?.destroy();
  });

  it('plans split-K attention and the adapter-chosen matmuls, and reproduces the reference ids', async () => {
    ctx = await GpuContext.create({ backend, variant: 'gpu' });
    loaded = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { maxSeqs: 4, decode: { decodeMegakernel: 'off' } });
    const plan = loaded.decodePlan;
    expect(plan.variant).toBe('gpu');
    expect(plan.attention.decode).toBe('splitk');
    expect(plan.attention.prefill).toBe('tiled');
    expect(plan.matmul.decode).toBe(ctx.gpu.caps.subgroups ? 'sgemv' : 'gemv');
    // With sgemv, rope and the KV store run as the qkv matmul's epilogue on decode steps.
    expect(plan.ropeKv.decode).toBe(ctx.gpu.caps.subgroups ? 'fused' : 'separate');
    expect(loaded.model.megakernelOff).toMatch(/off/);
    expect(loaded.engine.promptIds('Once upon a time')).toEqual(PROMPT_IDS);
    const r = await loaded.engine.complete('Once upon a time', { maxNewTokens: 64, sampling: { temperature: 0 } });
    expect(r.tokenIds).toEqual(REFERENCE_IDS);
    // Decode steps after the first of their shape replay its step graph.
    expect(loaded.model.graphs.replayed).toBeGreaterThan(50);
  });
});
