/**
 * The document pipeline's embedder over an encoder reader in a worker thread,
 * so no embedding runs on the HTTP event loop (Dawn's software adapters run
 * GPU work on the calling thread: an in-process embed batch blocked every
 * route for its whole duration).
 *
 * Two sources of readers:
 *  - `groupReaders`: the consumer group of the server's embedding reader
 *    (`embed`, model `use-lite` by default), through the reader manager —
 *    used when documents.embedder names the same model. Calls go to the
 *    group's least-loaded ready reader and count in its in-flight load.
 *  - `dedicatedReader`: one ManagedReader the documents service starts and
 *    owns (same worker machinery, restarted with backoff if it crashes), for
 *    another model directory. It belongs to no consumer group.
 *
 * Chunking measures text synchronously, so the tokenizer is also loaded here
 * (no GPU, no weights): USE-Lite's package-compatible tokenizer from
 * vocab.json, else tokenizer.json. At start its count of a probe text is
 * checked against the reader's own tokenizer; a mismatch refuses to start.
 *
 * Identity: the model directory's name, as the in-process embedder had, so
 * stores written before keep opening.
 */
import { basename, resolve } from 'node:path';
import type { TokenCounter } from '../../core/documents/chunker.ts';
import type { Embedder } from '../../core/documents/embedder.ts';
import type { EncoderReaderApi } from '../../core/engine/reader_api.ts';
import { errorFromJSON, ModelFormatError, UnavailableError, UnsupportedModelError } from '../../core/errors.ts';
import { isUseLiteConfig } from '../../core/models/use/config.ts';
import { parseUseVocabulary, UseTokenizer } from '../../core/models/use/tokenizer.ts';
import { loadTokenizerFromSource } from '../../core/tokenizer/tokenizer.ts';
import { dirSource } from '../fs_source.ts';
import { ManagedReader } from '../readers/managed_reader.ts';
import type { ReaderManager } from '../readers/manager.ts';
import { readerTypeOf } from '../readers/open_encoder.ts';
import { defaultTransport, unrefTimer, type WorkerTransport } from '../readers/transport.ts';

/** Where embed calls run: a ready encoder reader per call, released when the call ends. */
export interface EncoderReaderSource {
  /** Human-readable placement, for logs and status (`reader group embed`, `dedicated reader documents-embedder`). */
  readonly where: string;
  /** A ready reader of the right model; waits up to `waitMs` for one to (re)start, else 503 `embedder_unavailable`. */
  acquire(waitMs: number, signal?: AbortSignal): Promise<{ api: EncoderReaderApi; release(): void }>;
  close(): Promise<void>;
}

/** How long the first reader may take to load before start gives up (a cold USE-Lite load on llvmpipe takes tens of seconds). */
export const READER_START_TIMEOUT_MS = 600_000;
/** How long an embed call waits for a reader that is restarting (the document is requeued after that). */
const EMBED_WAIT_MS = 60_000;
const POLL_MS = 100;

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((res) => {
    const t = setTimeout(done, ms);
    unrefTimer(t);
    signal?.addEventListener('abort', done, { once: true });
    function done(): void {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      res();
    }
  });

const unavailable = (msg: string): UnavailableError => new UnavailableError('embedder_unavailable', msg, 5);

/** The readers of `group` in `manager` that serve `model` (others in the group are never used: their vectors would not match the store's). */
export function groupReaders(manager: ReaderManager, group: string, model: string): EncoderReaderSource {
  return {
    where: `reader group ${group}`,
    async acquire(waitMs, signal) {
      const end = Date.now() + waitMs;
      for (;;) {
        if (signal?.aborted) throw signal.reason ?? unavailable('aborted');
        const members = manager.groups().get(group) ?? [];
        const fit = members.filter((r) => r.spec.model === model);
        const ready = fit.filter((r) => r.ready && r.api && !r.draining);
        // A group scaled to zero has no member: the manager cold-starts one (and waits for it).
        const cold = !fit.length && manager.groups().has(group) ? await manager.acquire(group, { types: ['embed'], what: 'document embedding' }, signal) : null;
        if (cold && cold.spec.model !== model) throw unavailable(`consumer group ${group} no longer serves ${model} (the document embedder's model)`);
        if (ready.length || cold) {
          const r = cold ?? ready.reduce((a, b) => (b.inFlight < a.inFlight ? b : a));
          r.inFlight++;
          let released = false;
          return {
            api: r.api!,
            release: () => {
              if (!released) r.inFlight--;
              released = true;
            },
          };
        }
        if (fit.length && fit.every((r) => r.state === 'failed' || r.state === 'stopped')) {
          const failed = fit.find((r) => r.error);
          throw failed ? errorFromJSON(failed.error!) : unavailable(`the ${model} readers of group ${group} are stopped`);
        }
        if (!fit.length) throw unavailable(`consumer group ${group} (the document embedder's readers) no longer exists`);
        if (Date.now() >= end) throw unavailable(`no reader of ${model} in group ${group} is ready`);
        await sleep(POLL_MS, signal);
      }
    },
    async close() {}, // the manager owns the group
  };
}

