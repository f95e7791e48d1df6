/**
 * loadEncoder: one entry point for encoder models (embed / rerank / classify) that picks the
 * backend. Native WGSL kernels (EncoderModel) run BERT / RoBERTa / XLM-R checkpoints with
 * safetensors weights; anything else that ships an ONNX graph (`onnx/model.onnx`, the
 * layout of optimum / transformers.js exports on the Hub) runs through onnxruntime-web
 * (OnnxEncoderModel) behind the same API.
 *
 * Choice: `backend: 'onnx'` forces the ONNX path, `'native'` the kernels. Otherwise native
 * when config.json names a supported architecture and safetensors weights are present
 * (an unsupported feature of a supported architecture, e.g. relative position embeddings,
 * also falls back to ONNX when a graph exists), else ONNX when onnx/model.onnx exists,
 * else the native loader's own error (which names what is supported).
 */
import { UnsupportedModelError } from '../errors.ts';
import type { ModelSource } from '../formats/source.ts';
import type { GpuContext } from '../gpu/context.ts';
import { readEncoderSpec } from './bert/config.ts';
import { EncoderModel, type EncoderLoadOptions } from './bert/encoder.ts';
import { ONNX_MODEL_FILE, OnnxEncoderModel, type OnnxEncoderLoadOptions } from './onnx_encoder.ts';
import type { EncoderLike } from './use/model.ts';

export type EncoderBackend = 'native' | 'onnx';

export interface LoadEncoderOptions extends EncoderLoadOptions, Omit<OnnxEncoderLoadOptions, keyof EncoderLoadOptions> {
  /** Force a backend (default: native when supported, else ONNX). */
  backend?: EncoderBackend;
}

/**
 * What callers of either backend may rely on: EncoderLike (core/models/use/model.ts), the
 * surface readers hold: kind, dims, maxTokens, labels, spec.architecture,
 * spec.cfg.vocabSize, tokenizer, encode, embed, rerank, classify, hiddenStates, destroy.
 */
export type Encoder = EncoderLike;

async function hasSafetensors(ms: ModelSource): Promise<boolean> {
  return (await ms.exists('model.safetensors')) || (await ms.exists('model.safetensors.index.json'));
}

/** Which backend loadEncoder would use for `ms`. */
export async function chooseEncoderBackend(ms: ModelSource, opts: { backend?: EncoderBackend } = {}): Promise<EncoderBackend> {
  if (opts.backend) return opts.backend;
  const onnx = await ms.exists(ONNX_MODEL_FILE);
  if (!(await hasSafetensors(ms))) return onnx ? 'onnx' : 'native';
  if (!onnx) return 'native';
  try {
    await readEncoderSpec(ms);
    return 'native';
  } catch (e) {
    if (e instanceof UnsupportedModelError) return 'onnx';
    throw e;
  }
}

/** Loads an encoder model on the backend chooseEncoderBackend picks (ctx null: ONNX on WASM only). */
export async function loadEncoder(ctx: GpuContext | null, ms: ModelSource, opts: LoadEncoderOptions = {}): Promise<EncoderModel | OnnxEncoderModel> {
  const { backend, executionProviders, file, ort, ...common } = opts;
  if ((await chooseEncoderBackend(ms, backend ? { backend } : {})) === 'native') {
    if (!ctx) throw new UnsupportedModelError(`${ms.name}: native encoder kernels need a GPU context`);
    return EncoderModel.load(ctx, ms, common);
  }
  const { dtype: _dtype, ...rest } = common;
  return OnnxEncoderModel.load(ctx, ms, {
    ...rest,
    ...(executionProviders ? { executionProviders } : {}),
    ...(file ? { file } : {}),
    ...(ort ? { ort } : {}),
  });
}
