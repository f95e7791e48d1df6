/**
 * Per-adapter choices of the decode megakernel (core/ops/decode_megakernel.ts megakernelTuning):
 * llvmpipe gets texture weights, KV and scratch and no batch cap; other adapters keep buffers
 * and the 2-sequence auto cap; WEFT_MEGAKERNEL_WEIGHTS overrides the weight source and rejects
 * unknown values with invalid_config.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { WeftError } from '../../core/errors.ts';
import { isLlvmpipe, MEGAKERNEL_AUTO_MAX_SEQS, megakernelTuning, megakernelWeightsFromEnv } from '../../core/ops/decode_megakernel.ts';

const LLVMPIPE = { name: 'OpenGL version OpenGL ES 3.2 Mesa 22.3.6', device: 'llvmpipe-llvm-15-0-6-256-bits-' };
const SWIFTSHADER = { name: 'SwiftShader driver 5.0.0', device: 'SwiftShader Device (Subzero)' };

describe('megakernelTuning', () => {
  const saved = process.env.WEFT_MEGAKERNEL_WEIGHTS;
  afterEach(() => {
    if (saved === undefined) delete process.env.WEFT_MEGAKERNEL_WEIGHTS;
    else process.env.WEFT_MEGAKERNEL_WEIGHTS = saved;
  });

  it('recognises llvmpipe by its device or name string only', () => {
    expect(isLlvmpipe(LLVMPIPE)).toBe(true);
    expect(isLlvmpipe({ name: 'llvmpipe (LLVM 15.0.6, 256 bits)', device: '' })).toBe(true);
    expect(isLlvmpipe(SWIFTSHADER)).toBe(false);
    expect(isLlvmpipe({ name: 'NVIDIA GeForce RTX 4090', device: '' })).toBe(false);
  });

  it('puts weights, KV and activations in textures on llvmpipe, buffers elsewhere', () => {
    expect(megakernelTuning(LLVMPIPE)).toMatchObject({ weights: 'texture', kv: 'texture', scratch: 'texture', autoMaxSeqs: Infinity });
    expect(megakernelTuning(SWIFTSHADER)).toMatchObject({ weights: 'buffer', kv: 'buffer', scratch: 'workgroup', autoMaxSeqs: MEGAKERNEL_AUTO_MAX_SEQS });
    // An explicit weight source wins; buffer weights bring the batch cap back.
    expect(megakernelTuning(LLVMPIPE, 'buffer')).toMatchObject({ weights: 'buffer', autoMaxSeqs: MEGAKERNEL_AUTO_MAX_SEQS });
    expect(megakernelTuning(SWIFTSHADER, 'texture')).toMatchObject({ weights: 'texture', kv: 'buffer', autoMaxSeqs: Infinity });
  });

  it('reads WEFT_MEGAKERNEL_WEIGHTS and refuses unknown values', () => {
    delete process.env.WEFT_MEGAKERNEL_WEIGHTS;
    expect(megakernelWeightsFromEnv()).toBe('auto');
    process.env.WEFT_MEGAKERNEL_WEIGHTS = 'texture';
    expect(megakernelWeightsFromEnv()).toBe('texture');
    process.env.WEFT_MEGAKERNEL_WEIGHTS = 'textures';
    let err: unknown;
    try {
      megakernelWeightsFromEnv();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(WeftError);
    expect((err as WeftError).code).toBe('invalid_config');
    expect((err as Error).message).toMatch(/auto, buffer, texture/);
  });
});
