/**
 * The reader API over a message channel: `serveReader` on the side that owns
 * the model (a Node worker thread, a browser Web Worker), `RemoteReader` on
 * the side that uses it. Messages are `{kind, uuid, content}`; content is plain
 * cloneable data. Streams are `generate` -> `event`* -> `end` | `error`;
 * calls are `call` -> `result` | `error`. Cancelling a stream, or an encoder
 * call (embed / rerank / classify), sends `cancel` with its uuid. One protocol
 * for both reader types: a method the served reader lacks (generate on an
 * encoder, embed on a decoder) answers `wrong_reader_type`.
 */
import { CancelledError, errorFromJSON, errorToJSON, InvalidRequestError, type ErrorJSON } from '../errors.ts';
import { Channel } from './channel.ts';
import type { GenerationEvent } from './engine.ts';
import type { AnyReaderApi, ClassifyResult, EmbedResult, EncoderCallOptions, EncoderInput, EncoderReaderApi, GenerateRequest, ReaderApi, ReaderInfo, ReaderStats, RerankResult } from './reader_api.ts';

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

type Method = 'tokenize' | 'detokenize' | 'chatTemplate' | 'modelConfig' | 'stats' | 'cancel' | EncoderMethod;
type EncoderMethod = 'embed' | 'rerank' | 'classify';

/** Position of the options argument of each encoder method (where the serving side puts its AbortSignal). */
const OPTS_ARG: Record<EncoderMethod, number> = { embed: 1, rerank: 2, classify: 1 };

const wrongType = (api: AnyReaderApi, what: string): InvalidRequestError =>
  new InvalidRequestError('wrong_reader_type', `reader ${api.info().readerId} (type ${api.info().type}) does not serve ${what}`, { reader_type: api.info().type });

/** Serves `api` on `ep` until the endpoint closes. */
export function serveReader(api: AnyReaderApi, ep: Endpoint): void {
  /** Streams and encoder calls in flight, by uuid, for `cancel`. */
  const streams = new Map<string, AbortController>();
  ep.onMessage((m) => {
    if (m.kind === 'call') {
      const { method, args } = m.content as { method: Method; args: unknown[] };
      const fn = (api as unknown as Record<string, unknown>)[method];
      let ac: AbortController | undefined;
      if (Object.hasOwn(OPTS_ARG, method) && typeof fn === 'function') {
        ac = new AbortController();
        streams.set(m.uuid, ac);
        const i = OPTS_ARG[method as EncoderMethod];
        args[i] = { ...((args[i] as object | undefined) ?? {}), signal: ac.signal };
      }
      Promise.resolve()
        .then(() => {
          if (typeof fn !== 'function') throw wrongType(api, method);
          return (fn as (...a: unknown[]) => Promise<unknown>).apply(api, args);
        })
        .then(
          (value) => ep.post({ kind: 'result', uuid: m.uuid, content: value }),
          (e: unknown) => ep.post({ kind: 'error', uuid: m.uuid, content: errorToJSON(e) }),
        )
        .finally(() => {
          if (ac) streams.delete(m.uuid);
        });
    } else if (m.kind === 'generate') {
      const ac = new AbortController();
      streams.set(m.uuid, ac);
      void (async () => {
        try {
          if (!('generate' in api)) throw wrongType(api, 'generate');
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

/**
 * Client side, for either reader type (`info().type` says which; calling a
 * method the other side lacks fails with `wrong_reader_type`). `info` comes
 * from the server's `ready` message.
 */
export class RemoteReader implements ReaderApi, EncoderReaderApi {
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

  /** An encoder call: the signal stays here; aborting it rejects at once and sends `cancel` to stop the work there. */
  private encoderCall<T>(method: EncoderMethod, opts: (EncoderCallOptions & { normalize?: boolean }) | undefined, ...args: unknown[]): Promise<T> {
    const { signal, ...rest } = opts ?? {};
    if (signal?.aborted) return Promise.reject(new CancelledError());
    if (this.closedWith) return Promise.reject(this.closedWith);
    const uuid = `c${++counter}`;
    return new Promise<T>((resolve, reject) => {
      const onAbort = (): void => {
        if (!this.pending.delete(uuid)) return;
        this.ep.post({ kind: 'cancel', uuid });
        reject(new CancelledError());
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const done = (): void => signal?.removeEventListener('abort', onAbort);
      this.pending.set(uuid, { resolve: (v) => (done(), resolve(v as T)), reject: (e) => (done(), reject(e)) });
      this.ep.post({ kind: 'call', uuid, content: { method, args: [...args, rest] } });
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
  embed(texts: string[], opts?: EncoderCallOptions & { normalize?: boolean }): Promise<EmbedResult> {
    return this.encoderCall('embed', opts, texts);
  }
  rerank(query: string, documents: string[], opts?: EncoderCallOptions): Promise<RerankResult> {
    return this.encoderCall('rerank', opts, query, documents);
  }
  classify(inputs: EncoderInput[], opts?: EncoderCallOptions): Promise<ClassifyResult[]> {
    return this.encoderCall('classify', opts, inputs);
  }
}
