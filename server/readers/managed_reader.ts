/**
 * One reader as the main thread sees it: a worker that loads a model and
 * serves ReaderApi, with readiness, in-flight accounting for balancing, and
 * restart with exponential backoff when the worker dies (not when it is
 * deleted). A model that fails to load is reported, not restarted in a loop:
 * load errors are configuration errors. The worker is a Node worker thread or
 * a Web Worker (Deno), per transport.ts, or a reader process on NATS
 * (nats_transport.ts): a reader gone from the broker is handled as a crash
 * (requests in flight fail with 503 `reader_disconnected`), and the re-attach
 * backoff is capped at REMOTE_BACKOFF_CAP_MS and starts over after each
 * successful attach.
 *
 * A reader whose model is a Hub id (PUT /models with `org/name`) first
 * downloads it in this process (`state: 'downloading'`, progress in
 * `download`), then loads the local snapshot as for a path; a failed download
 * leaves it `failed` with the Hub's typed error, like a failed load.
 */
import { errorFromJSON, errorToJSON, type ErrorJSON } from '../../core/errors.ts';
import { RemoteReader, type Msg } from '../../core/engine/protocol.ts';
import type { ReaderInfo, ReaderStats } from '../../core/engine/reader_api.ts';
import type { ReaderSpec } from './spec.ts';
import { defaultTransport, unrefTimer, type WorkerHandle, type WorkerTransport } from './transport.ts';

export type ReaderState = 'downloading' | 'loading' | 'ready' | 'failed' | 'restarting' | 'stopped';

/** Longest wait for a reader's statistics in health, status, metrics and scaling, ms; a busy reader is reported from what is known. */
export const PROBE_MS = 500;

/** Bytes of a Hub download so far: all files together, and the file being fetched. */
export interface DownloadProgress {
  loaded: number;
  total: number;
  file: string;
}

/** Fetches the model into a local path (a Hub pull), reporting progress; aborted when the reader is stopped. */
export type ModelFetch = (onProgress: (p: DownloadProgress) => void, signal: AbortSignal) => Promise<string>;

const LOCAL_BACKOFF_CAP_MS = 30_000;
const REMOTE_BACKOFF_CAP_MS = 5_000;

export class ManagedReader {
  state: ReaderState = 'loading';
  /** While (and after) the model is fetched from a Hub: bytes so far; null for a local model. */
  download: DownloadProgress | null = null;
  /** The spec the worker is spawned with: `spec` with `model` made a local path once fetched. */
  private spawnSpec: ReaderSpec;
  /** For a fetched model: settles when the fetch ends, with its error (null: on disk); not rejected by a stop. */
  fetched: Promise<ErrorJSON | null> | null = null;
  private readonly fetchAbort = new AbortController();
  api: RemoteReader | null = null;
  error: ErrorJSON | null = null;
  restarts = 0;
  /** Taken out of balancing by the scaler; stopped once nothing is in flight. */
  draining = false;
  /** Started by the scaler (scale-up or cold start), not by an entry or PUT /models. */
  autoscaled = false;
  /** Started at run time (PUT /models): its failure is reported but does not make the server unhealthy. */
  runtime = false;
  /** Date.now() when the reader was last picked for a request or its last request finished (or it started). */
  idleSince = Date.now();
  /** Load other front ends put on a remote reader (from its reported stats); 0 for local readers. */
  externalLoad = 0;
  private inFlightCount = 0;
  private idleWaiters: (() => void)[] = [];
  /** Restart attempts since the last successful start (the backoff exponent). */
  private backoffStep = 0;
  private worker: WorkerHandle | null = null;
  private stopping = false;
  private readyWaiters: (() => void)[] = [];
  readonly startedAt = Date.now();
  /** Date.now() of the last message from the worker, and of the last sign its work advanced (a stream event, an answer, more computed tokens). */
  private lastHeardAt = Date.now();
  private lastProgressAt = Date.now();
  /** Since when requests have been in flight (0: none). */
  private workSince = 0;
  /** The statistics probe in flight (one at a time) and when it was sent. */
  private probe: Promise<ReaderStats | null> | null = null;
  private probeSince: number | null = null;
  /** The last statistics the reader answered. */
  lastStats: ReaderStats | null = null;

  constructor(
    readonly readerId: string,
    readonly spec: ReaderSpec,
    private readonly transport: WorkerTransport = defaultTransport(),
    fetchModel?: ModelFetch,
    /** Told the local path once a fetched model is on disk. */
    onFetched?: (path: string) => void,
  ) {
    this.spawnSpec = spec;
    if (fetchModel) this.fetched = this.fetchThenSpawn(fetchModel, onFetched);
    else this.spawn();
  }

  private async fetchThenSpawn(fetchModel: ModelFetch, onFetched?: (path: string) => void): Promise<ErrorJSON | null> {
    this.state = 'downloading';
    this.download = { loaded: 0, total: 0, file: '' };
    try {
      const path = await fetchModel((p) => (this.download = p), this.fetchAbort.signal);
      if (this.stopping) return null;
      this.spawnSpec = { ...this.spec, model: path };
      onFetched?.(path);
      this.state = 'loading';
      this.spawn();
      return null;
    } catch (e) {
      if (this.stopping) return null;
      this.error = errorToJSON(e);
      this.state = 'failed';
      this.settle();
      return this.error;
    }
  }

