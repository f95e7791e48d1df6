/**
 * Encoder readers: which kind of reader a model directory makes, and loading
 * an encoder one (embedding model, classifier, cross-encoder) as a
 * LocalEncoderReader. Used by open_reader.ts, so both worker entries (Node
 * worker threads, Web Workers) load encoders the same way.
 *
 * Detection reads config.json only: `architectures[0]` of BertModel /
 * RobertaModel / XLMRobertaModel (embed) or *ForSequenceClassification
 * (classify), or a sentence-transformers modules.json, or an encoder
 * model_type (bert, roberta, xlm-roberta) make an encoder reader; so does an
 * ONNX graph (`onnx/model.onnx`) beside a config that is not a decoder's
 * (*ForCausalLM, *ForConditionalGeneration, *LMHeadModel): the ONNX encoder
 * fallback serves any architecture. Anything else (decoder configs, GGUF files)
 * makes a generative one. A spec's `type` skips detection.
 *
 * Backend: core/models/load_encoder.ts picks Weft's kernels for BERT / RoBERTa /
 * XLM-R safetensors and onnxruntime-web for directories with only an ONNX graph
 * (or an architecture the kernels lack); ONNX readers report backend
 * `onnxruntime-web/<wasm|webgpu>` in their info.
 *
 * Reader settings map onto the encoder: max_batch_size -> inputs per batch
 * (default 32), batch_duration_millis -> longest wait of a partial batch
 * (default 5), max_tokens_per_step -> token slots per GPU pass, max_context ->
 * a lower input limit (tokens), dtype -> GPU weight dtype (native kernels
 * only: an ONNX graph runs in its own dtypes, so dtype other than auto / f32
 * is refused for it).
 */
import { InvalidRequestError } from '../../core/errors.ts';
import { LocalEncoderReader } from '../../core/engine/local_encoder_reader.ts';
import type { ModelSource } from '../../core/formats/source.ts';
import type { GpuContext } from '../../core/gpu/context.ts';
import { chooseEncoderBackend, loadEncoder } from '../../core/models/load_encoder.ts';
import { OnnxEncoderModel } from '../../core/models/onnx_encoder.ts';
import { isUseLiteConfig } from '../../core/models/use/config.ts';
import { configOf, readerTypeOf } from '../../core/api/reader_type.ts';
import { UseLiteModel, type EncoderLike } from '../../core/models/use/model.ts';
import type { ReaderSpec } from './spec.ts';

export { readerTypeOf };

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
  const useLite = !!cfg && isUseLiteConfig(cfg);
  if (!useLite && spec.dtype && spec.dtype !== 'auto' && spec.dtype !== 'f32' && (await chooseEncoderBackend(ms)) === 'onnx') {
    throw new InvalidRequestError('invalid_reader_config', `dtype ${spec.dtype} does not apply to ONNX encoders (${spec.model} runs through onnxruntime-web in the graph's own dtypes)`, { field: 'dtype' });
  }
  const loadOpts = {
    ...(spec.dtype ? { dtype: spec.dtype } : {}),
    ...(spec.maxSeqs ? { maxBatchSize: spec.maxSeqs } : {}),
    ...(spec.batchDurationMillis !== undefined ? { batchDurationMs: spec.batchDurationMillis } : {}),
    ...(spec.maxTokensPerStep ? { maxBatchTokens: spec.maxTokensPerStep } : {}),
    ...(spec.maxContext ? { maxTokens: spec.maxContext } : {}),
  };
  const model: EncoderLike = useLite ? await UseLiteModel.load(ctx, ms, loadOpts) : await loadEncoder(ctx, ms, loadOpts);
  const onnx = model instanceof OnnxEncoderModel ? model : null;
  const device = onnx?.executionProvider === 'wasm' ? 'CPU (onnxruntime-web WASM)' : ctx.gpu.info.name;
  const backend = onnx ? `onnxruntime-web/${onnx.executionProvider}` : ctx.gpu.info.backend;
  try {
    if (type === 'classify' && model.kind !== 'classify') {
      throw new InvalidRequestError('invalid_reader_config', `type classify needs a *ForSequenceClassification model; ${spec.model} is ${model.spec.architecture}`, { field: 'type' });
    }
    if (type === 'embed' && model.kind !== 'embed' && onnx) {
      throw new InvalidRequestError('invalid_reader_config', `type embed needs hidden states; the ONNX graph of ${spec.model} outputs only classifier logits`, { field: 'type' });
    }
    const reader = new LocalEncoderReader(model, { readerId, model: spec.model, device, backend }, type, cfg);
    if (opts.probe) await (type === 'embed' ? reader.embed(['Hello']) : reader.classify(['Hello']));
    return reader;
  } catch (e) {
    model.destroy();
    throw e;
  }
}