/** Starts one encoder reader for `dir` in a worker thread, owned by the caller (close stops it). */
export function dedicatedReader(dir: string, opts: { backend?: string; readerId?: string; transport?: WorkerTransport } = {}): EncoderReaderSource {
  const id = opts.readerId ?? 'documents-embedder';
  const r = new ManagedReader(
    id,
    { model: dir, consumerGroup: 'documents', readerId: id, type: 'embed', batchDurationMillis: 2, ...(opts.backend && opts.backend !== 'auto' ? { backend: opts.backend } : {}) },
    opts.transport ?? defaultTransport(),
  );
  return {
    where: `dedicated reader ${id}`,
    async acquire(waitMs, signal) {
      const end = Date.now() + waitMs;
      while (!(r.ready && r.api)) {
        if (signal?.aborted) throw signal.reason ?? unavailable('aborted');
        if (r.state === 'failed') throw r.error ? errorFromJSON(r.error) : unavailable(`the document embedder ${dir} failed to load`);
        if (r.state === 'stopped') throw unavailable('the document embedder is stopped');
        if (Date.now() >= end) throw unavailable(`the document embedder ${dir} is not ready (state ${r.state})`);
        await sleep(POLL_MS, signal);
      }
      r.inFlight++;
      let released = false;
      return {
        api: r.api,
        release: () => {
          if (!released) r.inFlight--;
          released = true;
        },
      };
    },
    close: () => r.stop(),
  };
}

/** The embedder's tokenizer, loaded in this thread: counts without special tokens. */
export async function loadTokenCounter(dir: string): Promise<TokenCounter> {
  const ms = dirSource(resolve(dir));
  const cfg: unknown = (await ms.exists('config.json')) ? JSON.parse(await ms.readText('config.json')) : null;
  if (isUseLiteConfig(cfg)) {
    const tok = new UseTokenizer(parseUseVocabulary(JSON.parse(await ms.readText('vocab.json'))));
    return { count: (t) => tok.encode(t, { addSpecialTokens: false }).length };
  }
  const tok = await loadTokenizerFromSource(ms);
  return { count: (t) => tok.encode(t, { addSpecialTokens: false }).length };
}

/** Text whose count must agree between this thread's tokenizer and the reader's: punctuation, accents, digits, CJK, runs of spaces. */
const PROBE = 'Weft checks its tokenizer: naïve café, 3.14 × 10⁶ — 東京タワー!  Ünïcode   spacing\tand "quotes" (parentheses).';

/**
 * An Embedder over `source`: waits for a first reader (at most `startTimeoutMs`), takes dims and the input
 * limit from it, checks the local tokenizer against it, and sends every embed call to a reader.
 */
export async function readerEmbedder(dir: string, source: EncoderReaderSource, opts: { startTimeoutMs?: number; log?: (msg: string, fields?: Record<string, unknown>) => void } = {}): Promise<Embedder> {
  const id = basename(resolve(dir));
  try {
    const type = await readerTypeOf(dirSource(resolve(dir)));
    if (type !== 'embed') throw new UnsupportedModelError(`documents.embedder ${dir} cannot be used: it makes a ${type} reader, not an embedding model`, { path: dir });
    const tokenizer = await loadTokenCounter(dir);
    const started = performance.now();
    const first = await source.acquire(opts.startTimeoutMs ?? READER_START_TIMEOUT_MS);
    let info, specials, remote;
    try {
      info = first.api.info();
      if (info.type !== 'embed' || !info.dims) throw new UnsupportedModelError(`documents.embedder ${dir}: its reader serves ${info.type}, not embeddings`, { path: dir });
      specials = (await first.api.tokenize('', { addSpecialTokens: true })).ids.length;
      remote = (await first.api.tokenize(PROBE, { addSpecialTokens: false })).ids.length;
    } finally {
      first.release();
    }
    const local = tokenizer.count(PROBE);
    if (local !== remote) throw new ModelFormatError(`documents.embedder ${dir}: the tokenizer loaded for chunking counts ${local} tokens where the reader counts ${remote}`, { path: dir });
    const dims = info.dims;
    opts.log?.('documents: embedder ready', { embedder: id, runs_on: source.where, device: info.device, backend: info.backend, dims, start_ms: Math.round(performance.now() - started) });
    return {
      id,
      dims,
      maxTokens: info.contextLength - specials,
      tokenizer,
      runsOn: source.where,
      async embed(texts, o = {}) {
        if (texts.length === 0) return [];
        const { api, release } = await source.acquire(EMBED_WAIT_MS, o.signal);
        try {
          const r = await api.embed(texts, { normalize: true, ...(o.signal ? { signal: o.signal } : {}) });
          if (r.vectors.length !== texts.length || r.dims !== dims) throw new ModelFormatError(`the embedder's reader returned ${r.vectors.length} vectors of ${r.dims} dims for ${texts.length} texts of ${dims}`);
          return r.vectors.map((v) => Float32Array.from(v));
        } finally {
          release();
        }
      },
      close: () => source.close(),
    };
  } catch (e) {
    await source.close().catch(() => undefined);
    throw e;
  }
}
