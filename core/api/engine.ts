/**
 * WeftEngine: the OpenAI-shaped face of one loaded model —
 * `chat.completions.create`, `completions.create`, `embeddings.create`,
 * `tokenize`, `abort`, `unload` — over any reader (core/engine/reader_api.ts):
 * a LocalReader in this thread (createEngine) or a RemoteReader talking to a
 * Web Worker (createWorkerEngine). The translation runs here, so both give the
 * same results; only plain GenerateRequests and events cross a worker boundary.
 *
 * Streams: `create({stream: true})` resolves once the first event has arrived
 * (so a bad request rejects the promise rather than the iteration) to an async
 * iterable of OpenAI chunks: a role chunk, one chunk per text piece, a final
 * chunk with finish_reason, and with stream_options.include_usage a last chunk
 * with empty choices and the usage. Breaking out of the loop cancels the
 * generation. Aborts (a request's signal, or engine.abort() for all) end a
 * stream with finish_reason `abort` and reject a non-streaming call with
 * CancelledError (code `cancelled`).
 */
import type { GenerationEvent } from '../engine/engine.ts';
import type { AnyReaderApi, GenerateRequest, ReaderApi, ReaderInfo } from '../engine/reader_api.ts';
import { CancelledError, InvalidRequestError, UnavailableError } from '../errors.ts';
import { baseRequest, chatRequest, finishReason, float32Base64, newId, now, usageOf } from './openai_map.ts';
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionCreateParams,
  Completion,
  CompletionCreateParams,
  CreateEmbeddingResponse,
  EmbeddingCreateParams,
  RequestOptions,
} from './types.ts';

type Done = Extract<GenerationEvent, { type: 'done' }>;
type Streaming<T> = T & { stream: true };
type NonStreaming<T> = T & { stream?: false | null };

export interface ChatCompletions {
  create(body: Streaming<ChatCompletionCreateParams>, opts?: RequestOptions): Promise<AsyncIterable<ChatCompletionChunk>>;
  create(body: NonStreaming<ChatCompletionCreateParams>, opts?: RequestOptions): Promise<ChatCompletion>;
  create(body: ChatCompletionCreateParams, opts?: RequestOptions): Promise<ChatCompletion | AsyncIterable<ChatCompletionChunk>>;
}

export interface Completions {
  create(body: Streaming<CompletionCreateParams>, opts?: RequestOptions): Promise<AsyncIterable<Completion>>;
  create(body: NonStreaming<CompletionCreateParams>, opts?: RequestOptions): Promise<Completion>;
  create(body: CompletionCreateParams, opts?: RequestOptions): Promise<Completion | AsyncIterable<Completion>>;
}

/** Pulls the first event before handing the stream out, and yields it again. */
async function primed(events: AsyncIterable<GenerationEvent>): Promise<AsyncGenerator<GenerationEvent>> {
  const it = events[Symbol.asyncIterator]();
  const first = await it.next();
  return (async function* () {
    try {
      if (first.done) return;
      yield first.value;
      for (let r = await it.next(); !r.done; r = await it.next()) yield r.value;
    } finally {
      await it.return?.();
    }
  })();
}

export class WeftEngine {
  /** Controllers of the requests in flight, for abort(). */
  private readonly inflight = new Set<AbortController>();
  private released: Promise<void> | null = null;

  readonly chat: { completions: ChatCompletions };
  readonly completions: Completions;
  readonly embeddings: { create(body: EmbeddingCreateParams, opts?: RequestOptions): Promise<CreateEmbeddingResponse> };

  constructor(
    private readonly reader: AnyReaderApi,
    /** Frees the model and its device (or tells the worker to). */
    private readonly release: () => Promise<void> | void,
  ) {
    this.chat = { completions: { create: ((b: ChatCompletionCreateParams, o?: RequestOptions) => this.chatCreate(b, o)) as ChatCompletions['create'] } };
    this.completions = { create: ((b: CompletionCreateParams, o?: RequestOptions) => this.textCreate(b, o)) as Completions['create'] };
    this.embeddings = { create: (b, o) => this.embed(b, o) };
  }

