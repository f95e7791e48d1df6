/**
 * Bridges structured-output requests to the engine: a reader compiles each
 * ConstraintRequest against its own tokenizer (cached per spec, backend and
 * whitespace mode by core/structured) and hands the engine a fresh per-request TokenConstraint,
 * whose masks are sized to the model's vocabulary (ids the tokenizer lacks,
 * e.g. padded embedding rows, are never allowed).
 *
 * With an `offThread` rule builder (the server's compile worker), the work
 * that grows with the constraint (schema or regex → rule NFAs) runs there,
 * bounded by `requestMillis` and cancelled with the request, while this
 * thread keeps stepping the batch. What runs on the thread that steps the
 * batch (everything without a worker; with one, the per-vocabulary automata
 * and first mask) is bounded twice: per request (`requestMillis`: past it the
 * request gets 400 `constraint_too_complex`) and per reader (a bucket of
 * compile time that refills at `readerShare` of wall time, capped at
 * `burstMillis`: when it is empty the request gets 503 `overloaded` with
 * Retry-After, so a flood of expensive constraints cannot take more than that
 * share of the step loop).
 *
 * The constraint also carries the request's budget mode (`budget`:
 * 'complete' unless 'truncate'): complete, the engine tells it the tokens left
 * before every mask and it keeps a completion within them.
 */
import { InvalidRequestError, UnavailableError } from '../errors.ts';
import {
  cachedConstraint,
  compileConstraint,
  compileFromRules,
  type ConstraintSpec,
  parseBackend,
  parseBudgetMode,
  parseWhitespace,
  type RuleNfas,
  type Whitespace,
} from '../structured/index.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import type { TokenConstraint } from './engine.ts';
import type { ConstraintCompiler, ConstraintRequest } from './reader_api.ts';

export interface CompileLimits {
  /** Most ms one compile may take on the reader thread. */
  requestMillis: number;
  /** Fraction of wall time the reader may spend compiling, sustained (0..1]. */
  readerShare: number;
  /** Most compile ms the reader may spend in a burst. */
  burstMillis: number;
}

/** What server readers use unless configured (server/config.ts `constraint_compile_millis`). */
export const DEFAULT_COMPILE_LIMITS: CompileLimits = { requestMillis: 1000, readerShare: 0.25, burstMillis: 4000 };

function specOf(c: ConstraintRequest): ConstraintSpec {
  if (c.kind === 'json_schema') return { kind: 'json_schema', schema: c.schema };
  if (c.kind === 'regex') return { kind: 'regex', pattern: c.pattern };
  return { kind: 'json_object' };
}

/** The reader's compile-time bucket (ms available now), refilled by elapsed wall time. */
class CompileBucket {
  private level: number;
  private at = performance.now();
  constructor(private readonly limits: CompileLimits) {
    this.level = limits.burstMillis;
  }

  available(): number {
    const now = performance.now();
    this.level = Math.min(this.limits.burstMillis, this.level + (now - this.at) * this.limits.readerShare);
    this.at = now;
    return this.level;
  }

  spend(ms: number): void {
    this.level -= ms;
  }
}

const UNLIMITED: CompileLimits = { requestMillis: Infinity, readerShare: 1, burstMillis: Infinity };

/** Below this many ms left in the reader's bucket a compile is not started. */
const MIN_COMPILE_MS = 5;

/**
 * Builds a native constraint's rule NFAs elsewhere (a compile worker; the
 * server's is server/readers/compile_pool.ts): `millis` bounds that work,
 * `signal` cancels it.
 */
export type OffThreadRules = (spec: ConstraintSpec, ws: Whitespace, strict: boolean, millis: number | undefined, signal?: AbortSignal) => Promise<RuleNfas>;

/**
 * `limits` absent: no time budget (benchmarks, tests); the automaton state limits still apply.
 * `offThread`: native constraints that are not cached compile their rules there
 * (the compiler then answers a Promise and the request joins the batch once
 * compiled); only the per-vocabulary rest runs on this thread, under the limits.
 */
