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
 */
import { errorFromJSON, type ErrorJSON } from '../../core/errors.ts';
import { RemoteReader, type Msg } from '../../core/engine/protocol.ts';
import type { ReaderInfo } from '../../core/engine/reader_api.ts';
import type { ReaderSpec } from './spec.ts';
import { defaultTransport, unrefTimer, type WorkerHandle, type WorkerTransport } from './transport.ts';

export type ReaderState = 'loading' | 'ready' | 'failed' | 'restarting' | 'stopped';

const LOCAL_BACKOFF_CAP_MS = 30_000;
const REMOTE_BACKOFF_CAP_MS = 5_000;

export class ManagedReader {
  state: ReaderState = 'loading';
  api: RemoteReader | null = null;
  error: ErrorJSON | null = null;
  restarts = 0;
  /** Taken out of balancing by the scaler; stopped once nothing is in flight. */
  draining = false;
  /** Started by the scaler (scale-up or cold start), not by an entry or PUT /models. */
  autoscaled = false;
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

  constructor(
    readonly readerId: string,
    readonly spec: ReaderSpec,
    private readonly transport: WorkerTransport = defaultTransport(),
  ) {
    this.spawn();
  }

  /** Requests in flight (for least-loaded balancing, scaling and draining). */
  get inFlight(): number {
    return this.inFlightCount;
  }

  set inFlight(n: number) {
    this.inFlightCount = Math.max(0, n);
    if (this.inFlightCount === 0) {
      this.idleSince = Date.now();
      for (const w of this.idleWaiters.splice(0)) w();
    }
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
    if (this.state !== 'loading' && this.state !== 'restarting') return Promise.resolve();
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
    const worker = this.transport({ readerId: this.readerId, spec: this.spec });
    this.worker = worker;
    worker.onMessage((m: Msg) => {
      if (m.kind === 'ready') {
        this.api = new RemoteReader(worker, m.content as ReaderInfo);
        this.state = 'ready';
        this.error = null;
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
    await this.worker?.terminate();
    this.state = 'stopped';
    this.settle();
  }
}
