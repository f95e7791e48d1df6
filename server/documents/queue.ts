/**
 * Where accepted documents wait for a worker, as the document service sees
 * it: the in-process pool (pool.ts: this process's loops claim queued
 * documents from its store) or the NATS work queue (nats_queue.ts: a
 * JetStream stream that worker processes on any machine consume, over a
 * shared PostgreSQL store). Both answer wait_for_completion by reading the
 * store, so a document finished by another process is seen finished here.
 */
import type { JobResult } from '../../core/documents/pipeline.ts';
import { isTerminal } from '../../core/documents/states.ts';
import type { DocumentStore } from '../../core/documents/store.ts';

/** Running totals of this process's jobs, for the status route and benchmarks. */
export interface PoolTotals {
  ready: number;
  failed: number;
  requeued: number;
  chunks: number;
  /** Milliseconds per step, summed over jobs. */
  readMs: number;
  chunkMs: number;
  embedMs: number;
  storeMs: number;
}

export const emptyTotals = (): PoolTotals => ({ ready: 0, failed: 0, requeued: 0, chunks: 0, readMs: 0, chunkMs: 0, embedMs: 0, storeMs: 0 });

/** Adds one job's result to `t`. */
export function countJob(t: PoolTotals, r: JobResult): void {
  t.readMs += r.timings.read;
  t.chunkMs += r.timings.chunk;
  t.embedMs += r.timings.embed;
  t.storeMs += r.timings.store;
  if (r.outcome === 'ready') {
    t.ready++;
    t.chunks += r.chunks;
  } else if (r.outcome === 'failed') t.failed++;
  else if (r.outcome === 'requeued') t.requeued++;
}

export interface IngestQueue {
  readonly totals: PoolTotals;
  /** Jobs this process is running (doc ids). */
  readonly active: Set<string>;
  start(): Promise<void>;
  /** Documents just recorded in the store (state queued): wake the local loops, or publish their messages. */
  enqueue(docIds: readonly string[]): Promise<void>;
  /** Resolves when every document of `ids` is ready, failed or gone, or at `timeoutMs`, or when `signal` aborts. */
  waitFor(ids: readonly string[], timeoutMs: number, signal?: AbortSignal): Promise<void>;
  /** Stops taking work; running jobs are abandoned where they stand (resumed elsewhere or at the next start). */
  stop(): Promise<void>;
  /** What the status route shows about the queue (kind, depth where known). */
  status(): Promise<Record<string, unknown>>;
}

/**
 * Polls the store until every document of `ids` is terminal or gone. Waits at most `pollMs` between
 * reads; `subscribe(wake)` lets local job completions cut a wait short (returns its unsubscribe).
 */
export async function waitForDocuments(
  store: DocumentStore,
  ids: readonly string[],
  timeoutMs: number,
  opts: { signal?: AbortSignal; pollMs: number; subscribe?: (wake: () => void) => () => void },
): Promise<void> {
  const { signal } = opts;
  const deadline = Date.now() + timeoutMs;
  let pending = [...new Set(ids)];
  while (pending.length && Date.now() < deadline && !signal?.aborted) {
    const recs = new Map((await store.getMany(pending)).map((r) => [r.docId, r.state]));
    pending = pending.filter((id) => recs.has(id) && !isTerminal(recs.get(id)!));
    if (!pending.length) break;
    await new Promise<void>((resolve) => {
      let unsubscribe = (): void => {};
      const done = (): void => {
        clearTimeout(t);
        unsubscribe();
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const t = setTimeout(done, Math.max(1, Math.min(opts.pollMs, deadline - Date.now())));
      unsubscribe = opts.subscribe?.(done) ?? unsubscribe;
      signal?.addEventListener('abort', done, { once: true });
    });
  }
}
