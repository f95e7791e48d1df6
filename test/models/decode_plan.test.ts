/**
 * The decode plan (core/models/decode_plan.ts) from fake adapter descriptions: kernels follow
 * features and limits (subgroups, workgroup size and memory), not adapter names; the CPU
 * emulators keep their paths; settings are validated; the plan is immutable.
 */
import { describe, expect, it } from 'vitest';
import { resolveDecodePlan, type PlanAdapter } from '../../core/models/decode_plan.ts';

const limits = { maxComputeInvocationsPerWorkgroup: 1024, maxComputeWorkgroupStorageSize: 32768, maxStorageBufferBindingSize: 2 ** 31, maxTextureDimension2D: 16384 };
const gpu = (over: Partial<PlanAdapter['caps']> = {}, lim: Partial<PlanAdapter['limits']> = {}, name = 'Some GPU'): PlanAdapter => ({
  info: { name, device: '', isCpu: false },
  caps: { f16: true, subgroups: true, ...over },
  limits: { ...limits, ...lim },
});
const swiftshader: PlanAdapter = { info: { name: 'SwiftShader driver 5.0.0', device: 'swiftshader-device-subzero-', isCpu: true }, caps: { f16: false, subgroups: true }, limits: { ...limits, maxComputeInvocationsPerWorkgroup: 256 } };
const llvmpipe: PlanAdapter = { info: { name: 'llvmpipe (LLVM 15.0.6, 256 bits)', device: 'llvmpipe', isCpu: true }, caps: { f16: false, subgroups: false }, limits: { ...limits, maxTextureDimension2D: 8192 } };
const cfg = { headDim: 64 };

