/**
 * Document ingestion across processes: a JetStream work queue over a shared
 * PostgreSQL store.
 *
 *   front end  POST /api/v1/documents → rows committed in the store (the
 *              202/207 answer comes after that commit, as with the local
 *              pool) → one message per accepted document on
 *              `weft.documents.ingest.<doc_id>` (stream WEFT_DOCUMENTS,
 *              work-queue retention, message id `<doc_id>:<attempts>` so a
 *              publish repeated within the duplicate window is dropped).
 *   worker     pulls one message per free slot from the durable consumer
 *              `weft-document-workers`, takes the document in the store
 *              (claimById: queued → reading, or an in-progress document
 *              whose worker died), runs read → chunk → embed → store, and
 *              acknowledges only after the store committed `ready` (or
 *              `failed`). While a job runs the worker marks the message in
 *              progress every ack_wait / 3, so only a dead (or cut-off)
 *              worker's message is redelivered, after ack_wait.
 *
 * Delivery is at least once; the store makes it exactly once in effect:
 * chunks and `ready` are written in one transaction guarded by the state
 * (store.ts `complete`), so a redelivered message for a finished document is
 * just acknowledged, and a job cut off before its commit left nothing.
 * A document whose processing was cut off more than max_attempts times (a
 * document that kills its worker, say) fails with `ingest_interrupted`
 * instead of taking down every worker in turn.
 *
 * Reconciliation: a front end that dies between its store commit and the
 * publish, or a broker that lost a message, leaves a document without a
 * message. Every worker, each queue_reconcile_seconds, lists the subjects
 * the stream holds and republishes unfinished documents untouched that long
 * that have none. A duplicate message that results from a race is harmless
 * (the state machine ignores it).
 *
 * Front ends only publish (workers 0 = accept only); they create the stream
 * when it is missing, workers also the consumer (and set its ack_wait).
 */
import { jetstream, jetstreamManager, AckPolicy, DeliverPolicy, JetStreamApiError, RetentionPolicy, StorageType, type JetStreamClient, type JetStreamManager, type JsMsg } from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/transport-node';
import type { Embedder } from '../../core/documents/embedder.ts';
import { processDocument, type JobResult } from '../../core/documents/pipeline.ts';
import { isTerminal } from '../../core/documents/states.ts';
import type { DocumentStore } from '../../core/documents/store.ts';
import type { DocState } from '../../core/documents/types.ts';
import { countJob, emptyTotals, waitForDocuments, type IngestQueue, type PoolTotals } from './queue.ts';

export const DOCS_STREAM = 'WEFT_DOCUMENTS';
export const DOCS_SUBJECTS = 'weft.documents.ingest';
export const DOCS_CONSUMER = 'weft-document-workers';
export const docSubject = (docId: string): string => `${DOCS_SUBJECTS}.${docId}`;

/** Publishes repeated within this window (same message id) are dropped by the stream, ms. */
const DUPLICATE_WINDOW_MS = 120_000;
/** Longest wait for the stream's acknowledgement of a publish, ms. */
const PUBLISH_TIMEOUT_MS = 5_000;
/** A worker's pull waits this long for a message before asking again, ms. */
const PULL_EXPIRES_MS = 2_000;

export interface NatsQueueOptions {
  /** Concurrent jobs of this process (0: publish only). */
  workers: number;
  maxAttempts: number;
  embedBatch: number;
  ackWaitMs: number;
  reconcileMs: number;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
  onState?: (docId: string, state: DocState) => void;
}

const isApiError = (e: unknown, code: number): boolean => e instanceof JetStreamApiError && e.code === code;

