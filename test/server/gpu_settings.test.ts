/**
 * GPU and decode-path settings are read from the environment by the server
 * (server/gpu_settings.ts) and reach core as values: unset means the defaults, known values
 * pass through, anything else is an invalid_config error naming the choices.
 */
import { describe, expect, it } from 'vitest';
import { WeftError } from '../../core/errors.ts';
import { decodeSettingsFromEnv, gpuOptionsFromEnv } from '../../server/gpu_settings.ts';

function invalid(fn: () => unknown): WeftError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(WeftError);
    expect((e as WeftError).code).toBe('invalid_config');
    return e as WeftError;
  }
  throw new Error('expected invalid_config');
}

describe('server GPU settings', () => {
  it('unset: no options, so core picks its defaults', () => {
    expect(gpuOptionsFromEnv(undefined, {})).toEqual({});
    expect(decodeSettingsFromEnv({})).toEqual({});
  });
  it('backend: the caller wins over WEFT_GPU_BACKEND; WEFT_KERNEL_VARIANT sets the variant', () => {
    expect(gpuOptionsFromEnv(undefined, { WEFT_GPU_BACKEND: 'opengles', WEFT_KERNEL_VARIANT: 'gpu' })).toEqual({ backend: 'opengles', variant: 'gpu' });
    expect(gpuOptionsFromEnv('swiftshader', { WEFT_GPU_BACKEND: 'opengles' })).toEqual({ backend: 'swiftshader' });
    expect(invalid(() => gpuOptionsFromEnv(undefined, { WEFT_KERNEL_VARIANT: 'fast' })).message).toMatch(/WEFT_KERNEL_VARIANT must be one of cpu, gpu/);
  });
  it('decode settings pass through and unknown values are refused', () => {
    expect(decodeSettingsFromEnv({ WEFT_DECODE_MEGAKERNEL: 'off', WEFT_MEGAKERNEL_WEIGHTS: 'texture', WEFT_ATTENTION_KERNEL: 'paged', WEFT_STEP_GRAPHS: 'off' })).toEqual({
      decodeMegakernel: 'off',
      megakernelWeights: 'texture',
      attention: 'paged',
      stepGraphs: 'off',
    });
    expect(invalid(() => decodeSettingsFromEnv({ WEFT_STEP_GRAPHS: 'false' })).message).toMatch(/WEFT_STEP_GRAPHS must be one of on, off/);
    expect(invalid(() => decodeSettingsFromEnv({ WEFT_MEGAKERNEL_WEIGHTS: 'textures' })).message).toMatch(/auto, buffer, texture/);
    expect(invalid(() => decodeSettingsFromEnv({ WEFT_DECODE_MEGAKERNEL: 'yes' })).message).toMatch(/auto, on, off/);
    expect(invalid(() => decodeSettingsFromEnv({ WEFT_ATTENTION_KERNEL: 'splitk' })).message).toMatch(/auto, paged, flash/);
  });
});
