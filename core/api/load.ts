/**
 * Loading a model for the engine library: turns what the caller passed as
 * `model` into a ModelSource, opens a WebGPU device, detects the model's kind
 * (core/api/reader_type.ts) and loads it as a LocalReader (text
 * generation) or LocalEncoderReader (embeddings), reporting progress.
 * createEngine wraps the result in a WeftEngine in this thread; the worker
 * handler (worker.ts) serves the same reader across postMessage.
 *
 * Model inputs: a ModelSource; a URL string or URL (http(s), blob, data; file
 * where the runtime's fetch reads files, as Deno's does); a map of
 * model-relative paths to Blob/Uint8Array (Map or plain object); a browser
 * FileSystemDirectoryHandle; or a filesystem path, which needs `openPath`
 * (core stays free of node:* imports: on Node pass server/fs_source.ts's
 * openModelPath, which the Node entry does for you).
 */
import { constraintCompilerFor } from '../engine/constraints.ts';
import { LocalEncoderReader } from '../engine/local_encoder_reader.ts';
import { LocalReader } from '../engine/local_reader.ts';
import type { AnyReaderApi, ReaderType } from '../engine/reader_api.ts';
import { InvalidRequestError } from '../errors.ts';
import { filesSource, type ByteSource, type ModelSource } from '../formats/source.ts';
import { GpuContext } from '../gpu/context.ts';
import type { WeightDType } from '../models/host_tensor.ts';
import { loadDecoder } from './load_decoder.ts';
import { loadEncoder } from '../models/load_encoder.ts';
import { configOf, readerTypeOf } from './reader_type.ts';
import { isUseLiteConfig } from '../models/use/config.ts';
import { UseLiteModel } from '../models/use/model.ts';
import { directoryHandleSource, isDirectoryHandle, isUrl, urlSource, type DirectoryHandleLike } from './sources.ts';
import type { LoadProgress } from './types.ts';

export type ModelInput = string | URL | ModelSource | DirectoryHandleLike | Map<string, Blob | Uint8Array> | Record<string, Blob | Uint8Array>;

/** Load settings; all plain data, so the worker client can send them as they are (but `openPath` and `fetch`). */
export interface LoadSettings {
  /** GPU backend (core/gpu/device.ts): `auto` (default), `navigator`, `native`, `swiftshader`, `opengles`. */
  gpuBackend?: string;
  /** Context limit in tokens (default: the model's). */
  maxContext?: number;
  /** Sequences decoded together (default 16). */
  maxSeqs?: number;
  /** GPU weight dtype (default auto: f32 for float checkpoints, GGUF quantization kept). */
  dtype?: WeightDType;
  /** Force the model kind instead of detecting it from config.json. */
  type?: ReaderType;
  /** Name reported in results' `model` (default: the source's name). */
  name?: string;
  /** Headers for URL models (e.g. Authorization). */
  headers?: Record<string, string>;
}

export interface CreateEngineOptions extends LoadSettings {
  model: ModelInput;
  onProgress?: (p: LoadProgress) => void;
  /** Opens a filesystem path as a ModelSource (Node: server/fs_source.ts openModelPath). */
  openPath?: (path: string) => Promise<ModelSource>;
  /** fetch for URL models (default: globalThis.fetch). */
  fetch?: typeof fetch;
}

export interface OpenedReader {
  reader: AnyReaderApi;
  release(): void;
}

const WEIGHT_FILE = /\.(safetensors|gguf|bin|onnx)$/i;

function isModelSource(v: unknown): v is ModelSource {
  return typeof v === 'object' && v !== null && typeof (v as ModelSource).open === 'function' && typeof (v as ModelSource).exists === 'function';
}

