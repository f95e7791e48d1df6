/**
 * Several choices of one OpenAI request (`n`, `best_of`): choice 0 starts
 * first; once its prompt is prefilled (its first event) the others start and
 * find the prompt's full KV blocks in the prefix cache, so the prompt is
 * prefilled once (the readers' `weft_prefills_total` counts it). Choice i
 * samples with seed + i (mod 2^32) when a seed is given, so choice i equals a
 * lone request with that seed. Whole results (`runChoices`) or, for
 * `stream: true`, the choices' events interleaved in arrival order, each
 * tagged with its index (`streamChoices`).
 */
import type { Context } from 'hono';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';
import { CancelledError } from '../../core/errors.ts';
import type { GenerationEvent } from '../../core/engine/engine.ts';
import type { GenerateRequest } from '../../core/engine/reader_api.ts';
import type { Service } from '../service.ts';

type Done = Extract<GenerationEvent, { type: 'done' }>;

/** The request of choice `i`: its id, and seed + i when a seed is given. */
function choiceRequest(req: GenerateRequest, id: string, i: number): GenerateRequest {
  const seed = req.sampling?.seed;
  return { ...req, id, ...(seed !== undefined && i > 0 ? { sampling: { ...req.sampling, seed: (seed + i) % 2 ** 32 } } : {}) };
}

interface Started {
  it: AsyncIterator<GenerationEvent>;
  /** Choice 0's first event, pulled before the others start; null for the others. */
  first: IteratorResult<GenerationEvent> | null;
  release: () => void;
}

/**
 * Admits all `ids.length` choices (choice 0 prefilled first). Errors up to
 * here are ordinary JSON errors; every started choice is released on failure.
 */
async function startChoices(svc: Service, group: string, req: GenerateRequest, ids: string[], signal: AbortSignal): Promise<Started[]> {
  const s0 = await svc.startGeneration(group, choiceRequest(req, ids[0]!, 0), signal);
  const it0 = s0.events[Symbol.asyncIterator]();
  const out: Started[] = [];
  try {
    out.push({ it: it0, first: await it0.next(), release: s0.release });
    const rest = await Promise.allSettled(ids.slice(1).map((id, k) => svc.startGeneration(group, choiceRequest(req, id, k + 1), signal)));
    for (const r of rest) if (r.status === 'fulfilled') out.push({ it: r.value.events[Symbol.asyncIterator](), first: null, release: r.value.release });
    const failed = rest.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    return out;
  } catch (e) {
    for (const s of out) s.release();
    if (!out.length) s0.release();
    throw e;
  }
}

/** Runs `n` choices to completion (see the file's note); sets `x-request-id` to their ids. */
export async function runChoices(c: Context, svc: Service, group: string, req: GenerateRequest, n: number, rid: string): Promise<Done[]> {
  const signal = c.req.raw.signal;
  const ids = [rid, ...Array.from({ length: n - 1 }, () => svc.newRequestId())];
  c.header('x-request-id', ids.join(','));
  if (n === 1) return [await svc.runToCompletion(group, { ...req, id: rid }, signal)];
  const started = await startChoices(svc, group, req, ids, signal);
  return Promise.all(
    started.map(async (s): Promise<Done> => {
      try {
        for (let r = s.first ?? (await s.it.next()); !r.done; r = await s.it.next()) if (r.value.type === 'done') return r.value;
        throw new CancelledError();
      } finally {
        s.release();
      }
    }),
  );
}

/** What a stream of several choices writes. */
export interface ChoicesFraming {
  /** Written once before any event (e.g. each choice's role chunk). */
  open(stream: SSEStreamingApi): Promise<void>;
  /** One event of choice `index`, in arrival order. */
  event(stream: SSEStreamingApi, index: number, ev: GenerationEvent): Promise<void>;
  /** After every choice finished, with their final events by index. */
  close(stream: SSEStreamingApi, done: Done[]): Promise<void>;
  /** The generation failed after the stream started. */
  error(stream: SSEStreamingApi, e: unknown): Promise<void>;
}

/**
 * Streams `n` choices as one SSE response: events are written as they come,
 * whichever choice they belong to. A client that goes away cancels them all.
 */
export async function streamChoices(c: Context, svc: Service, group: string, req: GenerateRequest, n: number, rid: string, f: ChoicesFraming): Promise<Response> {
  const ac = new AbortController();
  c.req.raw.signal.addEventListener('abort', () => ac.abort(), { once: true });
  const ids = [rid, ...Array.from({ length: n - 1 }, () => svc.newRequestId())];
  const started = await startChoices(svc, group, req, ids, ac.signal);
  c.header('x-request-id', ids.join(','));
  return streamSSE(c, async (stream) => {
    stream.onAbort(() => ac.abort());
    const done: Done[] = [];
    // One pending next() per unfinished choice; the first to settle is written.
    const pending = new Map<number, Promise<{ i: number; r: IteratorResult<GenerationEvent> }>>();
    const pull = (i: number): void => {
      pending.set(i, started[i]!.it.next().then((r) => ({ i, r })));
    };
    try {
      await f.open(stream);
      started.forEach((s, i) => (s.first ? pending.set(i, Promise.resolve({ i, r: s.first })) : pull(i)));
      while (pending.size) {
        const { i, r } = await Promise.race(pending.values());
        pending.delete(i);
        if (r.done) {
          if (!done[i]) throw new CancelledError();
          continue;
        }
        if (r.value.type === 'done') done[i] = r.value;
        await f.event(stream, i, r.value);
        pull(i);
      }
      await f.close(stream, done);
    } catch (e) {
      await f.error(stream, e);
    } finally {
      ac.abort();
      for (const s of started) s.release();
    }
  });
}
