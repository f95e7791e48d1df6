/**
 * Dynamic batching for encoder models (embed / rerank / classify): concurrent requests'
 * inputs share one queue, and a batch closes when it is full (`maxBatchSize` inputs;
 * the service maps WEFT_MAX_BATCH_SIZE onto it) or when its oldest input has waited
 * `batchDurationMs` (WEFT_BATCH_DURATION_MILLIS), whichever comes first. Batches run one
 * at a time through a runner callback (the GPU does one forward at a time anyway); while
 * one runs the next fills up, so under load batches leave full.
 *
 * Pure logic, no GPU: the runner gets the inputs of one batch, in arrival order, and
 * returns one output per input. Padding and sorting by length are the runner's business
 * (EncoderModel sorts a batch by length to pad less). Each output goes back to the
 * request and position it came from, so results never leak between requests. A request
 * larger than maxBatchSize spans several batches. When a batch fails, only the requests
 * in it are affected; with several requests in it, each is re-run alone so one bad input
 * fails only its own request. A request can be cancelled through an AbortSignal.
 */
import { CancelledError, UnavailableError } from '../errors.ts';

export interface EncoderBatcherOptions {
  /** Inputs per batch (default 32). */
  maxBatchSize?: number;
  /** Longest wait of an input before its batch closes, in milliseconds (default 5). */
  batchDurationMs?: number;
  /** Re-run the requests of a failed multi-request batch one by one (default true). */
  isolateFailures?: boolean;
}

/** Runs one batch: one output per input, in order. */
export type BatchRunner<I, O> = (inputs: I[]) => Promise<O[]>;

interface Request<O> {
  outputs: O[];
  remaining: number;
  done: boolean;
  resolve(out: O[]): void;
  reject(e: unknown): void;
}

interface Item<I, O> {
  input: I;
  req: Request<O>;
  index: number;
  /** Date.now() when queued. */
  at: number;
}

export class EncoderBatcher<I, O> {
  readonly maxBatchSize: number;
  readonly batchDurationMs: number;
  private readonly isolate: boolean;
  private queue: Item<I, O>[] = [];
  private running = false;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private closed = false;
  /** Batches run so far (for tests and metrics). */
  batches = 0;

  constructor(
    private readonly run: BatchRunner<I, O>,
    opts: EncoderBatcherOptions = {},
  ) {
    this.maxBatchSize = Math.max(1, Math.floor(opts.maxBatchSize ?? 32));
    this.batchDurationMs = Math.max(0, opts.batchDurationMs ?? 5);
    this.isolate = opts.isolateFailures ?? true;
  }

  /** Inputs waiting for a batch. */
  get queued(): number {
    return this.queue.length;
  }

  /** Queues `inputs` as one request; resolves with their outputs in the same order. */
  submit(inputs: readonly I[], opts: { signal?: AbortSignal } = {}): Promise<O[]> {
    if (this.closed) return Promise.reject(new UnavailableError('encoder_closed', 'the encoder batcher is closed'));
    if (inputs.length === 0) return Promise.resolve([]);
    const { signal } = opts;
    if (signal?.aborted) return Promise.reject(new CancelledError());
    return new Promise<O[]>((resolve, reject) => {
      const req: Request<O> = { outputs: new Array<O>(inputs.length), remaining: inputs.length, done: false, resolve, reject };
      if (signal) {
        const onAbort = (): void => this.fail(req, new CancelledError());
        signal.addEventListener('abort', onAbort, { once: true });
        const settle = (): void => signal.removeEventListener('abort', onAbort);
        req.resolve = (o) => (settle(), resolve(o));
        req.reject = (e) => (settle(), reject(e));
      }
      const at = Date.now();
      inputs.forEach((input, index) => this.queue.push({ input, req, index, at }));
      this.schedule();
    });
  }

  /** Rejects every queued request and refuses new ones; a running batch still completes. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const item of [...this.queue]) this.fail(item.req, new UnavailableError('encoder_closed', 'the encoder batcher is closed'));
  }

  /**
   * Starts a batch (on a microtask, so same-tick submits still join) when the queue holds a
   * full one or, after a timer or a finished batch, when the oldest input is due; else
   * arms the timer for the oldest input's deadline.
   */
  private schedule(dueNow = false): void {
    if (this.running || this.queue.length === 0) return;
    const wait = this.queue[0]!.at + this.batchDurationMs - Date.now();
    if (this.queue.length >= this.maxBatchSize || (dueNow && wait <= 0)) {
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
      this.running = true;
      queueMicrotask(() => void this.runNext());
      return;
    }
    this.timer ??= setTimeout(() => {
      this.timer = null;
      this.schedule(true);
    }, Math.max(0, wait));
  }

  private async runNext(): Promise<void> {
    const batch = this.queue.splice(0, this.maxBatchSize);
    if (batch.length) this.batches++;
    try {
      await this.execute(batch);
    } catch (e) {
      const reqs = [...new Set(batch.map((i) => i.req))].filter((r) => !r.done);
      if (this.isolate && reqs.length > 1) {
        for (const r of reqs) {
          try {
            await this.execute(batch.filter((i) => i.req === r));
          } catch (e2) {
            this.fail(r, e2);
          }
        }
      } else {
        for (const r of reqs) this.fail(r, e);
      }
    } finally {
      this.running = false;
      this.schedule(true);
    }
  }

  /** Runs items (skipping those of finished requests) and routes each output to its request. */
  private async execute(items: Item<I, O>[]): Promise<void> {
    const live = items.filter((i) => !i.req.done);
    if (!live.length) return;
    const outs = await this.run(live.map((i) => i.input));
    if (!Array.isArray(outs) || outs.length !== live.length) {
      throw new Error(`encoder batch runner returned ${Array.isArray(outs) ? outs.length : typeof outs} outputs for ${live.length} inputs`);
    }
    live.forEach((item, k) => {
      const r = item.req;
      if (r.done) return;
      r.outputs[item.index] = outs[k]!;
      if (--r.remaining === 0) {
        r.done = true;
        r.resolve(r.outputs);
      }
    });
  }

  /** Rejects a request and drops its queued inputs. */
  private fail(req: Request<O>, e: unknown): void {
    if (req.done) return;
    req.done = true;
    this.queue = this.queue.filter((i) => i.req !== req);
    req.reject(e);
  }
}
