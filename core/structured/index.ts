/**
 * Structured output: compiles a constraint (JSON Schema, regex, "any JSON
 * object") into per-request TokenConstraint objects for the engine.
 *
 * Pipeline: constraint → pattern AST (schema.ts / regex.ts) → byte automaton →
 * token masks over the reader's vocabulary (walked through a byte trie of the
 * vocabulary). Two backends, chosen per request: `native` (default; a lazily
 * determinized pushdown automaton with per-stack-top mask caching, supports
 * recursive schemas) and `outlines` (eager regex → DFA → full token index, as
 * the outlines library does; refuses recursion). Compiled constraints are
 * cached per vocabulary object in an LRU keyed by backend, whitespace mode and
 * the canonical JSON of the constraint; `start()` gives fresh decoding state.
 * Every failure is an InvalidRequestError — never a silently unconstrained run.
 * A compile may carry a work budget (time, cancellation; budget.ts): past it,
 * or past the automaton state limits, `constraint_too_complex`.
 */
import type { TokenConstraint } from '../engine/engine.ts';
import { CancelledError, InvalidRequestError } from '../errors.ts';
import { fail } from './ast.ts';
import { OverBudgetError, TooLargeError, withBudget } from './budget.ts';
import { FLEXIBLE_LIMIT, type Whitespace, WHITESPACES } from './json_text.ts';
import { NativeGrammar } from './native.ts';
import { grammarRules, type RuleNfas } from './rules.ts';
import { OutlinesIndex } from './outlines.ts';
import { regexFullMatch } from './regex.ts';
import { type GrammarAst, schemaToAst } from './schema.ts';
import { TokenTrie } from './trie.ts';

export type ConstraintSpec = { kind: 'json_schema'; schema: unknown } | { kind: 'regex'; pattern: string } | { kind: 'json_object' };
export type { Whitespace } from './json_text.ts';
export type { RuleNfas } from './rules.ts';
export { WHITESPACES } from './json_text.ts';
export type Backend = 'native' | 'outlines';
export const BACKENDS: readonly Backend[] = ['native', 'outlines'];

export interface VocabLike {
  readonly vocabSize: number;
  readonly eosIds: readonly number[];
  tokenBytes(id: number): Uint8Array;
  isSpecial(id: number): boolean;
}

/**
 * Decoding state of one request (a `TokenConstraint & { accepted(): boolean }`).
 * `mask()` never returns null here; masks are shared between requests: read-only.
 */
export interface ConstraintState extends TokenConstraint {
  mask(): Uint32Array;
  /** Tokens the request may still produce (this one included): the mask keeps a completion within them. */
  budget?(remaining: number): void;
  /** True once the budget narrowed a mask. */
  forced?(): boolean;
  /** Tokens that surely suffice to complete the value from here (single-byte tokens; ≥ 2^30: none that way). */
  completion?(): number;
  /** True when the output so far is a complete value (EOS allowed); more may still follow unless isComplete(). */
  accepted(): boolean;
}

export interface CompiledConstraint {
  /** Fresh decoding state, one per request. */
  start(): ConstraintState;
  readonly backend: Backend;
  readonly compileMs: number;
}

export interface CompileOptions {
  backend?: Backend;
  /**
   * JSON constraints only: 'none' (default) = no insignificant whitespace;
   * 'compact' = exactly one space after every ':' and ','; 'flexible' /
   * 'flexible:N' = any JSON whitespace where JSON allows it, each run at most
   * 16 / N characters (json_text.ts). A regex constraint takes no whitespace
   * mode (anything but 'none' is refused).
   */
  whitespace?: Whitespace;
  /**
   * JSON Schema constraints only: OpenAI `strict: true` semantics — objects
   * that declare properties are closed and all their properties required.
   * Default false: JSON Schema semantics (absent additionalProperties = open).
   */
  strict?: boolean;
  /**
   * Work budget: the compile is abandoned after `millis` ms (400
   * `constraint_too_complex`) or once `signal` aborts (CancelledError).
   * Absent: only the automaton state limits apply.
   */
  budget?: { millis: number; signal?: AbortSignal | undefined };
  /** Benchmarks: compile afresh, neither reading nor filling the compile cache (the vocabulary trie stays cached). */
  uncached?: boolean;
}

const CACHE_SIZE = 64;
const caches = new WeakMap<VocabLike, Map<string, CompiledConstraint>>();

/** Compiles (or returns the cached compilation of) a constraint for one vocabulary. */
export function compileConstraint(spec: ConstraintSpec, vocab: VocabLike, opts: CompileOptions = {}): CompiledConstraint {
  const backend = parseBackend(opts.backend);
  const ws = parseWhitespace(opts.whitespace);
  if (ws !== 'none' && spec?.kind === 'regex') {
    throw new InvalidRequestError('conflicting_constraints', 'json_whitespace applies to JSON constraints (json_schema, json_object), not to regex_string', { field: 'json_whitespace' });
  }
  const strict = opts.strict === true && spec?.kind === 'json_schema';
  const key = cacheKey(spec, backend, ws, strict);
  let cache = caches.get(vocab);
  if (!cache) caches.set(vocab, (cache = new Map()));
  const hit = opts.uncached ? undefined : cache.get(key);
  if (hit) {
    cache.delete(key);
    cache.set(key, hit);
    return hit;
  }
  const t0 = performance.now();
  const b = opts.budget;
  const compiled = withBudget(b ? { deadline: t0 + b.millis, millis: b.millis, signal: b.signal } : null, () => build(spec, vocab, backend, ws, strict));
  const result: CompiledConstraint = { backend, compileMs: performance.now() - t0, start: compiled };
  if (opts.uncached) return result;
  cache.set(key, result);
  if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value!);
  return result;
}

