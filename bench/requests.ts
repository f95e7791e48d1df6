/** One greedy request through an in-process engine, timed: what the serving benches measure. */
import type { LoadedDecoder } from '../core/api/load_decoder.ts';

export interface Req {
  wallMs: number;
  ttftMs: number;
  /** performance.now() of the call, first and last token. */
  t0: number;
  first: number;
  last: number;
  ids: number[];
  cachedTokens: number;
}

/** Generates T tokens for prompt `ids` (greedy, EOS ignored); throws when fewer come back. */
export async function request(d: LoadedDecoder, ids: number[], T: number): Promise<Req> {
  const t0 = performance.now();
  let first = NaN;
  let last = NaN;
  let out: number[] = [];
  let cachedTokens = 0;
  for await (const ev of d.engine.generate(ids, { maxNewTokens: T, ignoreEos: true, sampling: { temperature: 0 } })) {
    if (ev.type === 'token') {
      last = performance.now();
      if (Number.isNaN(first)) first = last;
    } else {
      out = ev.tokenIds;
      cachedTokens = ev.usage.cachedTokens;
    }
  }
  const end = performance.now();
  if (out.length !== T) throw new Error(`serving bench: a request made ${out.length} tokens, expected ${T}`);
  return { wallMs: end - t0, ttftMs: first - t0, t0, first, last, ids: out, cachedTokens };
}
