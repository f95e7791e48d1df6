/**
 * GPU and decode-path settings read from the environment on the server side (core reads no
 * environment): WEFT_GPU_BACKEND (process-wide default backend), WEFT_KERNEL_VARIANT
 * (`cpu` | `gpu`), WEFT_DECODE_MEGAKERNEL (`auto` | `on` | `off`), WEFT_MEGAKERNEL_WEIGHTS
 * (`auto` | `buffer` | `texture`), WEFT_ATTENTION_KERNEL (`auto` | `paged` | `flash`),
 * WEFT_STEP_GRAPHS (`on` | `off`). They
 * reach core as GpuOptions (GpuContext.create) and LoadOptions.decode (the decode plan,
 * core/models/decode_plan.ts). An unknown value is an invalid_config error.
 */
import { WeftError } from '../core/errors.ts';
import type { GpuOptions } from '../core/gpu/device.ts';
import type { DecodeSettings } from '../core/models/decode_plan.ts';

type Env = Readonly<Record<string, string | undefined>>;

function pick<T extends string>(env: Env, name: string, allowed: readonly T[]): T | undefined {
  const v = env[name];
  if (v === undefined || v === '') return undefined;
  if ((allowed as readonly string[]).includes(v)) return v as T;
  throw new WeftError('invalid_config', `${name} must be one of ${allowed.join(', ')} (got "${v}")`);
}

/** Device options from the environment: the backend (when the caller names none) and the kernel variant. */
export function gpuOptionsFromEnv(backend?: string, env: Env = process.env): GpuOptions {
  const b = backend ?? env.WEFT_GPU_BACKEND;
  const variant = pick(env, 'WEFT_KERNEL_VARIANT', ['cpu', 'gpu'] as const);
  return { ...(b ? { backend: b } : {}), ...(variant ? { variant } : {}) };
}

/** Decode-plan settings from the environment (LoadOptions.decode). */
export function decodeSettingsFromEnv(env: Env = process.env): DecodeSettings {
  const megakernel = pick(env, 'WEFT_DECODE_MEGAKERNEL', ['auto', 'on', 'off'] as const);
  const weights = pick(env, 'WEFT_MEGAKERNEL_WEIGHTS', ['auto', 'buffer', 'texture'] as const);
  const attention = pick(env, 'WEFT_ATTENTION_KERNEL', ['auto', 'paged', 'flash'] as const);
  const graphs = pick(env, 'WEFT_STEP_GRAPHS', ['on', 'off'] as const);
  return {
    ...(megakernel ? { decodeMegakernel: megakernel } : {}),
    ...(weights ? { megakernelWeights: weights } : {}),
    ...(attention ? { attention } : {}),
    ...(graphs ? { stepGraphs: graphs } : {}),
  };
}
