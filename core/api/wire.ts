/**
 * The messages between a page and an engine running in a Web Worker, all
 * `{kind, id, content}` with plain, cloneable content:
 *
 *   page → worker  `load` {model, settings}      load a model (one at a time)
 *   worker → page  `progress` LoadProgress        while loading
 *   worker → page  `ready` ReaderInfo | `failed` ErrorJSON
 *   page → worker  `unload`  → worker `unloaded`  free the model and its device
 *
 * Once ready, requests use the reader protocol of core/engine/protocol.ts on
 * the same port (`generate` → `event`* → `end` | `error`; `call` → `result` |
 * `error`; `cancel` for aborts), its `uuid` carried as `id`.
 */
import type { Endpoint, Msg } from '../engine/protocol.ts';
import type { LoadSettings, ModelInput } from './load.ts';

export type EngineMsg =
  | { kind: 'load'; id: string; content: { model: Exclude<ModelInput, URL>; settings: LoadSettings } }
  | { kind: 'progress'; id: string; content: unknown }
  | { kind: 'unload'; id: string; content?: undefined }
  | { kind: 'unloaded'; id: string; content?: undefined }
  | { kind: Msg['kind']; id: string; content?: unknown };

/** A port that delivers `message` events (a Worker, a worker's global scope, a MessagePort). */
export interface PortLike {
  postMessage(m: unknown): void;
  addEventListener(type: 'message', cb: (ev: { data: unknown }) => void): void;
  removeEventListener?(type: 'message', cb: (ev: { data: unknown }) => void): void;
}

/** The reader protocol over a port, `uuid` travelling as `id`; `detach` stops delivering. */
export function readerEndpoint(port: PortLike): Endpoint & { detach(): void } {
  const subs = new Set<(m: Msg) => void>();
  const onMsg = (ev: { data: unknown }): void => {
    const m = ev.data as { kind?: unknown; id?: unknown; content?: unknown } | null;
    if (!m || typeof m.kind !== 'string' || typeof m.id !== 'string') return;
    const msg: Msg = { kind: m.kind as Msg['kind'], uuid: m.id, ...(m.content !== undefined ? { content: m.content } : {}) };
    for (const cb of subs) cb(msg);
  };
  port.addEventListener('message', onMsg);
  return {
    post: (m) => port.postMessage({ kind: m.kind, id: m.uuid, content: m.content }),
    onMessage: (cb) => void subs.add(cb),
    detach() {
      subs.clear();
      port.removeEventListener?.('message', onMsg);
    },
  };
}
