/**
 * Which kind of reader a model makes — text generation, embeddings or a
 * classifier — decided from config.json alone, so the server's reader workers
 * and the library entry (core/api) detect a model the same way.
 *
 * `architectures[0]` of BertModel / RobertaModel / XLMRobertaModel (embed) or
 * *ForSequenceClassification (classify), or a sentence-transformers
 * modules.json, or an encoder model_type (bert, roberta, xlm-roberta) make an
 * encoder; so does an ONNX graph (`onnx/model.onnx`) beside a config that is
 * not a decoder's (*ForCausalLM, *ForConditionalGeneration, *LMHeadModel).
 * Anything else (decoder configs, GGUF files) makes a generative one.
 */
import type { ReaderType } from '../engine/reader_api.ts';
import type { ModelSource } from '../formats/source.ts';
import { ONNX_MODEL_FILE } from '../models/onnx_encoder.ts';
import { isUseLiteConfig } from '../models/use/config.ts';

const ENCODER_BODIES = /^(Bert|Roberta|XLMRoberta)Model$/;
const ENCODER_MODEL_TYPES = new Set(['bert', 'roberta', 'xlm-roberta']);
const DECODER_ARCHITECTURES = /(ForCausalLM|ForConditionalGeneration|LMHeadModel)$/;

/** config.json as an object, or null when absent or not an object (the loader reports format errors). */
export async function configOf(ms: ModelSource): Promise<Record<string, unknown> | null> {
  if (!(await ms.exists('config.json'))) return null;
  try {
    const v: unknown = JSON.parse(await ms.readText('config.json'));
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** The reader type a model makes: `forced` when given, else detected from config.json / modules.json. */
export async function readerTypeOf(ms: ModelSource, forced?: ReaderType): Promise<ReaderType> {
  if (forced) return forced;
  const cfg = await configOf(ms);
  if (!cfg) return 'generate';
  const arch = Array.isArray(cfg.architectures) && typeof cfg.architectures[0] === 'string' ? cfg.architectures[0] : undefined;
  if (isUseLiteConfig(cfg)) return 'embed';
  if (arch?.endsWith('ForSequenceClassification')) return 'classify';
  if (arch && ENCODER_BODIES.test(arch)) return 'embed';
  if (await ms.exists('modules.json')) return 'embed';
  if (!arch && typeof cfg.model_type === 'string' && ENCODER_MODEL_TYPES.has(cfg.model_type)) return 'embed';
  if (!(arch && DECODER_ARCHITECTURES.test(arch)) && (await ms.exists(ONNX_MODEL_FILE))) return 'embed';
  return 'generate';
}