/** Validates a `constrained_decoding_backend` request value (absent → 'native'). */
export function parseBackend(name: unknown): Backend {
  if (name === undefined || name === null) return 'native';
  if (typeof name === 'string' && (BACKENDS as readonly string[]).includes(name)) return name as Backend;
  throw new InvalidRequestError(
    'invalid_constrained_decoding_backend',
    `unknown constrained_decoding_backend ${JSON.stringify(name)}; valid: ${BACKENDS.join(', ')}`,
    { field: 'constrained_decoding_backend', valid: [...BACKENDS] },
  );
}

export type BudgetMode = 'complete' | 'truncate';
export const BUDGET_MODES: readonly BudgetMode[] = ['complete', 'truncate'];

/** Validates a `constrained_decoding_budget` request value (absent → 'complete'). */
export function parseBudgetMode(name: unknown): BudgetMode {
  if (name === undefined || name === null) return 'complete';
  if (typeof name === 'string' && (BUDGET_MODES as readonly string[]).includes(name)) return name as BudgetMode;
  throw new InvalidRequestError(
    'invalid_constrained_decoding_budget',
    `unknown constrained_decoding_budget ${JSON.stringify(name)}; valid: ${BUDGET_MODES.join(', ')}`,
    { field: 'constrained_decoding_budget', valid: [...BUDGET_MODES] },
  );
}

/** Validates a `json_whitespace` request value (absent → 'none'; 'flexible:N' with N in 1..64). */
export function parseWhitespace(name: unknown): Whitespace {
  if (name === undefined || name === null) return 'none';
  if (typeof name === 'string' && (WHITESPACES as readonly string[]).includes(name)) return name as Whitespace;
  const m = typeof name === 'string' ? /^flexible:([1-9]\d*)$/.exec(name) : null;
  if (m && Number(m[1]) <= FLEXIBLE_LIMIT) return `flexible:${Number(m[1])}`;
  throw new InvalidRequestError('invalid_json_whitespace', `unknown json_whitespace ${JSON.stringify(name)}; valid: ${WHITESPACES.join(', ')}, or flexible:N with N from 1 to ${FLEXIBLE_LIMIT}`, {
    field: 'json_whitespace',
    valid: [...WHITESPACES, `flexible:1..${FLEXIBLE_LIMIT}`],
  });
}

function specGrammar(spec: ConstraintSpec, backend: Backend, ws: Whitespace, strict: boolean): GrammarAst {
  const recursion = backend === 'native' ? 'rules' : 'refuse';
  switch (spec.kind) {
    case 'json_schema':
      return schemaToAst(spec.schema, { ws, recursion, strict });
    case 'json_object':
      return schemaToAst({ type: 'object' }, { ws, recursion });
    case 'regex': {
      const root = regexFullMatch(spec.pattern, { path: '', keyword: 'regex_string' });
      if (root.t === 'none') fail('invalid_regex', 'the regex matches no string', '', 'regex_string');
      return { root, rules: new Map() };
    }
  }
}

/** Turns automaton-size and budget errors into the request's errors (400 constraint_too_complex, or cancelled). */
function mapped<T>(spec: ConstraintSpec, f: () => T): T {
  const keyword = spec.kind === 'regex' ? 'regex_string' : 'json_schema';
  try {
    return f();
  } catch (e) {
    if (e instanceof OverBudgetError && e.cancelled) throw new CancelledError(e.message);
    if (e instanceof TooLargeError || e instanceof OverBudgetError) {
      fail('constraint_too_complex', `constraint too complex to compile: ${e.message}`, '', keyword);
    }
    // The builders recurse on the schema's nesting: a pathologically deep one is too complex, not a crash.
    if (e instanceof RangeError && /call stack/i.test(e.message)) fail('constraint_too_complex', 'constraint too complex to compile: nested too deeply', '', keyword);
    throw e;
  }
}

/**
 * The vocabulary-independent front of a native compile (what a compile worker
 * runs): the spec's rule NFAs, under an optional time budget. Throws the
 * request's errors (invalid schema, too complex, empty language).
 */
export function compileRules(spec: ConstraintSpec, ws: Whitespace, strict: boolean, millis?: number): RuleNfas {
  canonicalSpec(spec);
  const t0 = performance.now();
  return withBudget(millis !== undefined ? { deadline: t0 + millis, millis } : null, () =>
    mapped(spec, () => {
      const rules = grammarRules(specGrammar(spec, 'native', ws, strict && spec.kind === 'json_schema'));
      if (!rules) fail(spec.kind === 'regex' ? 'invalid_regex' : 'invalid_schema', 'no string satisfies this constraint', '', spec.kind === 'regex' ? 'regex_string' : 'json_schema');
      return rules;
    }),
  );
}

