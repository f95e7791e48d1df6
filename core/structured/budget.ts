/**
 * The work budget of one constraint compilation: a deadline (ms on the
 * performance clock) and an AbortSignal, checked from the hot loops that grow
 * automata (NFA states, DFA states, trie walks) via `charge()`.
 *
 * Compilation is synchronous; where it runs on the thread that steps the batch
 * (no compile worker, or the per-vocabulary part after one), an unbounded
 * compile would stall every generation on the reader: the budget
 * turns "too much work" into an `OverBudgetError` (a 400
 * `constraint_too_complex` for the client) after at most the configured time.
 * The budget is installed for the duration of one synchronous call
 * (`withBudget`), so no state leaks between requests; outside a compile
 * (lazy determinization while decoding) `charge()` costs one comparison.
 */

/** Thrown when an automaton grows past its state limit (NFA, DFA or product construction). */
export class TooLargeError extends Error {}

/** Thrown when a compilation runs past its time budget or its request was cancelled. */
export class OverBudgetError extends Error {
  constructor(message: string, readonly cancelled = false) {
    super(message);
  }
}

export interface CompileBudget {
  /** performance.now() after which the compile is abandoned. */
  readonly deadline: number;
  /** The budget in ms, for the error message. */
  readonly millis: number;
  readonly signal?: AbortSignal | undefined;
}

let current: CompileBudget | null = null;
let ticks = 0;

/** Runs `fn` (synchronous) under `budget`; nested calls keep the tighter deadline. */
export function withBudget<T>(budget: CompileBudget | null, fn: () => T): T {
  const prev = current;
  if (budget && (!prev || budget.deadline < prev.deadline)) current = budget;
  try {
    return fn();
  } finally {
    current = prev;
  }
}

/** Counts one unit of automaton work; every 256 units checks the clock and the signal. */
export function charge(): void {
  if (current === null || (++ticks & 255) !== 0) return;
  if (current.signal?.aborted) throw new OverBudgetError('the request was cancelled while its constraint compiled', true);
  if (performance.now() > current.deadline) throw new OverBudgetError(`compiling it took more than ${current.millis} ms`);
}
