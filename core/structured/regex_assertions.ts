/**
 * Zero-width assertions of a regex — `^`, `$`, `\b`, `\B` — removed from the
 * pattern AST (which has none) by splitting a node into context classes.
 *
 * The parser puts marker nodes where the assertions stand. `contextClasses`
 * then describes a node as up to 16 marker-free languages, indexed
 * `4 * L + R`: the strings it matches whose match needs context L on its left
 * and R on its right, where
 *
 *   L: 0 nothing, 1 the input's start, 2 a word character before,
 *      3 a non-word character before or the input's start;
 *   R: 0 nothing, 1 the input's end, 2 a word character after,
 *      3 a non-word character after or the input's end.
 *
 * (No `m` flag: `^` / `$` are the input's ends only. Word characters are
 * `[A-Za-z0-9_]`, as without the `i` and `u` flags together.) A requirement
 * inside a sequence is met by the neighbouring text when there is some, and
 * passed outward when the neighbour matched nothing; requirements that cannot
 * both hold drop that path. The union over classes of "class strings placed
 * where their context holds" is exactly the pattern's language.
 */
import { type Node, alt, cls, EPS, NONE, rep, seq } from './ast.ts';
import { ANY, intersect, negate, type Ranges, WORD } from './charset.ts';

export const BOL: Node = { t: 'call', rule: '\u0000^' };
export const EOL: Node = { t: 'call', rule: '\u0000$' };
export const WORD_BOUNDARY: Node = { t: 'call', rule: '\u0000\\b' };
export const NOT_WORD_BOUNDARY: Node = { t: 'call', rule: '\u0000\\B' };
const MARKERS = new Set<Node>([BOL, EOL, WORD_BOUNDARY, NOT_WORD_BOUNDARY]);

/** A group holding assertions is unrolled for counted repeats; beyond this many copies the pattern is refused. */
const MAX_ASSERTED_REPEAT = 32;

/** 16 marker-free languages, indexed 4 * L + R (see the file comment). */
export type Classes = Node[];

const ANY_RUN: Node = rep(cls(ANY), 0, Infinity);
const NON_WORD = negate(WORD);
const WORD_CH: Node = cls(WORD);
const NON_WORD_CH: Node = cls(NON_WORD);

/** Both context requirements at once on one side; -1 when they cannot both hold. */
export function meetContexts(a: number, b: number): number {
  if (a === 0 || a === b) return b;
  if (b === 0) return a;
  // start ∧ (non-word or start) = start; every other pair contradicts.
  if ((a === 1 && b === 3) || (a === 3 && b === 1)) return 1;
  return -1;
}

const only = (k: number, n: Node): Classes => {
  const out: Node[] = Array.from({ length: 16 }, () => NONE);
  out[k] = n;
  return out;
};

function hasAssertion(n: Node): boolean {
  if (MARKERS.has(n)) return true;
  if (n.t === 'seq' || n.t === 'alt') return n.items.some(hasAssertion);
  if (n.t === 'rep') return hasAssertion(n.item);
  return false;
}

/** Refuses the pattern: a counted repeat too long to unroll, or a word boundary under an unbounded repeat. */
export type AssertionRefusal = (reason: string, code: 'invalid_regex' | 'constraint_too_complex') => never;

export function contextClasses(n: Node, refuse: AssertionRefusal): Classes {
  if (!hasAssertion(n)) return only(0, n);
  if (n === BOL) return only(4, EPS);
  if (n === EOL) return only(1, EPS);
  if (n === WORD_BOUNDARY) return union([only(4 * 2 + 3, EPS), only(4 * 3 + 2, EPS)]);
  if (n === NOT_WORD_BOUNDARY) return union([only(4 * 2 + 2, EPS), only(4 * 3 + 3, EPS)]);
  if (n.t === 'alt') return union(n.items.map((x) => contextClasses(x, refuse)));
  if (n.t === 'seq') return n.items.map((x) => contextClasses(x, refuse)).reduce(seqClasses);
  if (n.t === 'rep') {
    const c = contextClasses(n.item, refuse);
    if (n.min > MAX_ASSERTED_REPEAT || (n.max !== Infinity && n.max - n.min > MAX_ASSERTED_REPEAT)) {
      refuse(`a repeated group holding assertions repeats more than ${MAX_ASSERTED_REPEAT} times`, 'constraint_too_complex');
    }
    let out = only(0, EPS);
    for (let k = 0; k < n.min; k++) out = seqClasses(out, c);
    if (n.max === Infinity) return seqClasses(out, starClasses(c, refuse));
    const optional = c.slice();
    optional[0] = alt(EPS, c[0]!);
    for (let k = n.min; k < n.max; k++) out = seqClasses(out, optional);
    return out;
  }
  throw new Error(`assertion marker inside a ${n.t} node`); // the parser builds only seq / alt / rep around atoms
}

function union(cs: Classes[]): Classes {
  return Array.from({ length: 16 }, (_, k) => alt(...cs.map((c) => c[k]!)));
}

/** The strings of `x` whose last character satisfies left-requirement `l` of what follows (2 or 3), or none (1). */
function lastIs(x: Node, l: number): Node {
  return l === 1 ? NONE : edgeIn(x, l === 2 ? WORD : NON_WORD, 'last');
}