/**
 * Finishes a native compile from rules built elsewhere (compileRules on a
 * compile worker) and caches it like compileConstraint would: what is left
 * here is per-vocabulary, bounded work (automata over the rules, the first mask).
 */
export function compileFromRules(spec: ConstraintSpec, vocab: VocabLike, rules: RuleNfas, opts: CompileOptions = {}): CompiledConstraint {
  const key = cacheKey(spec, 'native', parseWhitespace(opts.whitespace), opts.strict);
  const cache = caches.get(vocab) ?? new Map<string, CompiledConstraint>();
  caches.set(vocab, cache);
  const hit = cache.get(key);
  if (hit) return hit;
  const t0 = performance.now();
  const b = opts.budget;
  const grammar = withBudget(b ? { deadline: t0 + b.millis, millis: b.millis, signal: b.signal } : null, () => mapped(spec, () => NativeGrammar.fromRules(rules, TokenTrie.for(vocab))));
  const result: CompiledConstraint = { backend: 'native', compileMs: performance.now() - t0, start: () => grammar.begin() };
  cache.set(key, result);
  if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value!);
  return result;
}

/** The whitespace mode and strictness are part of the key: the same schema compiles to a different automaton per mode. */
function cacheKey(spec: ConstraintSpec, backend: Backend, ws: Whitespace, strict: boolean | undefined): string {
  const closed = strict === true && spec?.kind === 'json_schema';
  return `${backend}|${ws}|${closed ? 'strict' : 'open'}|${canonicalSpec(spec)}`;
}

/** The compiled constraint if it is cached (no work otherwise). */
export function cachedConstraint(spec: ConstraintSpec, vocab: VocabLike, opts: CompileOptions = {}): CompiledConstraint | undefined {
  const key = cacheKey(spec, parseBackend(opts.backend), parseWhitespace(opts.whitespace), opts.strict);
  return caches.get(vocab)?.get(key);
}

function build(spec: ConstraintSpec, vocab: VocabLike, backend: Backend, ws: Whitespace, strict: boolean): () => ConstraintState {
  const keyword = spec.kind === 'regex' ? 'regex_string' : 'json_schema';
  const code = spec.kind === 'regex' ? 'invalid_regex' : 'invalid_schema';
  try {
    const g = specGrammar(spec, backend, ws, strict);
    const trie = TokenTrie.for(vocab);
    if (backend === 'outlines') {
      if (g.rules.size) throw new Error('structured: outlines grammar with rules'); // schema.ts refuses recursion
      const index = OutlinesIndex.build(g.root, trie);
      if (!index) fail(code, 'no string satisfies this constraint', '', keyword);
      return () => index.begin();
    }
    const grammar = NativeGrammar.build(g, trie);
    if (!grammar) fail(code, 'no string satisfies this constraint', '', keyword);
    return () => grammar.begin();
  } catch (e) {
    if (e instanceof OverBudgetError && e.cancelled) throw new CancelledError(e.message);
    if (e instanceof TooLargeError || e instanceof OverBudgetError) {
      fail('constraint_too_complex', `constraint too complex to compile: ${e.message}`, '', keyword);
    }
    // The builders recurse on the schema's nesting: a pathologically deep one is too complex, not a crash.
    if (e instanceof RangeError && /call stack/i.test(e.message)) fail('constraint_too_complex', 'constraint too complex to compile: nested too deeply', '', keyword);
    throw e;
  }
}

/** Deterministic JSON: object keys sorted, except where order is meaningful (properties, values). */
function canonical(v: unknown, keepOrder: boolean): string {
  if (Array.isArray(v)) return `[${v.map((x) => canonical(x, keepOrder)).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const keys = Object.keys(v);
    if (!keepOrder) keys.sort();
    const o = v as Record<string, unknown>;
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(o[k], keepOrder || ORDERED.has(k))}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

const ORDERED = new Set(['properties', 'const', 'enum', 'default', 'examples', 'prefixItems']);

function canonicalSpec(spec: ConstraintSpec): string {
  if (!spec || typeof spec !== 'object') throw new InvalidRequestError('invalid_constraint', 'constraint must be an object');
  switch (spec.kind) {
    case 'json_object':
      return 'json_object';
    case 'regex':
      if (typeof spec.pattern !== 'string') fail('invalid_regex', 'regex_string must be a string', '', 'regex_string');
      return `regex:${spec.pattern}`;
    case 'json_schema':
      try {
        return `json_schema:${canonical(spec.schema, false)}`;
      } catch {
        return fail('invalid_schema', 'the schema is not serializable JSON (cyclic?)', '', 'json_schema');
      }
    default:
      throw new InvalidRequestError('invalid_constraint', `unknown constraint kind ${JSON.stringify((spec as { kind: unknown }).kind)}`);
  }
}
