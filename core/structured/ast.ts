/**
 * The pattern AST shared by every front end and both backends.
 *
 * Regexes parse into it, JSON Schema compiles into it, and nfa.ts turns it into
 * byte automata. It is a regex AST over characters (`cls` = one code point from
 * a set, encoded as UTF-8) plus four extensions the JSON front end needs:
 * `call` (a reference to another grammar rule: recursion, native backend only),
 * `and` (intersection, e.g. pattern + maxLength; compiled by product
 * construction), `obj` (a JSON object's property list with optional members
 * and correct commas in linear size) and `mod` (an optionally signed decimal
 * digit string whose value is a multiple of m: a residue automaton, m states). The smart constructors fold ∅ and ε so
 * unsatisfiable pieces disappear early. Also home of the error helper: every
 * user-facing failure is an InvalidRequestError with `{ path, keyword }`.
 */
import { InvalidRequestError } from '../errors.ts';
import { type Ranges, isEmptySet, ranges, utf8 } from './charset.ts';

export type Node =
  | { readonly t: 'none' }
  | { readonly t: 'eps' }
  | { readonly t: 'cls'; readonly set: Ranges }
  | { readonly t: 'lit'; readonly bytes: Uint8Array }
  | { readonly t: 'seq'; readonly items: readonly Node[] }
  | { readonly t: 'alt'; readonly items: readonly Node[] }
  | { readonly t: 'rep'; readonly item: Node; readonly min: number; readonly max: number }
  | { readonly t: 'call'; readonly rule: string }
  | { readonly t: 'and'; readonly items: readonly Node[] }
  /** The strings of `item` that are not strings of `minus` (both call-free). */
  | { readonly t: 'diff'; readonly item: Node; readonly minus: Node }
  | { readonly t: 'obj'; readonly props: readonly ObjProp[]; readonly extra: Node | null; readonly sep: Node }
  | { readonly t: 'mod'; readonly m: number };

/** One declared member of an object: `kv` is `"key":value` (already with the colon). */
export interface ObjProp {
  readonly kv: Node;
  readonly required: boolean;
}

export const NONE: Node = { t: 'none' };
export const EPS: Node = { t: 'eps' };

export const cls = (set: Ranges): Node => (isEmptySet(set) ? NONE : { t: 'cls', set });
export const chars = (...pairs: Array<[number, number]>): Node => cls(ranges(pairs));
export const lit = (s: string | Uint8Array): Node => {
  const bytes = typeof s === 'string' ? utf8(s) : s;
  return bytes.length ? { t: 'lit', bytes } : EPS;
};

export function seq(...items: Node[]): Node {
  const out: Node[] = [];
  for (const n of items) {
    if (n.t === 'none') return NONE;
    if (n.t === 'eps') continue;
    if (n.t === 'seq') out.push(...n.items);
    else out.push(n);
  }
  return out.length === 0 ? EPS : out.length === 1 ? out[0]! : { t: 'seq', items: out };
}

export function alt(...items: Node[]): Node {
  const out: Node[] = [];
  for (const n of items) {
    if (n.t === 'none') continue;
    if (n.t === 'alt') out.push(...n.items);
    else out.push(n);
  }
  return out.length === 0 ? NONE : out.length === 1 ? out[0]! : { t: 'alt', items: out };
}

export function rep(item: Node, min: number, max: number): Node {
  if (max < min) return NONE;
  if (item.t === 'none') return min === 0 ? EPS : NONE;
  if (item.t === 'eps' || max === 0) return EPS;
  if (min === 1 && max === 1) return item;
  return { t: 'rep', item, min, max };
}

export const opt = (n: Node): Node => rep(n, 0, 1);

export function and(...items: Node[]): Node {
  if (items.some((n) => n.t === 'none')) return NONE;
  return items.length === 1 ? items[0]! : { t: 'and', items };
}

/** item ∖ minus (both call-free). */
export function diff(item: Node, minus: Node): Node {
  if (item.t === 'none' || minus.t === 'none') return item;
  return { t: 'diff', item, minus };
}

export function hasCall(n: Node): boolean {
  switch (n.t) {
    case 'call':
      return true;
    case 'seq':
    case 'alt':
    case 'and':
      return n.items.some(hasCall);
    case 'rep':
      return hasCall(n.item);
    case 'diff':
      return hasCall(n.item) || hasCall(n.minus);
    case 'obj':
      return n.props.some((p) => hasCall(p.kv)) || (n.extra !== null && hasCall(n.extra)) || hasCall(n.sep);
    default:
      return false;
  }
}

// ---- errors -----------------------------------------------------------------

export type ErrorCode = 'invalid_schema' | 'unsupported_schema_keyword' | 'invalid_regex' | 'constraint_too_complex';

/** Appends a JSON-pointer segment (RFC 6901 escaping). */
export const ptr = (base: string, seg: string | number): string =>
  `${base}/${String(seg).replace(/~/g, '~0').replace(/\//g, '~1')}`;

export function fail(code: ErrorCode, message: string, path: string, keyword: string, extra: Record<string, unknown> = {}): never {
  const where = path === '' ? 'the root' : path;
  throw new InvalidRequestError(code, `${message} (at ${where}, keyword "${keyword}")`, { path, keyword, ...extra });
}