  /** What is loaded: model name, type (generate / embed / classify), device, context length. */
  info(): ReaderInfo {
    return this.reader.info();
  }

  private live(): void {
    if (this.released) throw new UnavailableError('engine_unloaded', 'this engine was unloaded; create a new one');
  }

  private decoder(): ReaderApi {
    this.live();
    if (!('generate' in this.reader) || this.reader.info().type !== 'generate') {
      throw new InvalidRequestError('wrong_reader_type', `${this.info().model} is an ${this.info().type} model; it does not generate text`, { field: 'model' });
    }
    return this.reader as ReaderApi;
  }

  /**
   * Weft's own generation stream (token and done events, as the server's
   * native API streams them), for callers that want token ids or
   * Weft-specific fields such as regex constraints.
   */
  generate(req: GenerateRequest, opts: RequestOptions = {}): AsyncIterable<GenerationEvent> {
    const reader = this.decoder();
    const ac = new AbortController();
    const onAbort = (): void => ac.abort();
    if (opts.signal?.aborted) ac.abort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    this.inflight.add(ac);
    const events = reader.generate(req, ac.signal);
    const untrack = (): void => {
      this.inflight.delete(ac);
      opts.signal?.removeEventListener('abort', onAbort);
    };
    return (async function* () {
      let ended = false;
      try {
        yield* events;
        ended = true;
      } finally {
        // A consumer that stops iterating early stops the generation too.
        if (!ended) ac.abort();
        untrack();
      }
    })();
  }

  /** Runs `req` to its done event, or streams it as `frame` chunks. */
  private async run<C>(req: GenerateRequest, stream: boolean, opts: RequestOptions | undefined, frame: { token(text: string): C; finish(d: Done): C; usage(d: Done): C; opening: C[] }, includeUsage: boolean): Promise<AsyncIterable<C> | Done> {
    const events = await primed(this.generate(req, opts));
    if (!stream) {
      let done: Done | undefined;
      for await (const ev of events) if (ev.type === 'done') done = ev;
      if (!done) throw new CancelledError();
      if (done.finishReason === 'cancelled') throw new CancelledError();
      return done;
    }
    return (async function* () {
      for (const o of frame.opening) yield o;
      for await (const ev of events) {
        if (ev.type === 'token') {
          if (ev.text) yield frame.token(ev.text);
        } else {
          yield frame.finish(ev);
          if (includeUsage) yield frame.usage(ev);
        }
      }
    })();
  }

