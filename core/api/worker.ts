/**
 * The engine's Web Worker side: `serveEngine()` in a worker script makes it
 * answer createWorkerEngine (worker_client.ts) on the page. It loads the
 * model the page names (load.ts, the same path createEngine takes), reports
 * progress, then serves the loaded reader over the reader protocol; `unload`
 * frees it and the worker can load another. Messages: wire.ts.
 *
 *   // my_worker.ts
 *   import { serveEngine } from '<package>/worker';
 *   serveEngine();
 */
import { serveReader } from '../engine/protocol.ts';
import { errorToJSON, InvalidRequestError } from '../errors.ts';
import { openReader, type OpenedReader } from './load.ts';
import { readerEndpoint, type EngineMsg, type PortLike } from './wire.ts';

/** Serves engine requests arriving on `scope` (default: this worker's global scope) until the worker ends. */
export function serveEngine(scope: PortLike = globalThis as unknown as PortLike): void {
  let current: { opened: Promise<OpenedReader | null>; detach(): void } | null = null;
  const post = (m: EngineMsg): void => scope.postMessage(m);
  scope.addEventListener('message', (ev) => {
    const m = ev.data as EngineMsg | null;
    if (!m || typeof m.kind !== 'string') return;
    if (m.kind === 'load') {
      const { id } = m;
      if (current) return post({ kind: 'failed', id, content: errorToJSON(new InvalidRequestError('already_loaded', 'this worker already has a model; unload it first')) });
      const { model, settings } = (m as Extract<EngineMsg, { kind: 'load' }>).content;
      const ep = readerEndpoint(scope);
      const opened = openReader({ ...settings, model, onProgress: (p) => post({ kind: 'progress', id, content: p }) }).then(
        (o) => (serveReader(o.reader, ep), o),
        (e: unknown) => {
          ep.detach();
          current = null;
          post({ kind: 'failed', id, content: errorToJSON(e) });
          return null;
        },
      );
      current = { opened, detach: () => ep.detach() };
    } else if (m.kind === 'unload') {
      const was = current;
      current = null;
      void (async () => {
        if (was) {
          was.detach();
          (await was.opened)?.release();
        }
        post({ kind: 'unloaded', id: m.id });
      })();
    }
  });
}