/** `model` as a ModelSource, and the bytes of weights when known up front. */
export async function resolveModel(o: CreateEngineOptions, report: (p: LoadProgress) => void): Promise<ModelSource> {
  const m = o.model;
  if (isModelSource(m)) return m;
  if (m instanceof URL || (typeof m === 'string' && isUrl(m))) {
    const sizes = new Map<string, [number, number]>();
    return urlSource(String(m), {
      ...(o.fetch ? { fetch: o.fetch } : {}),
      ...(o.headers ? { headers: o.headers } : {}),
      onBytes: (url, loaded, total) => {
        sizes.set(url, [loaded, total]);
        const all = [...sizes.values()];
        report({ stage: 'fetch', loaded: all.reduce((a, [l]) => a + l, 0), total: all.reduce((a, [l, t]) => a + Math.max(l, t), 0), detail: url });
      },
    });
  }
  if (typeof m === 'string') {
    if (!o.openPath) throw new InvalidRequestError('invalid_model', `"${m}" is not a URL; filesystem paths need openPath (the Node entry provides it) or a URL / file map`, { field: 'model' });
    return o.openPath(m);
  }
  if (isDirectoryHandle(m)) return directoryHandleSource(m);
  if (m instanceof Map) return filesSource(m, o.name ?? 'model');
  if (typeof m === 'object' && m !== null) return filesSource(new Map(Object.entries(m)), o.name ?? 'model');
  throw new InvalidRequestError('invalid_model', 'model must be a URL, a path, a ModelSource, a directory handle or a map of files', { field: 'model' });
}

/** Wraps a ModelSource so reads of weight files report progress (bytes read of the weight files opened so far). */
function withProgress(ms: ModelSource, report: (loaded: number, total: number) => void): ModelSource {
  let loaded = 0;
  let total = 0;
  return {
    name: ms.name,
    exists: (p) => ms.exists(p),
    readText: (p) => ms.readText(p),
    ...(ms.list ? { list: () => ms.list!() } : {}),
    async open(path: string): Promise<ByteSource> {
      const src = await ms.open(path);
      if (!WEIGHT_FILE.test(path)) return src;
      total += src.size;
      return {
        size: src.size,
        async read(offset, length) {
          const out = await src.read(offset, length);
          loaded = Math.min(total, loaded + length);
          report(loaded, total);
          return out;
        },
      };
    },
  };
}

/** Loads the model of `o` on a new device; the caller owns the result and calls release() when done. */
export async function openReader(o: CreateEngineOptions): Promise<OpenedReader> {
  let last = 0;
  const emit = (p: LoadProgress, force = false): void => {
    const t = performance.now();
    if (!o.onProgress || (!force && t - last < 50)) return;
    last = t;
    o.onProgress(p);
  };
  const raw = await resolveModel(o, (p) => emit(p, p.loaded === p.total));
  emit({ stage: 'device', loaded: 0, total: 0 }, true);
  const ctx = await GpuContext.create(o.gpuBackend ? { backend: o.gpuBackend } : {});
  const adapter = ctx.gpu.info.name;
  try {
    const ms = withProgress(raw, (loaded, total) => emit({ stage: 'weights', loaded, total, detail: adapter }, loaded === total));
    const name = o.name ?? raw.name;
    const meta = { readerId: 'local', model: name, device: adapter, backend: ctx.gpu.info.backend };
    const type = await readerTypeOf(ms, o.type);
    let reader: AnyReaderApi;
    let free: () => void;
    if (type === 'generate') {
      const loaded = await loadDecoder(ctx, ms, {
        ...(o.maxContext ? { maxContext: o.maxContext } : {}),
        ...(o.maxSeqs ? { maxSeqs: o.maxSeqs } : {}),
        ...(o.dtype ? { dtype: o.dtype } : {}),
      });
      reader = new LocalReader(loaded, meta, constraintCompilerFor(loaded.tokenizer, loaded.cfg.vocabSize));
      free = () => loaded.destroy();
    } else {
      const cfg = await configOf(ms);
      const opts = { ...(o.maxSeqs ? { maxBatchSize: o.maxSeqs } : {}), ...(o.maxContext ? { maxTokens: o.maxContext } : {}), ...(o.dtype ? { dtype: o.dtype } : {}) };
      const model = cfg && isUseLiteConfig(cfg) ? await UseLiteModel.load(ctx, ms, opts) : await loadEncoder(ctx, ms, opts);
      reader = new LocalEncoderReader(model, meta, type, cfg);
      free = () => model.destroy();
    }
    emit({ stage: 'ready', loaded: 1, total: 1, detail: adapter }, true);
    return {
      reader,
      release() {
        try {
          free();
        } finally {
          ctx.destroy();
        }
      },
    };
  } catch (e) {
    ctx.destroy();
    throw e;
  }
}
