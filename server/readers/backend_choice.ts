/**
 * What `auto` means for a decoder reader on Node. Dawn's own order is: a hardware GPU, else
 * SwiftShader (Vulkan), else OpenGL ES. On a CPU-only host a decoder runs ~3x faster on
 * OpenGL ES (Mesa llvmpipe: the decode megakernel reads weights and KV through textures;
 * docs/benchmarks.md), so a decoder reader whose weights fit llvmpipe's limits takes it.
 * Larger models keep SwiftShader: llvmpipe binds at most 128 MiB per storage buffer (SwiftShader
 * 1 GiB), and past its loop budget the megakernel is off anyway. Encoder readers keep `auto`.
 */
import type { ModelSource } from '../../core/formats/source.ts';
import { hasHardwareAdapter } from '../../core/gpu/device.ts';

/**
 * Weight bytes on disk up to which `auto` puts a decoder on OpenGL ES on a CPU-only host. f16 /
 * bf16 files double when the megakernel packs them as f32, so 32 MiB on disk keeps the packed
 * buffer within 64 MiB: half of llvmpipe's 128 MiB storage binding. (stories260K: 1 MiB; the 24M
 * bench model, 92 MiB of f32, stays on SwiftShader unless asked.)
 */
export const AUTO_OPENGLES_MAX_WEIGHT_BYTES = 32 * 2 ** 20;

const WEIGHT_FILE = /\.(safetensors|gguf|bin)$/i;

/** Bytes of the model's weight files (safetensors shards, GGUF, bin), or null when the source cannot list its files. */
export async function weightBytes(ms: ModelSource): Promise<number | null> {
  if (!ms.list) return null;
  let total = 0;
  for (const f of (await ms.list()).filter((p) => WEIGHT_FILE.test(p))) total += (await ms.open(f)).size;
  return total;
}

/**
 * The backend to open a decoder reader on: `requested` when it names one; `opengles` for an
 * `auto` request on a host without a hardware GPU when the weights are within
 * AUTO_OPENGLES_MAX_WEIGHT_BYTES; else undefined (Dawn's `auto`, or WEFT_GPU_BACKEND when set).
 */
export async function decoderBackend(
  requested: string | undefined,
  ms: ModelSource,
  env: Record<string, string | undefined> = process.env,
  hardware: () => Promise<boolean> = hasHardwareAdapter,
): Promise<string | undefined> {
  if (requested && requested !== 'auto') return requested;
  const forced = env.WEFT_GPU_BACKEND;
  if (forced && forced !== 'auto') return undefined;
  if (await hardware()) return undefined;
  const bytes = await weightBytes(ms).catch(() => null);
  return bytes !== null && bytes > 0 && bytes <= AUTO_OPENGLES_MAX_WEIGHT_BYTES ? 'opengles' : undefined;
}