  /** Requests in flight (for least-loaded balancing, scaling and draining). */
  get inFlight(): number {
    return this.inFlightCount;
  }

  set inFlight(n: number) {
    if (this.inFlightCount === 0 && n > 0) this.workSince = Date.now();
    this.inFlightCount = Math.max(0, n);
    if (this.inFlightCount === 0) {
      this.idleSince = Date.now();
      for (const w of this.idleWaiters.splice(0)) w();
    }
  }

  /**
   * Engine statistics, waiting at most `ms`: a reader that does not answer in
   * time (its thread is busy) yields its last known statistics with
   * `fresh: false`; the probe keeps running and its answer refreshes them.
   */
  async statsWithin(ms: number): Promise<{ stats: ReaderStats | null; fresh: boolean }> {
    if (!this.ready || !this.api) return { stats: null, fresh: false };
    if (!this.probe) {
      this.probeSince = Date.now();
      const before = this.lastStats?.computedTokens;
      this.probe = this.api.stats().then(
        (s) => {
          if (s.computedTokens !== before) this.lastProgressAt = Date.now();
          this.lastStats = s;
          return s;
        },
        () => null,
      );
      void this.probe.finally(() => {
        this.probe = null;
        this.probeSince = null;
      });
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), ms)));
    const s = await Promise.race([this.probe, timeout]);
    clearTimeout(timer);
    return s ? { stats: s, fresh: true } : { stats: this.lastStats, fresh: false };
  }

  /**
   * How long work has waited on this reader without a sign of progress, ms
   * (0 when nothing waits): requests in flight with no stream event, answer or
   * new computed tokens since, or a statistics probe left unanswered.
   */
  stalledMs(now = Date.now()): number {
    let ms = 0;
    if (this.inFlightCount > 0) ms = now - Math.max(this.lastProgressAt, this.workSince);
    if (this.probeSince !== null) ms = Math.max(ms, now - Math.max(this.lastHeardAt, this.probeSince));
    return Math.max(0, ms);
  }

  /** What least-loaded picking compares: this process's requests in flight plus other front ends' load. */
  get load(): number {
    return this.inFlightCount + this.externalLoad;
  }

  /** Resolves once nothing is in flight. */
  waitIdle(): Promise<void> {
    if (this.inFlightCount === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  get ready(): boolean {
    return this.state === 'ready';
  }

  get info(): ReaderInfo | null {
    return this.api?.info() ?? null;
  }

  /** Resolves when ready, failed or stopped (whichever first), or after `ms`. */
  waitSettled(ms: number): Promise<void> {
    if (this.state !== 'downloading' && this.state !== 'loading' && this.state !== 'restarting') return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.readyWaiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  private settle(): void {
    for (const w of this.readyWaiters.splice(0)) w();
  }

  private spawn(): void {
    const worker = this.transport({ readerId: this.readerId, spec: this.spawnSpec });
    this.worker = worker;
    worker.onMessage((m: Msg) => {
      this.lastHeardAt = Date.now();
      if (m.kind === 'event' || m.kind === 'end' || m.kind === 'error' || (m.kind === 'result' && this.probe === null)) this.lastProgressAt = this.lastHeardAt;
      if (m.kind === 'ready') {
        this.api = new RemoteReader(worker, m.content as ReaderInfo);
        this.state = 'ready';
        this.error = null;
        // The idle clock starts when the replica can serve: one that loaded for longer than
        // scale_down_after_seconds was otherwise drained the moment it was ready, before the
        // client told to retry (503 reader_starting) came back for it.
        if (this.inFlightCount === 0) this.idleSince = Date.now();
        if (this.spec.remote) this.backoffStep = 0;
        this.settle();
      } else if (m.kind === 'failed') {
        this.error = m.content as ErrorJSON;
        this.state = 'failed';
        this.settle();
        void worker.terminate();
      }
    });
    worker.onError((e) => {
      this.error = { name: e.name, code: 'reader_crashed', message: e.message };
    });
    worker.onExit((reason) => {
      this.api?.close(errorFromJSON(reason ?? { name: 'UnavailableError', code: 'reader_crashed', message: `reader ${this.readerId} stopped` }));
      this.api = null;
      this.inFlight = 0;
      if (reason && !this.stopping && this.state !== 'failed') this.error = reason;
      if (this.stopping) {
        this.state = 'stopped';
        this.settle();
        return;
      }
      if (this.state === 'failed') return;
      // Crashed after (or while) loading: restart with backoff, capped at 30 s.
      this.state = 'restarting';
      const delay = Math.min(this.spec.remote ? REMOTE_BACKOFF_CAP_MS : LOCAL_BACKOFF_CAP_MS, 500 * 2 ** this.backoffStep++);
      this.restarts++;
      unrefTimer(
        setTimeout(() => {
          if (!this.stopping) {
            this.state = 'loading';
            this.spawn();
          }
        }, delay),
      );
    });
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.fetchAbort.abort();
    await this.worker?.terminate();
    this.state = 'stopped';
    this.settle();
  }
}
