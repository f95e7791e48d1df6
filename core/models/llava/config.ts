/**
 * LLaVA config (LlavaForConditionalGeneration, LLaVA-1.5 layout): a CLIP
 * `vision_config`, a decoder `text_config` (Llama-family, parsed by
 * parseDecoderConfig), `image_token_index` (or the newer `image_token_id`),
 * `projector_hidden_act`, `vision_feature_layer` (an index into the tower's
 * hidden states: 0 = embeddings after pre_layrnorm, i = after layer i, negative
 * from the end; -2 = all layers but the last) and
 * `vision_feature_select_strategy` ("default" drops the CLS row, "full" keeps it).
 */
import { ModelFormatError, UnsupportedModelError } from '../../errors.ts';
import { parseDecoderConfig, type DecoderConfig } from '../../formats/hf_config.ts';
import type { Act } from '../../ops/activation.ts';
import { encoderAct } from '../bert/forward.ts';
import { parseClipVisionConfig, type ClipVisionConfig } from '../clip/config.ts';

export const LLAVA_ARCHITECTURE = 'LlavaForConditionalGeneration';

export interface LlavaConfig {
  text: DecoderConfig;
  vision: ClipVisionConfig;
  imageTokenId: number;
  projectorAct: Act;
  /** Vision layers to run: the hidden state read is the output of this many layers. */
  visionLayers: number;
  selectStrategy: 'default' | 'full';
  /** Placeholder tokens (= feature rows) per image. */
  tokensPerImage: number;
}

export function isLlavaConfig(raw: Record<string, unknown>): boolean {
  const a = raw.architectures;
  return (Array.isArray(a) && a[0] === LLAVA_ARCHITECTURE) || (a === undefined && raw.model_type === 'llava');
}

const TEXT_ARCH: Record<string, string> = { llama: 'LlamaForCausalLM', mistral: 'MistralForCausalLM', qwen2: 'Qwen2ForCausalLM', qwen3: 'Qwen3ForCausalLM' };

export function parseLlavaConfig(raw: Record<string, unknown>): LlavaConfig {
  const tc = raw.text_config;
  if (!tc || typeof tc !== 'object' || Array.isArray(tc)) throw new ModelFormatError('config.json: LLaVA needs a text_config object');
  const t = { ...(tc as Record<string, unknown>) };
  if (t.architectures === undefined) t.architectures = [TEXT_ARCH[String(t.model_type ?? 'llama')] ?? String(t.model_type)];
  // Older LLaVA configs keep vocab_size at the top level only.
  if (t.vocab_size === undefined && typeof raw.vocab_size === 'number') t.vocab_size = raw.vocab_size;
  if (t.tie_word_embeddings === undefined && typeof raw.tie_word_embeddings === 'boolean') t.tie_word_embeddings = raw.tie_word_embeddings;
  const text = parseDecoderConfig(t);
  const vision = parseClipVisionConfig(raw.vision_config ?? {});
  const tokenId = raw.image_token_index ?? raw.image_token_id ?? 32000;
  if (typeof tokenId !== 'number' || !Number.isInteger(tokenId) || tokenId < 0 || tokenId >= text.vocabSize) {
    throw new ModelFormatError(`config.json: image_token_index ${JSON.stringify(tokenId)} is outside the vocabulary (${text.vocabSize})`);
  }
  const layer = raw.vision_feature_layer ?? -2;
  if (typeof layer !== 'number' || !Number.isInteger(layer)) {
    throw new UnsupportedModelError(`vision_feature_layer ${JSON.stringify(layer)} is not supported (one integer layer index)`, { visionFeatureLayer: layer });
  }
  const visionLayers = layer >= 0 ? layer : vision.layers + 1 + layer;
  if (visionLayers < 0 || visionLayers > vision.layers) throw new ModelFormatError(`vision_feature_layer ${layer} is outside the ${vision.layers}-layer tower`);
  const strategy = raw.vision_feature_select_strategy ?? 'default';
  if (strategy !== 'default' && strategy !== 'full') throw new UnsupportedModelError(`vision_feature_select_strategy ${JSON.stringify(strategy)} is not supported (default, full)`);
  if (raw.multimodal_projector_bias === false) throw new UnsupportedModelError('a projector without biases is not supported');
  return {
    text,
    vision,
    imageTokenId: tokenId,
    projectorAct: encoderAct(typeof raw.projector_hidden_act === 'string' ? raw.projector_hidden_act : 'gelu'),
    visionLayers,
    selectStrategy: strategy,
    tokensPerImage: vision.patches + (strategy === 'full' ? 1 : 0),
  };
}