export class NatsIngestQueue implements IngestQueue {
  readonly totals: PoolTotals = emptyTotals();
  readonly active = new Set<string>();
  private readonly js: JetStreamClient;
  private jsm: JetStreamManager | null = null;
  private running = false;
  private loops: Promise<void>[] = [];
  private ac = new AbortController();
  private reconcileTimer: ReturnType<typeof setTimeout> | null = null;
  private watchers = new Set<() => void>();
  /** Redelivered messages this process took (a worker died or was cut off, or a transient error). */
  private redeliveries = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly store: DocumentStore,
    private readonly embedder: Embedder,
    private readonly opts: NatsQueueOptions,
  ) {
    this.js = jetstream(nc);
  }

  async start(): Promise<void> {
    if (this.running) return;
    const jsm = await jetstreamManager(this.nc);
    this.jsm = jsm;
    await this.ensureStream(jsm);
    if (this.opts.workers > 0) await this.ensureConsumer(jsm);
    this.running = true;
    this.ac = new AbortController();
    this.loops = Array.from({ length: this.opts.workers }, (_, i) => this.loop(i));
    if (this.opts.workers > 0) this.scheduleReconcile();
  }

  private async ensureStream(jsm: JetStreamManager): Promise<void> {
    try {
      await jsm.streams.info(DOCS_STREAM);
      return; // an existing stream is left as its operator set it (replicas, limits)
    } catch (e) {
      if (!isApiError(e, 10059)) throw e; // 10059: stream not found
    }
    try {
      await jsm.streams.add({
        name: DOCS_STREAM,
        subjects: [`${DOCS_SUBJECTS}.>`],
        retention: RetentionPolicy.Workqueue,
        storage: StorageType.File,
        duplicate_window: nanos(DUPLICATE_WINDOW_MS),
      });
    } catch (e) {
      // Another process created it first: fine if it exists now.
      await jsm.streams.info(DOCS_STREAM).catch(() => {
        throw e;
      });
    }
  }

  private async ensureConsumer(jsm: JetStreamManager): Promise<void> {
    const ackWait = nanos(this.opts.ackWaitMs);
    const info = await jsm.consumers.info(DOCS_STREAM, DOCS_CONSUMER).catch((e: unknown) => {
      if (isApiError(e, 10014)) return null; // 10014: consumer not found
      throw e;
    });
    if (info) {
      if (info.config.ack_wait !== ackWait) await jsm.consumers.update(DOCS_STREAM, DOCS_CONSUMER, { ack_wait: ackWait });
      return;
    }
    try {
      await jsm.consumers.add(DOCS_STREAM, {
        durable_name: DOCS_CONSUMER,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ack_wait: ackWait,
        max_deliver: -1, // attempts are counted in the store (max_attempts), not by the broker
        filter_subject: `${DOCS_SUBJECTS}.>`,
      });
    } catch (e) {
      await jsm.consumers.info(DOCS_STREAM, DOCS_CONSUMER).catch(() => {
        throw e;
      });
    }
  }

  /**
   * Publishes one message per document. A publish that fails (broker unreachable) is logged, not thrown:
   * the documents are already committed, so the answer stays 202, and reconciliation republishes them.
   */
  async enqueue(docIds: readonly string[], attempts = 0): Promise<void> {
    const failed: string[] = [];
    await Promise.all(
      docIds.map(async (id) => {
        try {
          await this.js.publish(docSubject(id), JSON.stringify({ doc_id: id }), { msgID: `${id}:${attempts}`, timeout: PUBLISH_TIMEOUT_MS });
        } catch (e) {
          failed.push(id);
          if (failed.length === 1) this.opts.log?.('documents: publishing to the work queue failed; a worker will republish', { error: (e as Error).message });
        }
      }),
    );
    if (failed.length) this.opts.log?.('documents: documents left for reconciliation', { count: failed.length });
  }

  async waitFor(ids: readonly string[], timeoutMs: number, signal?: AbortSignal): Promise<void> {
    // Jobs run in other processes: poll the shared store (local completions cut the wait short).
    await waitForDocuments(this.store, ids, timeoutMs, {
      ...(signal ? { signal } : {}),
      pollMs: 250,
      subscribe: (wake) => {
        this.watchers.add(wake);
        return () => this.watchers.delete(wake);
      },
    });
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    if (this.reconcileTimer) clearTimeout(this.reconcileTimer);
    this.ac.abort(new Error('document worker stopped'));
    await Promise.allSettled(this.loops);
    this.loops = [];
  }

  async status(): Promise<Record<string, unknown>> {
    const out: Record<string, unknown> = { kind: 'nats', stream: DOCS_STREAM, consumer: DOCS_CONSUMER, workers: this.opts.workers, redeliveries_taken: this.redeliveries };
    try {
      const jsm = this.jsm ?? (await jetstreamManager(this.nc));
      const s = await jsm.streams.info(DOCS_STREAM);
      out.messages = s.state.messages;
      const c = await jsm.consumers.info(DOCS_STREAM, DOCS_CONSUMER).catch(() => null);
      if (c) Object.assign(out, { pending: c.num_pending, in_progress: c.num_ack_pending, redelivered: c.num_redelivered });
    } catch (e) {
      out.error = (e as Error).message;
    }
    return out;
  }

  private onState(id: string, state: DocState): void {
    this.opts.onState?.(id, state);
    if (isTerminal(state)) for (const w of [...this.watchers]) w();
  }

  private async loop(worker: number): Promise<void> {
    let consumer = null;
    while (this.running) {
      let msg: JsMsg | null = null;
      try {
        consumer ??= await this.js.consumers.get(DOCS_STREAM, DOCS_CONSUMER);
        msg = await consumer.next({ expires: PULL_EXPIRES_MS });
      } catch (e) {
        if (!this.running) break;
        this.opts.log?.('documents: pulling from the work queue failed', { worker, error: (e as Error).message });
        consumer = null;
        await sleep(1000, this.ac.signal);
        continue;
      }
      if (!msg) continue;
      if (!this.running) {
        msg.nak(); // taken while stopping: straight back to the queue
        break;
      }
      await this.handle(msg, worker);
    }
  }

  private async handle(msg: JsMsg, worker: number): Promise<void> {
    const id = msg.subject.slice(DOCS_SUBJECTS.length + 1);
    // Keeps the message ours while the job runs (a dead process stops these, and the broker redelivers).
    const beat = setInterval(() => msg.working(), Math.max(200, Math.floor(this.opts.ackWaitMs / 3)));
    this.active.add(id);
    try {
      const job = await this.store.claimById(id);
      if (!job) {
        await msg.ackAck().catch(() => undefined); // ready, failed or deleted: nothing left to do
        return;
      }
      if (msg.info.deliveryCount > 1) this.redeliveries++;
      if (job.record.attempts > this.opts.maxAttempts) {
        const error = { code: 'ingest_interrupted', message: `processing was started ${job.record.attempts} times and cut off each time (a worker stopped or lost its connection)` };
        if (await this.store.transition(id, 'reading', 'failed', { error })) this.onState(id, 'failed');
        await msg.ackAck().catch(() => undefined);
        return;
      }
      this.onState(id, 'reading');
      const r: JobResult = await processDocument(job, {
        store: this.store,
        embedder: this.embedder,
        embedBatch: this.opts.embedBatch,
        maxAttempts: this.opts.maxAttempts,
        signal: this.ac.signal,
        onState: (docId, state) => this.onState(docId, state),
      });
      countJob(this.totals, r);
      if (r.outcome === 'requeued') {
        // A transient error: the document is queued again in the store; the same message comes back later.
        msg.nak(Math.min(60_000, 1000 * 2 ** job.record.attempts));
        this.opts.log?.('documents: job requeued', { doc_id: id, attempts: job.record.attempts });
      } else if (r.outcome === 'aborted') {
        msg.nak(); // this process is stopping: another worker takes the document over at once
      } else {
        // ready / failed are committed; stale: the document was deleted or is another worker's now.
        await msg.ackAck().catch((e: unknown) => this.opts.log?.('documents: acknowledgement lost; the message will come back and be acknowledged then', { doc_id: id, error: (e as Error).message }));
        if (r.outcome === 'failed') this.opts.log?.('documents: job failed', { doc_id: id });
      }
    } catch (e) {
      // The store failed (unreachable, restarting): leave the document to a later delivery.
      this.opts.log?.('documents: job error', { worker, doc_id: id, error: (e as Error).message });
      msg.nak(5000);
    } finally {
      clearInterval(beat);
      this.active.delete(id);
    }
  }

  private scheduleReconcile(): void {
    // Jittered so workers started together do not all scan at once.
    const ms = this.opts.reconcileMs * (0.75 + Math.random() / 2);
    this.reconcileTimer = setTimeout(() => {
      void this.reconcile()
        .catch((e: unknown) => this.opts.log?.('documents: reconciliation failed', { error: (e as Error).message }))
        .finally(() => {
          if (this.running) this.scheduleReconcile();
        });
    }, ms);
    this.reconcileTimer.unref?.();
  }

  /** Republishes unfinished documents, untouched for reconcileMs, that have no message in the stream. Returns how many. */
  async reconcile(): Promise<number> {
    const docs = await this.store.unfinished(this.opts.reconcileMs, 10_000);
    if (!docs.length) return 0;
    const jsm = this.jsm ?? (await jetstreamManager(this.nc));
    const info = await jsm.streams.info(DOCS_STREAM, { subjects_filter: `${DOCS_SUBJECTS}.>` });
    const present = new Set(Object.keys(info.state.subjects ?? {}));
    const orphans = docs.filter((d) => !present.has(docSubject(d.docId)));
    for (const d of orphans) await this.enqueue([d.docId], d.attempts);
    if (orphans.length) this.opts.log?.('documents: republished documents that had no work-queue message', { count: orphans.length });
    return orphans.length;
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    }, { once: true });
  });
}
