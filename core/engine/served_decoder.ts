/**
 * What the engine's readers need of a loaded decoder: its engine, config,
 * tokenizer and (image-to-text models) its image encoder. A structural type,
 * so the engine never imports the loader (core/api/load_decoder.ts builds
 * one; tests may build one by hand).
 */
import type { DecoderConfig } from '../formats/hf_config.ts';
import type { LlavaVision } from '../models/llava/vision.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import type { Engine } from './engine.ts';

export interface ServedDecoder {
  cfg: DecoderConfig;
  tokenizer: Tokenizer;
  engine: Engine;
  /** config.json as shipped (GGUF: an HF-style config built from its metadata). */
  rawConfig: Record<string, unknown>;
  /** Image-to-text models (LLaVA): the image encoder; absent for text-only models. */
  vision?: LlavaVision;
}
