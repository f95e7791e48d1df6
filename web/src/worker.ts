/**
 * Browser mode: the portable core in a Web Worker on navigator.gpu. Waits for
 * its `init` (the model's files as Blobs), opens a WebGPU device, loads the
 * model with loadDecoder and then serves the SAME ReaderApi the server's
 * reader workers serve (serveReader over postMessage); the page talks to it
 * through RemoteReader. Structured-output constraints are compiled here,
 * where the tokenizer lives. Load failures are posted as `failed`.
 */
import type { GenerationEvent } from '../../core/engine/engine.ts';
import { LocalReader } from '../../core/engine/local_reader.ts';
import type { GenerateRequest } from '../../core/engine/reader_api.ts';
import { serveReader, type Endpoint, type Msg } from '../../core/engine/protocol.ts';
import { errorToJSON } from '../../core/errors.ts';
import { filesSource, type ByteSource, type ModelSource } from '../../core/formats/source.ts';
import { GpuContext } from '../../core/gpu/context.ts';
import { loadDecoder } from '../../core/models/load.ts';
import { compileConstraint, parseBackend, parseWhitespace } from '../../core/structured/index.ts';
import { DEFAULT_CHATML_TEMPLATE } from '../../core/tokenizer/chat_template.ts';
import type { FromWorker, WorkerInit, WorkerProgress } from './worker_messages.ts';

interface WorkerScope {
  postMessage(m: FromWorker): void;
  addEventListener(type: 'message', cb: (ev: MessageEvent<Msg | WorkerInit>) => void): void;
}
const scope = globalThis as unknown as WorkerScope;

const listeners: ((m: Msg) => void)[] = [];
const endpoint: Endpoint = {
  post: (m) => scope.postMessage(m),
  onMessage: (cb) => listeners.push(cb),
};

/** Chat prompts to models without a chat template use ChatML, as the server's /v1 layer does. */
class BrowserReader extends LocalReader {
  override generate(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<GenerationEvent> {
    const chat = typeof req.prompt === 'object' && !Array.isArray(req.prompt);
    return super.generate(chat && !req.chatTemplateFallback ? { ...req, chatTemplateFallback: { template: DEFAULT_CHATML_TEMPLATE, stop: ['<|im_end|>'] } } : req, signal);
  }
}

const WEIGHT_FILE = /\.(safetensors|gguf)$/i;

/** Wraps a ModelSource so reads of weight files report progress. */
function withProgress(ms: ModelSource, total: number, report: (loaded: number) => void): ModelSource {
  let loaded = 0;
  return {
    ...ms,
    async open(path: string): Promise<ByteSource> {
      const src = await ms.open(path);
      if (!WEIGHT_FILE.test(path)) return src;
      return {
        size: src.size,
        async read(offset, length) {
          const out = await src.read(offset, length);
          loaded = Math.min(total, loaded + length);
          report(loaded);
          return out;
        },
      };
    },
  };
}

async function open(init: WorkerInit): Promise<LocalReader> {
  const progress = (p: Omit<WorkerProgress, 'kind'>): void => scope.postMessage({ kind: 'progress', ...p });
  const total = init.files.filter((f) => WEIGHT_FILE.test(f.path)).reduce((a, f) => a + f.blob.size, 0);
  progress({ stage: 'device', loaded: 0, total });
  const ctx = await GpuContext.create({ backend: 'navigator' });
  const adapter = ctx.gpu.info.name;
  try {
    let last = 0;
    const ms = withProgress(filesSource(new Map(init.files.map((f) => [f.path, f.blob])), init.name), total, (loaded) => {
      const now = performance.now();
      if (now - last > 50 || loaded === total) progress({ stage: 'weights', loaded, total, adapter }), (last = now);
    });
    const loaded = await loadDecoder(ctx, ms, {
      ...(init.maxContext ? { maxContext: init.maxContext } : {}),
      ...(init.maxSeqs ? { maxSeqs: init.maxSeqs } : {}),
    });
    progress({ stage: 'ready', loaded: total, total, adapter });
    const tok = loaded.tokenizer;
    return new BrowserReader(
      loaded,
      { readerId: 'browser', model: init.name, device: adapter, backend: ctx.gpu.info.backend },
      (c) => compileConstraint(c.kind === 'regex' ? { kind: 'regex', pattern: c.pattern } : c.kind === 'json_schema' ? { kind: 'json_schema', schema: c.schema } : { kind: 'json_object' }, tok, { backend: parseBackend(c.backend), whitespace: parseWhitespace(c.whitespace) }).start(),
    );
  } catch (e) {
    ctx.destroy();
    throw e;
  }
}

let started = false;
scope.addEventListener('message', (ev) => {
  const m = ev.data;
  if (m.kind === 'init') {
    if (started) return;
    started = true;
    open(m).then(
      (reader) => serveReader(reader, endpoint),
      (e: unknown) => scope.postMessage({ kind: 'failed', uuid: '', content: errorToJSON(e) }),
    );
    return;
  }
  for (const cb of listeners) cb(m);
});