export function constraintCompilerFor(tok: Tokenizer, modelVocab: number, limits?: CompileLimits): SyncConstraintCompiler;
export function constraintCompilerFor(tok: Tokenizer, modelVocab: number, limits: CompileLimits, offThread: OffThreadRules | undefined): ConstraintCompiler;
export function constraintCompilerFor(tok: Tokenizer, modelVocab: number, limits: CompileLimits = UNLIMITED, offThread?: OffThreadRules): ConstraintCompiler {
  const sync = syncCompiler(tok, modelVocab, limits);
  if (!offThread) return sync;
  return (c, signal) => {
    const backend = parseBackend(c.backend);
    const ws = parseWhitespace(c.whitespace);
    parseBudgetMode(c.budget);
    const spec = specOf(c);
    const strict = c.kind === 'json_schema' && c.strict === true;
    if (backend !== 'native' || cachedConstraint(spec, tok, { backend, whitespace: ws, strict })) return sync(c, signal);
    return offThread(spec, ws, strict, limits.requestMillis, signal).then((rules) => {
      compileFromRules(spec, tok, rules, { whitespace: ws, strict });
      return sync(c, signal); // now a cache hit
    });
  };
}

/** A compiler that always answers at once (compiles on the calling thread). */
export type SyncConstraintCompiler = (c: ConstraintRequest, signal?: AbortSignal) => TokenConstraint;

function syncCompiler(tok: Tokenizer, modelVocab: number, limits: CompileLimits): SyncConstraintCompiler {
  const words = Math.ceil(modelVocab / 32);
  const bucket = new CompileBucket(limits);
  return (c, signal): TokenConstraint => {
    const left = bucket.available();
    if (left < MIN_COMPILE_MS) {
      const wait = Math.ceil((MIN_COMPILE_MS - left) / limits.readerShare / 1000);
      const retryAfter = Math.max(1, wait);
      throw new UnavailableError('overloaded', 'this reader is spending its constraint-compilation budget; retry later', retryAfter, { reason: 'compile_budget', retry_after: retryAfter });
    }
    parseBudgetMode(c.budget);
    const t0 = performance.now();
    let state;
    const millis = Math.min(limits.requestMillis, left);
    try {
      const budget = { millis, ...(signal ? { signal } : {}) };
      const strict = c.kind === 'json_schema' && c.strict === true;
      state = compileConstraint(specOf(c), tok, { backend: parseBackend(c.backend), whitespace: parseWhitespace(c.whitespace), strict, budget }).start();
    } catch (e) {
      // Cut short by the reader's bucket rather than the request's own budget: busy, not too complex.
      if (e instanceof InvalidRequestError && e.code === 'constraint_too_complex' && millis < limits.requestMillis && /took more than/.test(e.message)) {
        throw new UnavailableError('overloaded', 'this reader is spending its constraint-compilation budget; retry later', 1, { reason: 'compile_budget', retry_after: 1 });
      }
      throw e;
    } finally {
      bucket.spend(performance.now() - t0);
    }
    const complete = parseBudgetMode(c.budget) === 'complete';
    const budget = complete ? { budget: (n: number) => state.budget?.(n), forced: () => state.forced?.() ?? false } : {};
    if (Math.ceil(tok.vocabSize / 32) === words && complete) return state;
    if (Math.ceil(tok.vocabSize / 32) === words) return { mask: () => state.mask(), advance: (t) => state.advance(t), isComplete: () => state.isComplete() };
    return {
      mask() {
        const m = state.mask();
        const out = new Uint32Array(words);
        out.set(m.subarray(0, Math.min(words, m.length)));
        return out;
      },
      advance: (t) => state.advance(t),
      isComplete: () => state.isComplete(),
      ...budget,
    };
  };
}
