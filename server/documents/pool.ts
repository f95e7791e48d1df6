/**
 * The background worker pool: `workers` concurrent loops, each claiming the
 * oldest queued document from the store and running its job
 * (core/documents/pipeline.ts). Loops sleep when the queue is empty and wake
 * on `notify()` (new documents accepted) or after `pollMs` (work queued by
 * anything else).
 *
 * Why async loops in the server process rather than threads: the store is an
 * in-process database and the embedder a GPU device of this process; jobs
 * spend their time in awaits (GPU, store), and the embedder's dynamic batcher
 * merges the loops' concurrent embed calls into common GPU batches.
 *
 * `start()` first requeues documents a previous process left in progress —
 * the restart half of "nothing accepted is lost". `stop()` aborts running
 * jobs where they stand; they are requeued by the next `start()`, as after a
 * crash. `waitFor()` serves wait_for_completion.
 */
import type { Embedder } from '../../core/documents/embedder.ts';
import { processDocument, type JobResult } from '../../core/documents/pipeline.ts';
import { isTerminal } from '../../core/documents/states.ts';
import { countJob, emptyTotals, waitForDocuments, type IngestQueue, type PoolTotals } from './queue.ts';
import type { DocumentStore } from '../../core/documents/store.ts';
import type { DocState } from '../../core/documents/types.ts';

export interface PoolOptions {
  workers: number;
  maxAttempts: number;
  embedBatch: number;
  /** Longest sleep of an idle loop, ms (default 2000). */
  pollMs?: number;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
  /** Every state change a job makes (events, metrics, tests). */
  onState?: (docId: string, state: DocState) => void;
}

export type { PoolTotals } from './queue.ts';

export class IngestPool implements IngestQueue {
  readonly totals: PoolTotals = emptyTotals();
  private running = false;
  private loops: Promise<void>[] = [];
  private ac = new AbortController();
  private sleepers = new Set<() => void>();
  private watchers = new Set<() => void>();
  /** Jobs in progress (doc ids), for status. */
  readonly active = new Set<string>();

  constructor(
    private readonly store: DocumentStore,
    private readonly embedder: Embedder,
    private readonly opts: PoolOptions,
  ) {}

  get isRunning(): boolean {
    return this.running;
  }

  async start(): Promise<void> {
    if (this.running) return;
    const resumed = await this.store.requeueInProgress();
    if (resumed) this.opts.log?.('documents: resuming unfinished documents', { count: resumed });
    this.running = true;
    this.ac = new AbortController();
    this.loops = Array.from({ length: Math.max(1, this.opts.workers) }, (_, i) => this.loop(i));
  }

  /** Wakes idle loops (new work was queued). */
  notify(): void {
    for (const wake of [...this.sleepers]) wake();
  }

  /** Stops taking work and aborts running jobs (left for the next start to requeue). */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.ac.abort(new Error('ingest pool stopped'));
    this.notify();
    await Promise.allSettled(this.loops);
    this.loops = [];
  }

  /**
   * Resolves when every document of `ids` is ready, failed or gone, or when
   * `timeoutMs` passed or `signal` aborted (whichever comes first).
   */
  async waitFor(ids: readonly string[], timeoutMs: number, signal?: AbortSignal): Promise<void> {
    await waitForDocuments(this.store, ids, timeoutMs, {
      ...(signal ? { signal } : {}),
      pollMs: 1000,
      subscribe: (wake) => {
        this.watchers.add(wake);
        return () => this.watchers.delete(wake);
      },
    });
  }

  async enqueue(): Promise<void> {
    this.notify();
  }

  async status(): Promise<Record<string, unknown>> {
    return { kind: 'local', workers: Math.max(1, this.opts.workers) };
  }

  private onState(id: string, state: DocState): void {
    this.opts.onState?.(id, state);
    if (isTerminal(state)) for (const w of [...this.watchers]) w();
    if (state === 'queued') this.notify();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(t);
        this.sleepers.delete(wake);
        resolve();
      };
      const t = setTimeout(wake, ms);
      this.sleepers.add(wake);
    });
  }

  private async loop(worker: number): Promise<void> {
    const signal = this.ac.signal;
    while (this.running) {
      let job;
      try {
        job = await this.store.claim();
      } catch (e) {
        if (!this.running) break;
        this.opts.log?.('documents: claiming work failed', { worker, error: (e as Error).message });
        await this.sleep(this.opts.pollMs ?? 2000);
        continue;
      }
      if (!job) {
        await this.sleep(this.opts.pollMs ?? 2000);
        continue;
      }
      const id = job.record.docId;
      this.active.add(id);
      let r: JobResult;
      try {
        r = await processDocument(job, {
          store: this.store,
          embedder: this.embedder,
          embedBatch: this.opts.embedBatch,
          maxAttempts: this.opts.maxAttempts,
          signal,
          onState: (docId, state) => this.onState(docId, state),
        });
      } catch (e) {
        // Only the store can throw here (the job's own errors become states).
        this.opts.log?.('documents: job error', { worker, doc_id: id, error: (e as Error).message });
        this.active.delete(id);
        if (this.running) await this.sleep(this.opts.pollMs ?? 2000);
        continue;
      }
      this.active.delete(id);
      countJob(this.totals, r);
      if (r.outcome === 'failed' || r.outcome === 'requeued') this.opts.log?.(`documents: job ${r.outcome}`, { doc_id: id });
    }
  }
}
