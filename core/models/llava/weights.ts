/**
 * LLaVA checkpoint names -> the names the Llama and CLIP loaders read. Two
 * layouts exist: transformers < 4.52 (`language_model.model.*`,
 * `language_model.lm_head.weight`, `vision_tower.*`, `multi_modal_projector.*`)
 * and the newer one (`model.language_model.*`, `lm_head.weight`,
 * `model.vision_tower.*`, `model.multi_modal_projector.*`).
 */
import { ModelFormatError } from '../../errors.ts';
import type { WeightSource } from '../host_tensor.ts';

export interface LlavaNames {
  /** The text model as a plain Llama checkpoint (`model.*`, `lm_head.weight`). */
  text: WeightSource;
  /** Prefix of the CLIP vision model tensors (ends with `vision_model.`). */
  vision: string;
  /** Prefix of linear_1 / linear_2. */
  projector: string;
}

export function llavaNames(src: WeightSource): LlavaNames {
  const newer = src.has('model.language_model.embed_tokens.weight');
  if (!newer && !src.has('language_model.model.embed_tokens.weight')) throw new ModelFormatError('LLaVA checkpoint without language_model embeddings');
  const map = (n: string): string => {
    if (n.startsWith('model.')) return newer ? `model.language_model.${n.slice(6)}` : `language_model.${n}`;
    if (n === 'lm_head.weight') return newer ? n : `language_model.${n}`;
    return n;
  };
  return {
    text: { has: (n) => src.has(map(n)), load: (n) => src.load(map(n)) },
    vision: newer ? 'model.vision_tower.vision_model.' : 'vision_tower.vision_model.',
    projector: newer ? 'model.multi_modal_projector.' : 'multi_modal_projector.',
  };
}
