/**
 * What loadDecoder needs to open a LLaVA checkpoint: the parsed config, the
 * text model's weights under plain Llama names, and a loader for the image
 * side (vision tower + projector; preprocessor_config.json when present).
 */
import type { ModelSource } from '../../formats/source.ts';
import type { GpuContext } from '../../gpu/context.ts';
import type { WeightDType, WeightSource } from '../host_tensor.ts';
import { parseLlavaConfig, type LlavaConfig } from './config.ts';
import { LlavaVision } from './vision.ts';
import { llavaNames } from './weights.ts';

export { isLlavaConfig } from './config.ts';

export interface LlavaParts {
  cfg: LlavaConfig;
  /** The language model as a Llama checkpoint. */
  text: WeightSource;
  vision(ctx: GpuContext, dtype: WeightDType): Promise<LlavaVision>;
}

export async function llavaParts(ms: ModelSource, raw: Record<string, unknown>, src: WeightSource): Promise<LlavaParts> {
  const cfg = parseLlavaConfig(raw);
  const names = llavaNames(src);
  const pre = (await ms.exists('preprocessor_config.json')) ? (JSON.parse(await ms.readText('preprocessor_config.json')) as unknown) : null;
  return { cfg, text: names.text, vision: (ctx, dtype) => LlavaVision.load(ctx, cfg, src, names, pre, dtype) };
}
