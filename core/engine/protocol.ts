/**
 * ReaderApi over a message channel: `serveReader` on the side that owns the
 * model (a Node worker thread, a browser Web Worker), `RemoteReader` on the
 * side that uses it. Messages are `{kind, uuid, content}`; content is plain
 * cloneable data. Streams are `generate` -> `event`* -> `end` | `error`;
 * calls are `call` -> `result` | `error`. Cancelling a stream sends `cancel`.
 */
import { errorFromJSON, errorToJSON, type ErrorJSON } from '../errors.ts';
import { Channel } from './channel.ts';
import type { GenerationEvent } from './engine.ts';
import type { GenerateRequest, ReaderApi, ReaderInfo, ReaderStats } from './reader_api.ts';

export interface Msg {
  kind: 'call' | 'result' | 'error' | 'generate' | 'event' | 'end' | 'cancel' | 'ready' | 'failed';
  uuid: string;
  content?: unknown;
}

/** The two operations a transport needs. */
export interface Endpoint {
  post(msg: Msg): void;
  onMessage(cb: (msg: Msg) => void): void;
}

type Method = 'tokenize' | 'detokenize' | 'chatTemplate' | 'modelConfig' | 'stats' | 'cancel';

/** Serves `api` on `ep` until the endpoint closes. */
export function serveReader(api: ReaderApi, ep: Endpoint): void {
  const streams = new Map<string, AbortController>();
  ep.onMessage((m) => {
    if (m.kind === 'call') {
      const { method, args } = m.content as { method: Method; args: unknown[] };
      const fn = api[method] as (...a: unknown[]) => Promise<unknown>;
      Promise.resolve()
        .then(() => fn.apply(api, args))
        .then(
          (value) => ep.post({ kind: 'result', uuid: m.uuid, content: value }),
          (e: unknown) => ep.post({ kind: 'error', uuid: m.uuid, content: errorToJSON(e) }),
        );
    } else if (m.kind === 'generate') {
      const ac = new AbortController();
      streams.set(m.uuid, ac);
      void (async () => {
        try {
          for await (const ev of api.generate(m.content as GenerateRequest, ac.signal)) ep.post({ kind: 'event', uuid: m.uuid, content: ev });
          ep.post({ kind: 'end', uuid: m.uuid });
        } catch (e) {
          ep.post({ kind: 'error', uuid: m.uuid, content: errorToJSON(e) });
        } finally {
          streams.delete(m.uuid);
        }
      })();
    } else if (m.kind === 'cancel') {
      streams.get(m.uuid)?.abort();
    }
  });
  ep.post({ kind: 'ready', uuid: '', content: api.info() });
}

let counter = 0;

/** Client side. `info` comes from the server's `ready` message. */
export class RemoteReader implements ReaderApi {
  private readonly pending = new Map<string, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>();
  private readonly streams = new Map<string, Channel<GenerationEvent>>();
  private closedWith: Error | null = null;

  constructor(
    private readonly ep: Endpoint,
    private readonly readerInfo: ReaderInfo,
  ) {
    ep.onMessage((m) => this.receive(m));
  }

  private receive(m: Msg): void {
    if (m.kind === 'result' || (m.kind === 'error' && this.pending.has(m.uuid))) {
      const p = this.pending.get(m.uuid);
      this.pending.delete(m.uuid);
      if (m.kind === 'result') p?.resolve(m.content);
      else p?.reject(errorFromJSON(m.content as ErrorJSON));
      return;
    }
    const ch = this.streams.get(m.uuid);
    if (!ch) return;
    if (m.kind === 'event') ch.push(m.content as GenerationEvent);
    else if (m.kind === 'end') {
      this.streams.delete(m.uuid);
      ch.close();
    } else if (m.kind === 'error') {
      this.streams.delete(m.uuid);
      ch.fail(errorFromJSON(m.content as ErrorJSON));
    }
  }

  /** Fails everything in flight (the worker died). */
  close(err: Error): void {
    this.closedWith = err;
    for (const p of this.pending.values()) p.reject(err);
    for (const ch of this.streams.values()) ch.fail(err);
    this.pending.clear();
    this.streams.clear();
  }

  info(): ReaderInfo {
    return this.readerInfo;
  }

  private call<T>(method: Method, ...args: unknown[]): Promise<T> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    const uuid = `c${++counter}`;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(uuid, { resolve: resolve as (v: unknown) => void, reject });
      this.ep.post({ kind: 'call', uuid, content: { method, args } });
    });
  }

  generate(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<GenerationEvent> {
    if (this.closedWith) throw this.closedWith;
    const uuid = `g${++counter}`;
    const cancel = (): void => this.ep.post({ kind: 'cancel', uuid });
    const ch = new Channel<GenerationEvent>(cancel);
    this.streams.set(uuid, ch);
    signal?.addEventListener('abort', cancel, { once: true });
    this.ep.post({ kind: 'generate', uuid, content: req });
    return ch;
  }

  cancel(id: string): Promise<boolean> {
    return this.call('cancel', id);
  }
  tokenize(text: string, opts?: { addSpecialTokens?: boolean }): Promise<{ ids: number[]; tokens: string[] }> {
    return this.call('tokenize', text, opts);
  }
  detokenize(ids: number[], opts?: { skipSpecialTokens?: boolean }): Promise<string> {
    return this.call('detokenize', ids, opts);
  }
  chatTemplate(messages: Parameters<ReaderApi['chatTemplate']>[0], opts?: { addGenerationPrompt?: boolean; tools?: unknown[] }): Promise<string> {
    return this.call('chatTemplate', messages, opts);
  }
  modelConfig(): Promise<unknown> {
    return this.call('modelConfig');
  }
  stats(): Promise<ReaderStats> {
    return this.call('stats');
  }
}
