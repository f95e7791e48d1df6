/**
 * CLIP vision tower config (transformers' CLIPVisionConfig), as LLaVA nests it
 * under `vision_config`. Missing fields take CLIPVisionConfig's defaults.
 */
import { ModelFormatError, UnsupportedModelError } from '../../errors.ts';

export interface ClipVisionConfig {
  hiddenSize: number;
  intermediateSize: number;
  heads: number;
  layers: number;
  /** Square input side, pixels. */
  imageSize: number;
  patchSize: number;
  layerNormEps: number;
  /** HF hidden_act: quick_gelu (OpenAI CLIP), gelu, ... */
  hiddenAct: string;
  /** Patches per image: (imageSize / patchSize)^2. */
  patches: number;
}

export function parseClipVisionConfig(json: unknown): ClipVisionConfig {
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw new ModelFormatError('config.json: vision_config must be an object');
  const c = json as Record<string, unknown>;
  if (c.model_type !== undefined && c.model_type !== 'clip_vision_model') {
    throw new UnsupportedModelError(`vision tower ${JSON.stringify(c.model_type)} is not supported (clip_vision_model)`, { visionModelType: c.model_type });
  }
  const int = (k: string, d: number): number => {
    const v = c[k] ?? d;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw new ModelFormatError(`config.json: vision_config.${k} must be a positive integer`);
    return v;
  };
  const hiddenSize = int('hidden_size', 768);
  const heads = int('num_attention_heads', 12);
  const imageSize = int('image_size', 224);
  const patchSize = int('patch_size', 32);
  if (hiddenSize % heads !== 0) throw new ModelFormatError(`vision_config: hidden_size ${hiddenSize} is not a multiple of num_attention_heads ${heads}`);
  if (imageSize % patchSize !== 0) throw new ModelFormatError(`vision_config: image_size ${imageSize} is not a multiple of patch_size ${patchSize}`);
  if (c.num_channels !== undefined && c.num_channels !== 3) throw new UnsupportedModelError('vision_config: only 3-channel images are supported');
  const eps = c.layer_norm_eps ?? 1e-5;
  if (typeof eps !== 'number') throw new ModelFormatError('config.json: vision_config.layer_norm_eps must be a number');
  return {
    hiddenSize,
    intermediateSize: int('intermediate_size', 3072),
    heads,
    layers: int('num_hidden_layers', 12),
    imageSize,
    patchSize,
    layerNormEps: eps,
    hiddenAct: typeof c.hidden_act === 'string' ? c.hidden_act : 'quick_gelu',
    patches: (imageSize / patchSize) ** 2,
  };
}
