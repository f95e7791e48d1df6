/**
 * Per-adapter choices of the decode megakernel (core/ops/decode_megakernel.ts megakernelTuning):
 * llvmpipe gets texture weights, KV and scratch; both CPU emulators get 8-invocation
 * workgroups of 8 columns per invocation and no batch cap; hardware adapters keep buffers,
 * 32 invocations of 16 columns and the 2-sequence auto cap; the weight-source override (WEFT_MEGAKERNEL_WEIGHTS) is read by the server (test/server/gpu_settings.test.ts) and rejects
 * unknown values with invalid_config. `auto`'s size bound follows the weight source: 64 MiB
 * from a storage buffer, one weight texture (2,048 texels x the 2D limit) from a texture.
 */
import { describe, expect, it } from 'vitest';
import { isLlvmpipe, isSwiftShader } from '../../core/gpu/device.ts';
import {
  MEGAKERNEL_AUTO_MAX_SEQS,
  MEGAKERNEL_AUTO_MAX_WEIGHT_BYTES,
  MEGAKERNEL_FIXED_SMEM_BYTES,
  MEGAKERNEL_LLVMPIPE_WAVE_CHUNK_TOKENS,
  MEGAKERNEL_MAX_WG,
  MEGAKERNEL_WAVE_CHUNK_TOKENS,
  megakernelRows,
  megakernelSmem,
  megakernelTuning,
  megakernelWeightCap,
} from '../../core/ops/decode_megakernel.ts';

const LLVMPIPE = { name: 'OpenGL version OpenGL ES 3.2 Mesa 22.3.6', device: 'llvmpipe-llvm-15-0-6-256-bits-' };
const SWIFTSHADER = { name: 'SwiftShader driver 5.0.0', device: 'SwiftShader Device (Subzero)' };
const HARDWARE = { name: 'NVIDIA GeForce RTX 4090', device: '' };

describe('megakernelTuning', () => {
  it('recognises llvmpipe by its device or name string only', () => {
    expect(isLlvmpipe(LLVMPIPE)).toBe(true);
    expect(isLlvmpipe({ name: 'llvmpipe (LLVM 15.0.6, 256 bits)', device: '' })).toBe(true);
    expect(isLlvmpipe(SWIFTSHADER)).toBe(false);
    expect(isLlvmpipe(HARDWARE)).toBe(false);
    expect(isSwiftShader(SWIFTSHADER)).toBe(true);
    expect(isSwiftShader({ name: '', device: 'SwiftShader Device (LLVM 10.0.0)' })).toBe(true);
    expect(isSwiftShader(LLVMPIPE)).toBe(false);
    expect(isSwiftShader(HARDWARE)).toBe(false);
  });

  it('puts weights, KV and activations in textures on llvmpipe, buffers elsewhere', () => {
    expect(megakernelTuning(LLVMPIPE)).toMatchObject({ weights: 'texture', kv: 'texture', scratch: 'texture', autoMaxSeqs: Infinity });
    expect(megakernelTuning(SWIFTSHADER)).toMatchObject({ weights: 'buffer', kv: 'buffer', scratch: 'workgroup', autoMaxSeqs: Infinity });
    expect(megakernelTuning(HARDWARE)).toMatchObject({ weights: 'buffer', kv: 'buffer', scratch: 'workgroup', autoMaxSeqs: MEGAKERNEL_AUTO_MAX_SEQS });
    // An explicit weight source wins; on a hardware adapter texture weights lift the batch cap.
    expect(megakernelTuning(LLVMPIPE, 'buffer')).toMatchObject({ weights: 'buffer', kv: 'texture', autoMaxSeqs: Infinity });
    expect(megakernelTuning(SWIFTSHADER, 'texture')).toMatchObject({ weights: 'texture', kv: 'buffer', autoMaxSeqs: Infinity });
    expect(megakernelTuning(HARDWARE, 'texture')).toMatchObject({ weights: 'texture', autoMaxSeqs: Infinity });
  });

  it('lets llvmpipe with texture weights put up to 256 chunk tokens through waves, every other shape 64', () => {
    expect(megakernelTuning(LLVMPIPE).waveChunkTokens).toBe(MEGAKERNEL_LLVMPIPE_WAVE_CHUNK_TOKENS);
    expect(MEGAKERNEL_LLVMPIPE_WAVE_CHUNK_TOKENS).toBe(256);
    for (const t of [megakernelTuning(LLVMPIPE, 'buffer'), megakernelTuning(SWIFTSHADER), megakernelTuning(SWIFTSHADER, 'texture'), megakernelTuning(HARDWARE), megakernelTuning(HARDWARE, 'texture')]) {
      expect(t.waveChunkTokens).toBe(MEGAKERNEL_WAVE_CHUNK_TOKENS);
    }
    expect(MEGAKERNEL_WAVE_CHUNK_TOKENS).toBe(64);
  });

  it('runs one 8-lane block of 8 columns per invocation on the CPU emulators, 32 x 16 elsewhere', () => {
    expect(megakernelTuning(LLVMPIPE)).toMatchObject({ wg: 8, octs: 1 });
    expect(megakernelTuning(SWIFTSHADER)).toMatchObject({ wg: 8, octs: 1 });
    expect(megakernelTuning(HARDWARE)).toMatchObject({ wg: 32, octs: 2 });
  });

  it('puts steps of up to 4 sequences in one workgroup, larger ones in at least two of at most 4 rows', () => {
    const cfg = { hiddenSize: 64, heads: 8, kvHeads: 4, headDim: 8, intermediateSize: 172 };
    const big = 1 << 20;
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 64].map((S) => megakernelRows(cfg, S, big))).toEqual([1, 2, 3, 4, 3, 3, 4, 4, 4, 4, 4]);
    // Workgroup memory bounds the rows: room for two rows' activations only, besides `red`
    // and the fused argmax's per-(row, invocation) maxima and ids at the largest workgroup.
    expect(MEGAKERNEL_FIXED_SMEM_BYTES).toBe(16 + 2 * 4 * 4 * MEGAKERNEL_MAX_WG);
    const two = 2 * megakernelSmem(cfg).vec4s * 16 + MEGAKERNEL_FIXED_SMEM_BYTES;
    expect(megakernelRows(cfg, 4, two)).toBe(2);
    expect(megakernelRows(cfg, 16, two)).toBe(2);
    expect(megakernelRows(cfg, 4, two - 1)).toBe(1);
  });

  it('bounds auto by 64 MiB for buffer weights and by one 2048-texel-wide texture for texture weights', () => {
    expect(MEGAKERNEL_AUTO_MAX_WEIGHT_BYTES).toBe(64 * 2 ** 20);
    expect(megakernelWeightCap({ maxTextureDimension2D: 16384 }, 'buffer')).toBe(64 * 2 ** 20);
    expect(megakernelWeightCap({ maxTextureDimension2D: 16384 }, 'texture')).toBe(512 * 2 ** 20);
    expect(megakernelWeightCap({ maxTextureDimension2D: 8192 }, 'texture')).toBe(256 * 2 ** 20);
  });
});
