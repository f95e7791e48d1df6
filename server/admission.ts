/**
 * Admission of generation requests by a reader's real capacity.
 *
 * A request is sized by what it can actually hold: its prompt (estimated at
 * 4 bytes per token) plus `max_new_tokens` capped by the reader's context,
 * never by the requested count alone. A reader with a free sequence slot
 * admits at once. Past that, requests queue on the reader, and the queue is
 * bounded two ways, so a flood gets fast 503 `overloaded` answers (with
 * Retry-After) instead of first tokens after tens of seconds:
 *
 * - tokens: the tokens reserved by everything admitted to the reader stay
 *   within QUEUE_KV_FACTOR times its KV pool (ReaderInfo.capacity.kvTokens);
 * - time: the expected wait, ceil(queued ahead + 1, maxSeqs) "waves" of the
 *   reader's mean slot time (an EWMA of first token → done of finished
 *   requests), stays within `max_queue_wait_millis`.
 *
 * The first request on an idle reader is always admitted (a request larger
 * than the pool on its own is the scheduler's to serve or refuse).
 */
import { UnavailableError } from '../core/errors.ts';
import type { GenerateRequest } from '../core/engine/reader_api.ts';
import { maxNewTokensFor } from '../core/engine/max_new_tokens.ts';
import type { ManagedReader } from './readers/managed_reader.ts';

/** Queued plus running tokens may reach this many KV pools (one pool running, one waiting). */
export const QUEUE_KV_FACTOR = 2;
const EWMA_WEIGHT = 0.2;

interface ReaderLoad {
  tokens: number;
  /** Mean ms a request holds a sequence slot (first token → done); 0 until one finished. */
  slotMs: number;
}

/** Tokens a request can hold at most: estimated prompt plus new tokens capped by the context. */
export function cappedTokens(req: GenerateRequest, contextLength: number): { prompt: number; total: number } {
  const p = req.prompt;
  const promptBytes = typeof p === 'string' ? Buffer.byteLength(p, 'utf8') : Array.isArray(p) ? p.length * 4 : JSON.stringify(p ?? '').length;
  const prompt = Math.min(contextLength, Math.ceil(promptBytes / 4) + 1);
  return { prompt, total: prompt + Math.max(1, maxNewTokensFor(req.maxNewTokens, prompt, contextLength)) };
}

export class Admission {
  private readonly loads = new WeakMap<ManagedReader, ReaderLoad>();

  constructor(private readonly maxQueueWaitMillis: () => number) {}

  private load(r: ManagedReader): ReaderLoad {
    let l = this.loads.get(r);
    if (!l) this.loads.set(r, (l = { tokens: 0, slotMs: 0 }));
    return l;
  }

  /** Tokens reserved on `r` by requests in flight. */
  reservedTokens(r: ManagedReader): number {
    return this.loads.get(r)?.tokens ?? 0;
  }

  /**
   * Admits `tokens` on `r` (call before `r.inFlight` counts the request) or
   * throws 503 `overloaded`. Returns the release, which takes the slot time
   * of the finished request (ms, or null when it produced no token).
   */
  admit(r: ManagedReader, tokens: number): (slotMs: number | null) => void {
    const cap = r.info?.capacity;
    const l = this.load(r);
    if (cap && r.inFlight >= cap.maxSeqs) {
      if (l.tokens + tokens > QUEUE_KV_FACTOR * cap.kvTokens) {
        throw new UnavailableError(
          'overloaded',
          `reader ${r.readerId} has ${l.tokens} tokens admitted (KV pool ${cap.kvTokens} tokens); retry later`,
          this.retryAfter(l, 1),
          { reason: 'kv_pool' },
        );
      }
      const waves = Math.ceil((r.inFlight - cap.maxSeqs + 1) / cap.maxSeqs);
      const expectedMs = waves * l.slotMs;
      if (expectedMs > this.maxQueueWaitMillis()) {
        throw new UnavailableError(
          'overloaded',
          `reader ${r.readerId} expects a ${Math.round(expectedMs)} ms wait (limit ${this.maxQueueWaitMillis()} ms); retry later`,
          this.retryAfter(l, waves),
          { reason: 'queue_wait', expected_wait_ms: Math.round(expectedMs) },
        );
      }
    }
    l.tokens += tokens;
    let done = false;
    return (slotMs) => {
      if (done) return;
      done = true;
      l.tokens -= tokens;
      if (slotMs !== null) l.slotMs = l.slotMs === 0 ? slotMs : l.slotMs + EWMA_WEIGHT * (slotMs - l.slotMs);
    };
  }

  /** Seconds until about `waves` slot times have passed (at least 1). */
  private retryAfter(l: ReaderLoad, waves: number): number {
    return Math.max(1, Math.ceil((waves * l.slotMs) / 1000));
  }
}
