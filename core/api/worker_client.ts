/**
 * createWorkerEngine: a WeftEngine whose model runs in a Web Worker that
 * called serveEngine() (worker.ts), so the page's main thread stays free while
 * weights load and tokens are computed. Same interface as createEngine;
 * requests go to the worker as plain GenerateRequests (RemoteReader), streams
 * come back event by event and aborting a request cancels it in the worker.
 *
 * `model` must be cloneable: a URL string, a map of Blobs / Uint8Arrays, or a
 * FileSystemDirectoryHandle (a ModelSource object cannot cross postMessage).
 */
import { RemoteReader } from '../engine/protocol.ts';
import type { ReaderInfo } from '../engine/reader_api.ts';
import { errorFromJSON, InvalidRequestError, UnavailableError, type ErrorJSON } from '../errors.ts';
import { WeftEngine } from './engine.ts';
import type { CreateEngineOptions, LoadSettings } from './load.ts';
import type { LoadProgress } from './types.ts';
import { readerEndpoint, type EngineMsg, type PortLike } from './wire.ts';

export type WorkerEngineOptions = Omit<CreateEngineOptions, 'openPath' | 'fetch'>;

/** A Worker (or any port to a serveEngine scope); `error` events fail what is in flight. */
export type WorkerLike = PortLike & { addEventListener(type: 'error', cb: (ev: { message?: string }) => void): void };

let loads = 0;

export async function createWorkerEngine(worker: WorkerLike, opts: WorkerEngineOptions): Promise<WeftEngine> {
  const { model: m, onProgress, ...settings } = opts;
  const model = m instanceof URL ? m.href : m;
  if (typeof model === 'object' && model !== null && typeof (model as { open?: unknown }).open === 'function') {
    throw new InvalidRequestError('invalid_model', 'a ModelSource cannot be sent to a worker: pass a URL, a map of files or a directory handle', { field: 'model' });
  }
  const id = `load${++loads}`;
  const ep = readerEndpoint(worker);
  const info = await new Promise<ReaderInfo>((resolve, reject) => {
    const onMsg = (ev: { data: unknown }): void => {
      const msg = ev.data as EngineMsg;
      if (msg?.id !== id && !(msg?.kind === 'ready' && msg.id === '')) return;
      if (msg.kind === 'progress') onProgress?.(msg.content as LoadProgress);
      else if (msg.kind === 'ready') done(() => resolve(msg.content as ReaderInfo));
      else if (msg.kind === 'failed') done(() => reject(errorFromJSON(msg.content as ErrorJSON)));
    };
    const done = (f: () => void): void => {
      worker.removeEventListener?.('message', onMsg);
      f();
    };
    const onError = (ev: { message?: string }): void => reject(new UnavailableError('worker_failed', `the engine worker failed: ${ev.message || 'script error'}`));
    worker.addEventListener('message', onMsg);
    worker.addEventListener('error', onError);
    worker.postMessage({ kind: 'load', id, content: { model, settings: settings satisfies LoadSettings } } satisfies EngineMsg);
  }).catch((e: unknown) => {
    ep.detach();
    throw e;
  });
  const reader = new RemoteReader(ep, info);
  worker.addEventListener('error', (ev) => reader.close(new UnavailableError('worker_failed', `the engine worker died: ${ev.message || 'script error'}`)));
  return new WeftEngine(reader, () =>
    new Promise<void>((resolve) => {
      // What is still in flight fails now rather than waiting on the worker.
      reader.close(new UnavailableError('engine_unloaded', 'this engine was unloaded'));
      const uid = `un${id}`;
      const onMsg = (ev: { data: unknown }): void => {
        const msg = ev.data as EngineMsg;
        if (msg?.kind !== 'unloaded' || msg.id !== uid) return;
        worker.removeEventListener?.('message', onMsg);
        ep.detach();
        resolve();
      };
      worker.addEventListener('message', onMsg);
      worker.postMessage({ kind: 'unload', id: uid } satisfies EngineMsg);
    }),
  );
}