  private async chatCreate(b: ChatCompletionCreateParams, opts?: RequestOptions): Promise<ChatCompletion | AsyncIterable<ChatCompletionChunk>> {
    const info = this.decoder().info();
    const req = chatRequest(b);
    const id = newId('chatcmpl');
    const created = now();
    const model = info.model;
    const inc = !!b.stream_options?.include_usage;
    const chunk = (delta: ChatCompletionChunk['choices'][0]['delta'], fr: ChatCompletionChunk['choices'][0]['finish_reason']): ChatCompletionChunk => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [{ index: 0, delta, finish_reason: fr, logprobs: null }],
      ...(inc ? { usage: null } : {}),
    });
    const r = await this.run<ChatCompletionChunk>(
      req,
      !!b.stream,
      opts,
      {
        opening: [chunk({ role: 'assistant', content: '' }, null)],
        token: (text) => chunk({ content: text }, null),
        finish: (d) => chunk({}, finishReason(d.finishReason)),
        usage: (d) => ({ id, object: 'chat.completion.chunk', created, model, choices: [], usage: usageOf(d) }),
      },
      inc,
    );
    if (Symbol.asyncIterator in r) return r;
    return { id, object: 'chat.completion', created, model, choices: [{ index: 0, message: { role: 'assistant', content: r.text }, finish_reason: finishReason(r.finishReason), logprobs: null }], usage: usageOf(r) };
  }

  private async textCreate(b: CompletionCreateParams, opts?: RequestOptions): Promise<Completion | AsyncIterable<Completion>> {
    const info = this.decoder().info();
    if (typeof b.prompt !== 'string') throw new InvalidRequestError('invalid_parameter', 'prompt must be a string', { field: 'prompt' });
    const req: GenerateRequest = { ...baseRequest(b), prompt: b.prompt };
    const id = newId('cmpl');
    const created = now();
    const model = info.model;
    const inc = !!b.stream_options?.include_usage;
    const piece = (text: string, fr: Completion['choices'][0]['finish_reason']): Completion => ({
      id,
      object: 'text_completion',
      created,
      model,
      choices: [{ index: 0, text, finish_reason: fr, logprobs: null }],
      ...(inc ? { usage: null } : {}),
    });
    const r = await this.run<Completion>(
      req,
      !!b.stream,
      opts,
      {
        opening: [],
        token: (text) => piece(text, null),
        finish: (d) => piece('', finishReason(d.finishReason)),
        usage: (d) => ({ id, object: 'text_completion', created, model, choices: [], usage: usageOf(d) }),
      },
      inc,
    );
    if (Symbol.asyncIterator in r) return r;
    return { id, object: 'text_completion', created, model, choices: [{ index: 0, text: r.text, finish_reason: finishReason(r.finishReason), logprobs: null }], usage: usageOf(r) };
  }

  private async embed(b: EmbeddingCreateParams, opts: RequestOptions = {}): Promise<CreateEmbeddingResponse> {
    this.live();
    const reader = this.reader;
    if (!('embed' in reader) || reader.info().type !== 'embed') {
      throw new InvalidRequestError('wrong_reader_type', `${this.info().model} is a ${this.info().type} model; embeddings need an embedding model`, { field: 'model' });
    }
    const input = typeof b.input === 'string' ? [b.input] : b.input;
    if (!Array.isArray(input) || input.length === 0 || input.some((t) => typeof t !== 'string')) {
      throw new InvalidRequestError('invalid_parameter', 'input must be a string or a non-empty array of strings', { field: 'input' });
    }
    const fmt = b.encoding_format ?? 'float';
    if (fmt !== 'float' && fmt !== 'base64') throw new InvalidRequestError('invalid_parameter', 'encoding_format must be float or base64', { field: 'encoding_format' });
    const ac = new AbortController();
    const onAbort = (): void => ac.abort();
    if (opts.signal?.aborted) ac.abort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    this.inflight.add(ac);
    try {
      const r = await reader.embed(input, { signal: ac.signal });
      const tokens = r.tokens.reduce((a, t) => a + t, 0);
      return {
        object: 'list',
        model: this.info().model,
        data: r.vectors.map((v, index) => ({ object: 'embedding', index, embedding: fmt === 'base64' ? float32Base64(v) : v })),
        usage: { prompt_tokens: tokens, total_tokens: tokens },
      };
    } finally {
      this.inflight.delete(ac);
      opts.signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Token ids and their token strings; `addSpecialTokens` (default true) adds BOS where the model uses one. */
  async tokenize(text: string, opts: { addSpecialTokens?: boolean } = {}): Promise<{ ids: number[]; tokens: string[] }> {
    this.live();
    if (typeof text !== 'string') throw new InvalidRequestError('invalid_parameter', 'text must be a string', { field: 'text' });
    return this.reader.tokenize(text, opts);
  }

  async detokenize(ids: number[], opts: { skipSpecialTokens?: boolean } = {}): Promise<string> {
    this.live();
    return this.reader.detokenize(ids, opts);
  }

  /** Stops every request in flight (streams end with finish_reason `abort`). */
  abort(): void {
    for (const ac of this.inflight) ac.abort();
  }

  /** Aborts what runs and frees the model and its GPU memory; the engine is unusable afterwards. Idempotent. */
  unload(): Promise<void> {
    if (!this.released) {
      this.abort();
      this.released = Promise.resolve().then(() => this.release());
    }
    return this.released;
  }
}
