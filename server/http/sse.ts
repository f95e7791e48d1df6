/**
 * One generation as a server-sent-event stream, for every API that streams
 * (Takeoff-style /generate_stream and /invocations, OpenAI chunks). The
 * request is admitted and its first event pulled before the stream starts,
 * so errors up to then are ordinary JSON errors with a status; a client that
 * goes away aborts the request; the reservation is released exactly once.
 */
import type { Context } from 'hono';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';
import type { GenerationEvent } from '../../core/engine/engine.ts';
import type { GenerateRequest } from '../../core/engine/reader_api.ts';
import type { Service } from '../service.ts';
import { errorBody } from './errors.ts';

type Done = Extract<GenerationEvent, { type: 'done' }>;

export interface SseFraming {
  /** Written once before the first event. */
  open?(stream: SSEStreamingApi): Promise<void>;
  event(stream: SSEStreamingApi, ev: GenerationEvent): Promise<void>;
  /** Written after the last event. */
  close?(stream: SSEStreamingApi): Promise<void>;
  /** Written when the generation fails after the stream started. */
  error(stream: SSEStreamingApi, e: unknown): Promise<void>;
}

export async function sseGeneration(c: Context, svc: Service, group: string | undefined, req: GenerateRequest & { id: string }, f: SseFraming): Promise<Response> {
  const ac = new AbortController();
  c.req.raw.signal.addEventListener('abort', () => ac.abort(), { once: true });
  const { events, release } = await svc.startGeneration(group, req, ac.signal);
  const it = events[Symbol.asyncIterator]();
  let first: IteratorResult<GenerationEvent>;
  try {
    first = await it.next();
  } catch (e) {
    release();
    throw e;
  }
  c.header('x-request-id', req.id);
  return streamSSE(c, async (stream) => {
    stream.onAbort(() => ac.abort());
    try {
      await f.open?.(stream);
      for (let r = first; !r.done; r = await it.next()) await f.event(stream, r.value);
      await f.close?.(stream);
    } catch (e) {
      await f.error(stream, e);
    } finally {
      ac.abort();
      release();
    }
  });
}

export const usageOf = (d: Done): { prompt_tokens: number; completion_tokens: number; cached_tokens: number; tokens_per_second: number } => ({
  prompt_tokens: d.usage.promptTokens,
  completion_tokens: d.usage.completionTokens,
  cached_tokens: d.usage.cachedTokens,
  tokens_per_second: d.usage.tokensPerSecond ?? 0,
});

/**
 * `x-weft-tokens-per-second` on a non-streaming response: each request's decode speed
 * (docs/api.md), comma-separated in the order of `x-request-id`.
 */
export function tokensPerSecondHeader(c: Context, ds: readonly Pick<Done, 'usage'>[]): void {
  c.header('x-weft-tokens-per-second', ds.map((d) => String(d.usage.tokensPerSecond ?? 0)).join(','));
}

/** The Takeoff-style framing: `data: {text, token_id}` per token, `event: done`, `event: error`. */
export const TAKEOFF_FRAMING: SseFraming = {
  async event(stream, ev) {
    if (ev.type === 'token') await stream.writeSSE({ data: JSON.stringify({ text: ev.text, token_id: ev.id }) });
    else await stream.writeSSE({ event: 'done', data: JSON.stringify({ finish_reason: ev.finishReason, usage: usageOf(ev) }) });
  },
  async error(stream, e) {
    await stream.writeSSE({ event: 'error', data: JSON.stringify(errorBody(e)) });
  },
};
