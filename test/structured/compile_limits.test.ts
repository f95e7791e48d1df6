/**
 * A reader's constraint compiler under its limits (core/engine/constraints.ts):
 * one compile past the per-request budget is a 400 `constraint_too_complex`;
 * compiles that drain the reader's compile-time bucket get 503 `overloaded`
 * with Retry-After, even for a cheap constraint, until the bucket refills.
 * Real stories260K tokenizer.
 */
import { describe, expect, it } from 'vitest';
import { constraintCompilerFor } from '../../core/engine/constraints.ts';
import { InvalidRequestError, UnavailableError } from '../../core/errors.ts';
import { loadTokenizer } from '../../core/tokenizer/tokenizer.ts';
import { modelFiles } from '../tokenizer/fixtures/models.ts';

const heavy = { kind: 'json_schema' as const, schema: { type: 'array', items: { type: 'array', items: { type: 'string', maxLength: 900 }, maxItems: 900 }, maxItems: 900 } };
const light = (n: number) => ({ kind: 'json_schema' as const, schema: { type: 'object', properties: { [`k${n}`]: { type: 'integer' } }, required: [`k${n}`] } });

function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (e) {
    return e;
  }
  return null;
}

describe('reader compile limits', () => {
  const tok = loadTokenizer(modelFiles('stories').json);

  it('a compile past the request budget is constraint_too_complex; a drained reader answers overloaded until it refills', async () => {
    // The constraint used to see the bucket refill is compiled (and cached) beforehand, without
    // limits: a drained bucket refuses even a cache hit, and once it holds MIN_COMPILE_MS again
    // the hit answers at once, however slow a compile is on a loaded machine.
    expect(thrown(() => constraintCompilerFor(tok, tok.vocabSize)(light(2)))).toBeNull();
    const compile = constraintCompilerFor(tok, tok.vocabSize, { requestMillis: 40, readerShare: 0.05, burstMillis: 100 });
    const t0 = performance.now();
    const first = thrown(() => compile(heavy));
    expect(first).toBeInstanceOf(InvalidRequestError);
    expect((first as InvalidRequestError).code).toBe('constraint_too_complex');
    expect(performance.now() - t0).toBeLessThan(1000);

    // Keep spending: within a few heavy compiles the 100 ms bucket is empty.
    let busy: unknown = null;
    for (let i = 0; i < 10 && !(busy instanceof UnavailableError); i++) busy = thrown(() => compile(heavy));
    expect(busy).toBeInstanceOf(UnavailableError);
    expect((busy as UnavailableError).code).toBe('overloaded');
    expect((busy as UnavailableError).retryAfter).toBeGreaterThanOrEqual(1);
    // Even a cheap constraint waits for the bucket ...
    const cheap = thrown(() => compile(light(1)));
    expect(cheap).toBeInstanceOf(UnavailableError);
    // ... which refills at 5% of wall time (every 100 ms gives 5 ms of compiling); the overdraft of the last compile is repaid first.
    let later: unknown = busy;
    for (let i = 0; i < 100 && later !== null; i++) {
      await new Promise((r) => setTimeout(r, 100));
      later = thrown(() => compile(light(2)));
      if (later !== null) expect(later).toBeInstanceOf(UnavailableError);
    }
    expect(later).toBeNull();
  });

  it('without limits (benchmarks, tests) nothing is refused for time', () => {
    const compile = constraintCompilerFor(tok, tok.vocabSize);
    for (let i = 0; i < 5; i++) expect(thrown(() => compile(light(10 + i)))).toBeNull();
  });
});
