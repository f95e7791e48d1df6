/**
 * Encoder readers: which kind of reader a model directory makes, and loading
 * an encoder one (embedding model, classifier, cross-encoder) as a
 * LocalEncoderReader. Used by open_reader.ts, so both worker entries (Node
 * worker threads, Web Workers) load encoders the same way.
 *
 * Detection reads config.json only: `architectures[0]` of BertModel /
 * RobertaModel / XLMRobertaModel (embed) or *ForSequenceClassification
 * (classify), or a sentence-transformers modules.json, or an encoder
 * model_type (bert, roberta, xlm-roberta) make an encoder reader; anything
 * else (decoder configs, GGUF files) a generative one. A spec's `type` skips
 * detection.
 *
 * Reader settings map onto the encoder: max_batch_size -> inputs per batch
 * (default 32), batch_duration_millis -> longest wait of a partial batch
 * (default 5), max_tokens_per_step -> token slots per GPU pass, max_context ->
 * a lower input limit (tokens), dtype -> GPU weight dtype.
 */
import { InvalidRequestError } from '../../core/errors.ts';
import { LocalEncoderReader } from '../../core/engine/local_encoder_reader.ts';
import type { ReaderType } from '../../core/engine/reader_api.ts';
import type { ModelSource } from '../../core/formats/source.ts';
import type { GpuContext } from '../../core/gpu/context.ts';
import { EncoderModel } from '../../core/models/bert/encoder.ts';
import { isUseLiteConfig } from '../../core/models/use/config.ts';
import { UseLiteModel, type EncoderLike } from '../../core/models/use/model.ts';
import type { ReaderSpec } from './spec.ts';

const ENCODER_BODIES = /^(Bert|Roberta|XLMRoberta)Model$/;
const ENCODER_MODEL_TYPES = new Set(['bert', 'roberta', 'xlm-roberta']);

async function configOf(ms: ModelSource): Promise<Record<string, unknown> | null> {
  if (!(await ms.exists('config.json'))) return null;
  try {
    const v: unknown = JSON.parse(await ms.readText('config.json'));
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null; // the loader reports the format error
  }
}

/** The reader type a model makes: the spec's `type` when given, else detected from config.json / modules.json. */
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
  return 'generate';
}

/**
 * Loads an encoder reader of `type` on `ctx` (the caller owns the context and
 * releases it on failure). With `probe`, also runs one input, so its kernels
 * have been built and run on this device.
 */
export async function openEncoderReader(
  ctx: GpuContext,
  ms: ModelSource,
  readerId: string,
  spec: ReaderSpec,
  type: 'embed' | 'classify',
  opts: { probe?: boolean } = {},
): Promise<LocalEncoderReader> {
  const cfg = await configOf(ms);
  const load = cfg && isUseLiteConfig(cfg) ? UseLiteModel.load.bind(UseLiteModel) : EncoderModel.load.bind(EncoderModel);
  const model: EncoderLike = await load(ctx, ms, {
    ...(spec.dtype ? { dtype: spec.dtype } : {}),
    ...(spec.maxSeqs ? { maxBatchSize: spec.maxSeqs } : {}),
    ...(spec.batchDurationMillis !== undefined ? { batchDurationMs: spec.batchDurationMillis } : {}),
    ...(spec.maxTokensPerStep ? { maxBatchTokens: spec.maxTokensPerStep } : {}),
    ...(spec.maxContext ? { maxTokens: spec.maxContext } : {}),
  });
  try {
    if (type === 'classify' && model.kind !== 'classify') {
      throw new InvalidRequestError('invalid_reader_config', `type classify needs a *ForSequenceClassification model; ${spec.model} is ${model.spec.architecture}`, { field: 'type' });
    }
    const reader = new LocalEncoderReader(model, { readerId, model: spec.model, device: ctx.gpu.info.name, backend: ctx.gpu.info.backend }, type, cfg);
    if (opts.probe) await (type === 'embed' ? reader.embed(['Hello']) : reader.classify(['Hello']));
    return reader;
  } catch (e) {
    model.destroy();
    throw e;
  }
}