/** The strings of `y` whose first character satisfies right-requirement `r` of what precedes (2 or 3), or none (1). */
function firstIs(y: Node, r: number): Node {
  return r === 1 ? NONE : edgeIn(y, r === 2 ? WORD : NON_WORD, 'first');
}

/**
 * The nonempty strings of `n` whose last (or first) character is in `set`,
 * built on the AST: the class at that end is narrowed, nothing is
 * determinized (an `and` with "ends with a word character" would build the
 * whole prefix's DFA, thousands of states for a URL pattern's `{1,256}`).
 */
function edgeIn(n: Node, set: Ranges, end: 'first' | 'last'): Node {
  switch (n.t) {
    case 'none':
    case 'eps':
      return NONE;
    case 'cls':
      return cls(intersect(n.set, set));
    case 'alt':
      return alt(...n.items.map((x) => edgeIn(x, set, end)));
    case 'seq': {
      // The edge character comes from the outermost item that matched something.
      const items = end === 'last' ? n.items : [...n.items].reverse();
      const out: Node[] = [];
      for (let k = items.length - 1; k >= 0; k--) {
        const before = items.slice(0, k);
        const edge = edgeIn(items[k]!, set, end);
        out.push(end === 'last' ? seq(...before, edge) : seq(edge, ...[...before].reverse()));
        if (!nullable(items[k]!)) break;
      }
      return alt(...out);
    }
    case 'rep': {
      // One iteration at the edge holds the character; the others pad the count (nullable
      // iterations can stand for missing ones).
      const rest = rep(n.item, nullable(n.item) ? 0 : Math.max(n.min, 1) - 1, n.max - 1);
      const edge = edgeIn(n.item, set, end);
      return end === 'last' ? seq(rest, edge) : seq(edge, rest);
    }
    default:
      throw new Error(`word context on a ${n.t} node`); // the parser builds only classes, seq, alt and rep
  }
}

function nullable(n: Node): boolean {
  switch (n.t) {
    case 'eps':
      return true;
    case 'seq':
      return n.items.every(nullable);
    case 'alt':
      return n.items.some(nullable);
    case 'rep':
      return n.min === 0 || nullable(n.item);
    default:
      return false;
  }
}

/**
 * X then Y. X's right requirement is met by Y's first character, or passed
 * right when Y matched nothing; Y's left requirement by X's last character,
 * or passed left when X matched nothing.
 */
function seqClasses(xc: Classes, yc: Classes): Classes {
  const out: Node[][] = Array.from({ length: 16 }, () => []);
  const add = (l: number, r: number, n: Node): void => {
    if (l >= 0 && r >= 0 && n.t !== 'none') out[4 * l + r]!.push(n);
  };
  for (let kx = 0; kx < 16; kx++) {
    const x = xc[kx]!;
    if (x.t === 'none') continue;
    const lx = kx >> 2;
    const rx = kx & 3;
    for (let ky = 0; ky < 16; ky++) {
      const y = yc[ky]!;
      if (y.t === 'none') continue;
      const ly = ky >> 2;
      const ry = ky & 3;
      const xl = ly ? lastIs(x, ly) : x;
      const yr = rx ? firstIs(y, rx) : y;
      if (!rx && !ly) {
        add(lx, ry, seq(x, y));
        continue;
      }
      // Both nonempty where a requirement applies (lastIs / firstIs hold no empty string) ...
      add(lx, ry, seq(xl, yr));
      // ... X empty: Y's left requirement moves outward (an unrestricted X was already covered).
      if (ly && nullable(x)) add(meetContexts(lx, ly), ry, yr);
      // ... Y empty: X's right requirement moves outward.
      if (rx && nullable(y)) add(lx, meetContexts(rx, ry), xl);
      if (ly && rx && nullable(x) && nullable(y)) add(meetContexts(lx, ly), meetContexts(rx, ry), EPS);
    }
  }
  return out.map((xs) => alt(...xs));
}

/**
 * X* when only `^` / `$` contexts occur (L, R in {0, 1}): iterations that match
 * nothing only add conditions (and can always be skipped), so a match is
 * nonempty iterations where only the first may need the start and only the
 * last the end: P*, S·P*, P*·E, S·P*·E or one SE. Word contexts under an
 * unbounded repeat are refused.
 */
function starClasses(c: Classes, refuse: AssertionRefusal): Classes {
  for (let k = 0; k < 16; k++) if (c[k]!.t !== 'none' && ((k >> 2) > 1 || (k & 3) > 1)) refuse('word boundaries (\\b, \\B) inside an unbounded repeat are not supported', 'invalid_regex');
  const [p, e, s, se] = [c[0]!, c[1]!, c[4]!, c[5]!];
  const ps = rep(p, 0, Infinity);
  const out = only(0, ps);
  out[1] = seq(ps, e);
  out[4] = seq(s, ps);
  out[5] = alt(seq(s, ps, e), se);
  return out;
}

/** What must stand before (L) or after (R) a class's match when it is searched for, as a char-level node. */
export function leftContext(l: number): Node {
  return l === 2 ? seq(ANY_RUN, WORD_CH) : l === 3 ? alt(EPS, seq(ANY_RUN, NON_WORD_CH)) : EPS;
}

export function rightContext(r: number): Node {
  return r === 2 ? seq(WORD_CH, ANY_RUN) : r === 3 ? alt(EPS, seq(NON_WORD_CH, ANY_RUN)) : EPS;
}
