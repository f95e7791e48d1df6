/**
 * A reader's tokenizer worker (a Node worker thread, tokenize_worker_entry.ts):
 * long prompts and /tokenize texts encode there, so the thread that steps the
 * batch keeps stepping while a 30 KB prompt or a 64 KB /tokenize text (tens to
 * hundreds of ms of BPE) is encoded. The worker builds its own copy of the
 * reader's tokenizer from `Tokenizer.source`: same library, same inputs, so
 * the same ids. Jobs run one at a time in arrival order; a cancelled request's
 * job is dropped when it answers (the work is bounded by the byte limits on
 * prompts and /tokenize, so the worker is never terminated for it). Started on
 * first use.
 */
import { Worker } from 'node:worker_threads';
import { CancelledError, errorFromJSON, type ErrorJSON } from '../../core/errors.ts';
import type { TokenizerSource } from '../../core/tokenizer/tokenizer.ts';
import type { TokenizeMessage } from './tokenize_worker_entry.ts';

const FROM_SOURCE = import.meta.url.endsWith('.ts');

/** Texts shorter than this (UTF-16 units) encode on the calling thread: a few ms of BPE at most (SentencePiece-style BPE with no pre-tokenizer is the slowest, ~5 µs a character). */
export const OFF_THREAD_MIN_CHARS = 512;

interface Pending {
  resolve(ids: number[]): void;
  reject(e: unknown): void;
}

export class TokenizePool {
  private worker: Worker | null = null;
  private readonly init: TokenizeMessage;
  private readonly pending = new Map<number, Pending>();
  private next = 0;
  /** Jobs answered by the worker. */
  encoded = 0;

  constructor(source: TokenizerSource) {
    // Serialised once, at load: JSON text is copied to a worker as one string, not cloned object by object.
    this.init = { type: 'init', json: JSON.stringify(source.json), config: JSON.stringify(source.config ?? null), opts: source.opts };
  }

  /** The ids of `text` from the worker when it is long enough to be worth a thread hop; undefined = encode it here. */
  encodeLong(text: string, addSpecialTokens: boolean, signal?: AbortSignal): Promise<number[]> | undefined {
    return text.length >= OFF_THREAD_MIN_CHARS ? this.encode(text, addSpecialTokens, signal) : undefined;
  }

  /** Token ids of `text`, encoded on the worker; rejects with CancelledError if `signal` aborts first. */
  encode(text: string, addSpecialTokens: boolean, signal?: AbortSignal): Promise<number[]> {
    if (signal?.aborted) return Promise.reject(new CancelledError('the request was cancelled before its prompt was tokenized'));
    const id = this.next++;
    return new Promise<number[]>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      signal?.addEventListener(
        'abort',
        () => {
          if (this.pending.delete(id)) reject(new CancelledError('the request was cancelled while its prompt was tokenized'));
        },
        { once: true },
      );
      this.spawned().postMessage({ type: 'encode', id, text, addSpecialTokens } satisfies TokenizeMessage);
    });
  }

  private spawned(): Worker {
    if (this.worker) return this.worker;
    const w = new Worker(new URL(FROM_SOURCE ? './tokenize_worker_boot.mjs' : './tokenize_worker_entry.js', import.meta.url));
    w.unref(); // an idle tokenizer worker never keeps the process alive
    w.on('message', (m: { id: number; ids?: Int32Array; error?: ErrorJSON }) => {
      const p = this.pending.get(m.id);
      if (!p) return; // cancelled meanwhile
      this.pending.delete(m.id);
      this.encoded++;
      if (m.ids) p.resolve(Array.from(m.ids));
      else p.reject(errorFromJSON(m.error!));
    });
    w.on('error', (e) => this.fail(w, e));
    w.on('exit', () => this.fail(w, new Error('the tokenizer worker exited')));
    w.postMessage(this.init);
    this.worker = w;
    return w;
  }

  /** A worker died: its jobs fail; the next job starts a fresh one. */
  private fail(w: Worker, e: unknown): void {
    if (this.worker !== w) return;
    this.worker = null;
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
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
