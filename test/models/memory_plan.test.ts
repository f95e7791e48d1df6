/**
 * The device memory plan (core/models/memory_plan.ts, decoder_plan.ts) on fake adapter
 * descriptions: budget precedence, KV pool sized from what the budget leaves (no 256 MiB or
 * 8 GiB ceiling), the binding-size bound, refusals with the numbers, and the weight
 * estimate from checkpoint headers for each file type.
 */
import { describe, expect, it } from 'vitest';
import { ModelTooLargeError } from '../../core/errors.ts';
import { parseDecoderConfig } from '../../core/formats/hf_config.ts';
import { planDecoderMemory, tensorDeviceBytes } from '../../core/models/decoder_plan.ts';
import { DEFAULT_BUDGET, deviceBudget, planMemory, reserveFor, type AdapterDescription } from '../../core/models/memory_plan.ts';

const GiB = 2 ** 30;
const H100: AdapterDescription = { name: 'NVIDIA H100', software: false, f16: true, maxBufferSize: 2 ** 40, maxStorageBufferBindingSize: 2 ** 32 - 4, probedMemory: 79 * GiB };
const LAPTOP: AdapterDescription = { name: 'Intel Iris', software: false, f16: true, maxBufferSize: 2 ** 31, maxStorageBufferBindingSize: 2 ** 27 };
const SWIFT: AdapterDescription = { name: 'SwiftShader', software: true, f16: false, maxBufferSize: 2 ** 32, maxStorageBufferBindingSize: 2 ** 31 };

/** Llama-3-8B's config (the published one). */
const LLAMA3_8B = parseDecoderConfig({
  architectures: ['LlamaForCausalLM'], hidden_size: 4096, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 8,
  intermediate_size: 14336, vocab_size: 128256, max_position_embeddings: 8192, rms_norm_eps: 1e-5, rope_theta: 500000, tie_word_embeddings: false,
});

describe('device budget', () => {
  it('prefers the configured size, then reported, then probed, then the default', () => {
    expect(deviceBudget(H100, 40 * GiB)).toEqual({ bytes: 40 * GiB, source: 'configured' });
    expect(deviceBudget({ ...H100, reportedMemory: 80 * GiB })).toEqual({ bytes: 80 * GiB, source: 'reported' });
    expect(deviceBudget(H100)).toEqual({ bytes: 79 * GiB, source: 'probed' });
    expect(deviceBudget(LAPTOP)).toEqual({ bytes: DEFAULT_BUDGET.hardware, source: 'default' });
    expect(deviceBudget(SWIFT)).toEqual({ bytes: DEFAULT_BUDGET.software, source: 'default' });
  });
  it('keeps a bounded reserve', () => {
    expect(reserveFor(GiB)).toBe(64 * 2 ** 20);
    expect(reserveFor(80 * GiB)).toBe(GiB);
  });
});