describe('resolveDecodePlan', () => {
  it('a GPU with subgroups: sgemv decode, 64x64 prefill tiles, split-K attention, buffers, no megakernel by default', () => {
    const p = resolveDecodePlan(gpu(), cfg, 'f32');
    expect(p.variant).toBe('gpu');
    expect(p.matmul).toEqual({ decode: 'sgemv', prefill: 'tile64' });
    expect(p.attention).toEqual({ decode: 'splitk', prefill: 'tiled', pagedBecause: null, prefillPagedBecause: null });
    expect(p.kv.storage).toBe('buffer');
    expect(p.megakernel.mode).toBe('auto');
    expect(p.megakernel.tuning.weights).toBe('buffer');
    expect(p.megakernel.tuning.scratch).toBe('workgroup');
  });
  it('features and limits decide, not the name', () => {
    expect(resolveDecodePlan(gpu({ subgroups: false }), cfg, 'f32').matmul.decode).toBe('gemv');
    expect(resolveDecodePlan(gpu({}, { maxComputeInvocationsPerWorkgroup: 128 }), cfg, 'f32').matmul.prefill).toBe('tile');
    expect(resolveDecodePlan(gpu({}, { maxComputeWorkgroupStorageSize: 8192 }), cfg, 'f32').matmul.prefill).toBe('tile');
    const renamed = resolveDecodePlan(gpu({}, {}, 'NVIDIA H100'), cfg, 'f32');
    expect(renamed).toEqual(resolveDecodePlan(gpu(), cfg, 'f32'));
  });
  it('the CPU emulators keep the cpu variant and their storage (llvmpipe: textures)', () => {
    const s = resolveDecodePlan(swiftshader, cfg, 'f32');
    expect(s.variant).toBe('cpu');
    expect(s.attention.decode).toBe('paged');
    expect(s.kv.storage).toBe('buffer');
    expect(s.megakernel.tuning.wg).toBe(8);
    const l = resolveDecodePlan(llvmpipe, cfg, 'q8');
    expect(l.megakernel.tuning).toMatchObject({ weights: 'texture', kv: 'texture', scratch: 'texture' });
    expect(l.kv).toEqual({ dtype: 'q8', storage: 'texture' });
    expect(l.matmul).toEqual({ decode: 'gemv', prefill: 'tile64' });
  });
  it('split-K attention falls back to paged where it does not apply, with the reason', () => {
    expect(resolveDecodePlan(gpu(), cfg, 'q8').attention.pagedBecause).toMatch(/KV dtype q8/);
    expect(resolveDecodePlan(gpu(), { headDim: 320 }, 'f32').attention.pagedBecause).toMatch(/head dim 320/);
    const hd256 = resolveDecodePlan(gpu(), { headDim: 256 }, 'f32').attention;
    expect([hd256.decode, hd256.prefill]).toEqual(['splitk', 'paged']);
    expect(hd256.prefillPagedBecause).toMatch(/head dim 256 > 128/);
    expect(resolveDecodePlan(gpu(), cfg, 'f32', { attention: 'paged' }).attention.decode).toBe('paged');
    expect(resolveDecodePlan(swiftshader, cfg, 'f32', { variant: 'gpu' }).attention).toMatchObject({ decode: 'splitk', prefill: 'tiled' });
  });
  it('rope and the KV store fuse into the sgemv epilogue where the plan allows, else say why', () => {
    expect(resolveDecodePlan(gpu(), cfg, 'f32').ropeKv).toEqual({ decode: 'fused', separateBecause: null });
    expect(resolveDecodePlan(gpu(), cfg, 'f16').ropeKv.decode).toBe('fused');
    expect(resolveDecodePlan(gpu({ subgroups: false }), cfg, 'f32').ropeKv.separateBecause).toMatch(/decode matmul gemv/);
    expect(resolveDecodePlan(gpu(), cfg, 'q8').ropeKv.separateBecause).toMatch(/KV dtype q8/);
    expect(resolveDecodePlan(gpu(), { headDim: 20 }, 'f32').ropeKv.separateBecause).toMatch(/head dim 20/);
    expect(resolveDecodePlan(swiftshader, cfg, 'f32').ropeKv.separateBecause).toMatch(/variant cpu/);
    expect(resolveDecodePlan(swiftshader, cfg, 'f32', { variant: 'gpu' }).ropeKv.decode).toBe('fused');
  });
  it('settings are values, validated', () => {
    expect(resolveDecodePlan(gpu(), cfg, 'f32', { decodeMegakernel: 'on', megakernelWeights: 'texture' }).megakernel).toMatchObject({ mode: 'on', tuning: { weights: 'texture' } });
    expect(() => resolveDecodePlan(gpu(), cfg, 'f32', { decodeMegakernel: 'sometimes' as 'on' })).toThrow(/decodeMegakernel must be one of auto, on, off/);
    expect(() => resolveDecodePlan(gpu(), cfg, 'f32', { megakernelWeights: 'textures' as 'texture' })).toThrow(/megakernelWeights/);
    expect(resolveDecodePlan(gpu(), cfg, 'f32').stepGraphs).toBe(true);
    expect(resolveDecodePlan(gpu(), cfg, 'f32', { stepGraphs: 'off' }).stepGraphs).toBe(false);
    expect(() => resolveDecodePlan(gpu(), cfg, 'f32', { stepGraphs: 'no' as 'off' })).toThrow(/stepGraphs must be one of on, off/);
    expect(() => resolveDecodePlan(gpu(), cfg, 'q8', { attention: 'flash' })).toThrow(/flash cannot run this model: KV dtype q8/);
    expect(() => resolveDecodePlan(gpu(), { headDim: 256 }, 'f32', { attention: 'flash' })).toThrow(/head dim 256 > 128/);
  });
  it('is immutable', () => {
    const p = resolveDecodePlan(gpu(), cfg, 'f32');
    expect(Object.isFrozen(p) && Object.isFrozen(p.matmul) && Object.isFrozen(p.attention) && Object.isFrozen(p.megakernel.tuning)).toBe(true);
    expect(() => {
      (p.matmul as { decode: string }).decode = 'gemv';
    }).toThrow();
  });
});
