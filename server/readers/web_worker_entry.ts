/**
 * A reader's Web Worker (Deno): the counterpart of worker_entry.ts for
 * runtimes whose workers are Web Workers. Waits for its init message, opens
 * the GPU and the model (a decoder or an encoder), and serves the reader API
 * over postMessage with the same protocol (core/engine/protocol.ts).
 *
 * GPU: navigator.gpu (Deno's own WebGPU, wgpu) first. When no backend is
 * named and that is unusable (no adapter, or a GPU error while loading or
 * while running one probe input: wgpu's WGSL front end, naga, rejects some
 * shaders only when a kernel is first built), Dawn through npm:webgpu is
 * tried next (native, SwiftShader, OpenGL ES, as on Node). The reader's
 * info.backend says which one serves: `navigator` is Deno's own WebGPU.
 */
import { errorToJSON, GpuError, UnknownBackendError } from '../../core/errors.ts';
import type { AnyReaderApi } from '../../core/engine/reader_api.ts';
import { serveReader, type Endpoint, type Msg } from '../../core/engine/protocol.ts';
import { createLogger } from '../log.ts';
import { openReader, type ReaderInit } from './open_reader.ts';
import { gpuOptionsFromEnv } from '../gpu_settings.ts';

interface WorkerScope {
  postMessage(m: unknown): void;
  addEventListener(type: 'message', cb: (ev: MessageEvent) => void): void;
}
const scope = globalThis as unknown as WorkerScope;

const listeners: ((m: Msg) => void)[] = [];
const endpoint: Endpoint = {
  post: (m) => scope.postMessage(m),
  onMessage: (cb) => listeners.push(cb),
};

const FALLBACK = ['native', 'swiftshader', 'opengles'] as const;

async function open(init: ReaderInit): Promise<AnyReaderApi> {
  const named = (init.spec.backend && init.spec.backend !== 'auto') || gpuOptionsFromEnv().backend;
  if (named) return openReader(init);
  const log = createLogger({ timestamps: !/^(1|true|yes|on)$/i.test(process.env.WEFT_LOG_DISABLE_TIMESTAMPS ?? ''), color: false });
  let first: unknown;
  for (const backend of ['navigator', ...FALLBACK]) {
    try {
      const api = await openReader(init, backend, { probe: true });
      if (first !== undefined) log('reader GPU fallback', { reader_id: init.readerId, backend, device: api.info().device });
      return api;
    } catch (e) {
      if (!(e instanceof GpuError) || e instanceof UnknownBackendError) throw e;
      first ??= e;
      log('reader GPU backend unusable', { reader_id: init.readerId, backend, error: (e as Error).message }, 'warn');
    }
  }
  throw first;
}

let started = false;
scope.addEventListener('message', (ev) => {
  if (!started) {
    started = true;
    const { init } = ev.data as { init: ReaderInit };
    open(init).then(
      (api) => serveReader(api, endpoint),
      (e: unknown) => endpoint.post({ kind: 'failed', uuid: '', content: errorToJSON(e) }),
    );
    return;
  }
  for (const l of listeners) l(ev.data as Msg);
});
