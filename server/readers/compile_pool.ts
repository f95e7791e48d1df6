/**
 * A reader's compile worker (a Node worker thread, compile_worker_entry.ts):
 * constraint compiles run there, so the thread that steps the batch keeps
 * stepping other requests while a schema or regex compiles. Jobs run one at a
 * time in arrival order. Cancelling a job (its request's AbortSignal) while
 * it runs terminates the worker, which stops the compile at once whatever it
 * is doing; the jobs still waiting go to a fresh worker. Started on first use.
 */
import { Worker } from 'node:worker_threads';
import { CancelledError, errorFromJSON, type ErrorJSON } from '../../core/errors.ts';
import type { ConstraintSpec, RuleNfas, Whitespace } from '../../core/structured/index.ts';
import { type PackedRules, unpackRules } from '../../core/structured/rule_pack.ts';
import type { CompileJob } from './compile_worker_entry.ts';

const FROM_SOURCE = import.meta.url.endsWith('.ts');

interface Pending {
  job: CompileJob;
  resolve(r: RuleNfas): void;
  reject(e: unknown): void;
}

export interface CompilePoolStats {
  /** Jobs sent to a worker. */
  started: number;
  /** Jobs answered (rules or an error). */
  finished: number;
  /** Jobs cancelled by their request. */
  cancelled: number;
  /** Workers terminated to stop a running job. */
  terminated: number;
}

export class CompilePool {
  private worker: Worker | null = null;
  private readonly pending = new Map<number, Pending>();
  private next = 0;
  readonly stats: CompilePoolStats = { started: 0, finished: 0, cancelled: 0, terminated: 0 };

  /** Rule NFAs of `spec` (compileRules), built on the worker; rejects with CancelledError if `signal` aborts first. */
  rules(spec: ConstraintSpec, ws: Whitespace, strict: boolean, millis: number | undefined, signal?: AbortSignal): Promise<RuleNfas> {
    if (signal?.aborted) return Promise.reject(new CancelledError('the request was cancelled before its constraint compiled'));
    const job: CompileJob = { id: this.next++, spec, ws, strict, ...(Number.isFinite(millis) ? { millis } : {}) };
    return new Promise<RuleNfas>((resolve, reject) => {
      this.pending.set(job.id, { job, resolve, reject });
      signal?.addEventListener('abort', () => this.cancel(job.id), { once: true });
      this.send(job);
    });
  }

  private spawn(): Worker {
    const w = new Worker(new URL(FROM_SOURCE ? './compile_worker_boot.mjs' : './compile_worker_entry.js', import.meta.url));
    w.unref(); // an idle compile worker never keeps the process alive
    w.on('message', (m: { id: number; packed?: PackedRules; error?: ErrorJSON }) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      this.stats.finished++;
      if (m.packed) p.resolve(unpackRules(m.packed));
      else p.reject(errorFromJSON(m.error!));
    });
    w.on('error', (e) => this.fail(w, e));
    w.on('exit', () => this.fail(w, new Error('the constraint compile worker exited')));
    return w;
  }

  private send(job: CompileJob): void {
    this.worker ??= this.spawn();
    this.stats.started++;
    this.worker.postMessage(job);
  }

  /** A worker died on its own: its jobs fail. */
  private fail(w: Worker, e: unknown): void {
    if (this.worker !== w) return;
    this.worker = null;
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
  }

  private cancel(id: number): void {
    const p = this.pending.get(id);
    if (!p) return;
    const running = this.pending.keys().next().value === id; // jobs run in arrival order
    this.pending.delete(id);
    this.stats.cancelled++;
    p.reject(new CancelledError('the request was cancelled while its constraint compiled'));
    if (!running) return; // still queued: its answer, if it comes, is dropped
    // Stop the running compile now: terminate the worker, and replay the jobs still waiting on a fresh one.
    const w = this.worker;
    this.worker = null;
    if (w) {
      this.stats.terminated++;
      void w.terminate();
    }
    for (const rest of this.pending.values()) this.send(rest.job);
  }

  /** Ends the worker (jobs in flight fail). */
  async close(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    for (const p of this.pending.values()) p.reject(new CancelledError('the reader is closing'));
    this.pending.clear();
    if (w) await w.terminate();
  }
}