describe('KV pool from the budget', () => {
  const geo = { kvDtype: 'f32' as const, maxTokens: 256, logitRows: 16, maxSeqs: 64, maxContext: 8192, blockSize: 16 };

  it('Llama-3-8B in f16 (16 GB of weights) on an 80 GB card: a pool far past 8 GiB, every sequence at full context', () => {
    const weightBytes = 16.06e9;
    const p = planDecoderMemory({ cfg: LLAMA3_8B, weightBytes, ...geo }, deviceBudget(H100), H100);
    // 32 layers x 8 kv heads x 128 x 4 B x 2 = 256 KiB per token in f32.
    expect(p.kvBytesPerToken).toBe(262144);
    expect(p.kvPoolBytes).toBeGreaterThan(8 * GiB);
    expect(p.totalBytes).toBeLessThanOrEqual(79 * GiB);
    expect(p.weightBytes + p.activationBytes + p.reserveBytes + p.kvPoolBytes).toBe(p.totalBytes);
    // 79 GiB - 16 GB - reserve - activations leaves ~61 GiB: ~240k tokens, 29 full 8k sequences.
    expect(p.kvTokens).toBeGreaterThan(200_000);
    expect(p.fullContextSeqs).toBe(Math.floor(p.kvBlocks / 512));
  });

  it('stops at maxSeqs full contexts when the budget allows more', () => {
    const p = planDecoderMemory({ cfg: LLAMA3_8B, weightBytes: 16e9, ...geo, maxSeqs: 2, maxContext: 1024 }, deviceBudget(H100), H100);
    expect(p.kvBlocks).toBe(2 * 64);
  });

  it('bounds the pool by one storage binding per layer', () => {
    const p = planDecoderMemory({ cfg: LLAMA3_8B, weightBytes: 1e9, ...geo }, deviceBudget(LAPTOP, 64 * GiB), LAPTOP);
    // 128 MiB binding / (8 x 128 x 4 B per token) = 32768 tokens = 2048 blocks.
    expect(p.kvBlocks).toBe(2048);
  });

  it('honours an explicit page cache size, and refuses one that does not fit', () => {
    const ok = planDecoderMemory({ cfg: LLAMA3_8B, weightBytes: 16e9, ...geo, kvCacheBytes: 4 * GiB }, deviceBudget(H100), H100);
    expect(ok.kvPoolBytes).toBe(4 * GiB);
    expect(() => planDecoderMemory({ cfg: LLAMA3_8B, weightBytes: 16e9, ...geo, kvCacheBytes: 70 * GiB }, deviceBudget(H100), H100)).toThrow(/page cache of 71680\.0 MiB does not fit NVIDIA H100/);
  });

  it('refuses a model that does not fit, with every number, as ModelTooLargeError', () => {
    let e: unknown;
    try {
      planDecoderMemory({ cfg: LLAMA3_8B, weightBytes: 16.06e9, ...geo }, deviceBudget(LAPTOP), LAPTOP);
    } catch (x) {
      e = x;
    }
    expect(e).toBeInstanceOf(ModelTooLargeError);
    const err = e as ModelTooLargeError;
    expect(err.code).toBe('model_too_large');
    expect(err.message).toMatch(/does not fit Intel Iris: weights 15316\.0 MiB .* > budget 4096\.0 MiB \(default\)/);
    expect(err.details).toMatchObject({ weightBytes: 16.06e9, budgetBytes: 4 * GiB, budgetSource: 'default' });
  });

  it('a small model on the software default budget', () => {
    const p = planMemory({ weightBytes: 1e6, kvBytesPerToken: 1024, kvBytesPerTokenPerBuffer: 256, activationBytes: 1e6, maxSeqs: 16, maxContext: 512, blockSize: 16 }, deviceBudget(SWIFT), SWIFT);
    expect(p.kvBlocks).toBe(16 * 32);
  });
});

describe('weight bytes from headers', () => {
  it('per file type and target', () => {
    expect(tensorDeviceBytes([4096, 4096], 'BF16', 'auto', 'f16')).toBe(4096 * 4096 * 2);
    expect(tensorDeviceBytes([4096, 4096], 'BF16', 'f32', 'f16')).toBe(4096 * 4096 * 4);
    expect(tensorDeviceBytes([4096], 'BF16', 'auto', 'f16')).toBe(4096 * 4);
    expect(tensorDeviceBytes([4096, 4096], 'Q4_K', 'auto', 'f16')).toBe(4096 * 16 * 144);
    expect(tensorDeviceBytes([4096, 4096], 'Q6_K', 'auto', 'f16')).toBe(4096 * 16 * 212);
    expect(tensorDeviceBytes([4096, 4096], 'Q8_0', 'auto', 'f16')).toBe((4096 * 4096 * 34) / 32); // quants + f16 d: the file's bytes
    expect(tensorDeviceBytes([4096, 4096], 'Q4_0', 'auto', 'f16')).toBe((4096 * 4096 * 18) / 32);
    expect(tensorDeviceBytes([4096, 4096], 'IQ4_XS', 'auto', 'f16')).toBe(4096 * 4096 * 2);
    expect(tensorDeviceBytes([7, 33], 'F16', 'auto', 'f16')).toBe(7 * 17 * 4);
  });
});
