/**
 * Exact digit automata for bounded integers and decimals.
 *
 * JSON Schema `minimum` / `maximum` / `exclusive*` are compiled into regular
 * languages of canonical decimal strings (no leading zeros, no exponent) whose
 * values lie exactly in range: integer parts via the classic "numeric range to
 * regex" split by digit count and common prefix (BigInt, so any magnitude),
 * fraction parts via a digit-by-digit comparison against the bound's fraction.
 * Bounds are read as the exact decimal of the schema number's shortest repr.
 * Unbounded sides are capped at 15 integer digits and outputs keep at most ~15
 * significant digits: every emitted value is then a safe JS number, and a
 * value strictly inside an exclusive bound cannot round onto the bound when
 * parsed back into a double.
 */
import { type Node, alt, chars, EPS, lit, NONE, opt, rep, seq } from './ast.ts';
import { DIGIT } from './charset.ts';

const DIGITS: Node = { t: 'cls', set: DIGIT };
const CAP_DIGITS = 15;
const CAP = 10n ** BigInt(CAP_DIGITS) - 1n;

/** An exact decimal n·10^-k. */
interface Dec {
  n: bigint;
  k: number;
}

export interface Bound {
  value: number;
  exclusive: boolean;
}

const p10 = (k: number): bigint => 10n ** BigInt(k);

function decOf(x: number): Dec {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(x.toString());
  if (!m) throw new Error(`structured: cannot read number ${x}`);
  const frac = m[3] ?? '';
  let n = BigInt(m[2]! + frac);
  let k = frac.length - Number(m[4] ?? 0);
  if (k < 0) {
    n *= p10(-k);
    k = 0;
  }
  return { n: m[1] ? -n : n, k };
}

function floorDec(d: Dec): bigint {
  const q = d.n / p10(d.k);
  return d.n < 0n && q * p10(d.k) !== d.n ? q - 1n : q;
}

const isIntDec = (d: Dec): boolean => d.n % p10(d.k) === 0n;
const ceilDec = (d: Dec): bigint => (isIntDec(d) ? floorDec(d) : floorDec(d) + 1n);
const capFor = (x: bigint): bigint => (x > CAP ? p10(x.toString().length) - 1n : CAP);

/** Canonical decimal strings of the integers in [a, b] (0 ≤ a ≤ b), one part per digit count. */
function rangeParts(a: bigint, b: bigint): Array<{ len: number; node: Node }> {
  if (a > b) return [];
  const sa = a.toString();
  const sb = b.toString();
  const parts: Array<{ len: number; node: Node }> = [];
  for (let len = sa.length; len <= sb.length; len++) {
    const lo = len === sa.length ? sa : '1' + '0'.repeat(len - 1);
    const hi = len === sb.length ? sb : '9'.repeat(len);
    parts.push({ len, node: sameLen(lo, hi) });
  }
  return parts;
}

export const rangeAst = (a: bigint, b: bigint): Node => alt(...rangeParts(a, b).map((p) => p.node));

function sameLen(lo: string, hi: string): Node {
  if (lo === '') return EPS;
  if (lo[0] === hi[0]) return seq(lit(lo[0]!), sameLen(lo.slice(1), hi.slice(1)));
  const rest = lo.length - 1;
  const parts: Node[] = [];
  let from = Number(lo[0]);
  let to = Number(hi[0]);
  if (!/^0*$/.test(lo.slice(1))) parts.push(seq(lit(lo[0]!), sameLen(lo.slice(1), '9'.repeat(rest)))), from++;
  if (!/^9*$/.test(hi.slice(1))) parts.push(seq(lit(hi[0]!), sameLen('0'.repeat(rest), hi.slice(1)))), to--;
  if (from <= to) parts.push(seq(chars([48 + from, 48 + to]), rep(DIGITS, rest, rest)));
  return alt(...parts);
}

/** JSON integers in [lo, hi] (either side may be open). */
export function integerAst(lo: Bound | null, hi: Bound | null): Node {
  let L: bigint | null = null;
  let H: bigint | null = null;
  if (lo) {
    const d = decOf(lo.value);
    L = lo.exclusive && isIntDec(d) ? floorDec(d) + 1n : ceilDec(d);
  }
  if (hi) {
    const d = decOf(hi.value);
    H = hi.exclusive && isIntDec(d) ? floorDec(d) - 1n : floorDec(d);
  }
  if (L !== null && H !== null && L > H) return NONE;
  const parts: Node[] = [];
  if (H === null || H >= 0n) {
    const a = L !== null && L > 0n ? L : 0n;
    parts.push(rangeAst(a, H ?? capFor(a)));
  }
  if (L === null || L < 0n) {
    const c = H !== null && H < 0n ? -H : 1n;
    parts.push(seq(lit('-'), rangeAst(c, L !== null ? -L : capFor(c))));
  }
  return alt(...parts);
}

const ANY_NUMBER: Node = seq(
  opt(lit('-')),
  alt(lit('0'), seq(chars([0x31, 0x39]), rep(DIGITS, 0, CAP_DIGITS - 1))),
  opt(seq(lit('.'), rep(DIGITS, 1, CAP_DIGITS))),
  opt(seq(chars([0x45, 0x45], [0x65, 0x65]), opt(chars([0x2b, 0x2b], [0x2d, 0x2d])), rep(DIGITS, 1, 2))),
);

/** A magnitude bound: integer part, fraction digits (no trailing zeros), exclusivity. */
interface Mag {
  int: bigint;
  frac: string;
  ex: boolean;
}

function magOf(d: Dec, ex: boolean): Mag {
  const abs = d.n < 0n ? -d.n : d.n;
  const int = abs / p10(d.k);
  const frac = d.k ? (abs % p10(d.k)).toString().padStart(d.k, '0').replace(/0+$/, '') : '';
  return { int, frac, ex };
}

/** JSON numbers in [lo, hi] (either side may be open; no bounds → any number). */
export function numberAst(lo: Bound | null, hi: Bound | null): Node {
  if (!lo && !hi) return ANY_NUMBER;
  const dl = lo ? decOf(lo.value) : null;
  const dh = hi ? decOf(hi.value) : null;
  // Near an exclusive bound, keep ≤ 15 significant digits so the parsed double cannot round onto the bound.
  const capped = !!(lo?.exclusive || hi?.exclusive);
  const parts: Node[] = [];
  if (!dh || dh.n >= 0n) {
    const lower = dl && dl.n >= 0n ? magOf(dl, lo!.exclusive) : { int: 0n, frac: '', ex: false };
    parts.push(magAst(lower, dh ? magOf(dh, hi!.exclusive) : null, capped));
  }
  if (!dl || dl.n < 0n) {
    const lower = dh && dh.n < 0n ? magOf(dh, hi!.exclusive) : { int: 0n, frac: '', ex: true };
    parts.push(seq(lit('-'), magAst(lower, dl ? magOf(dl, lo!.exclusive) : null, capped)));
  }
  return alt(...parts);
}

/** Non-negative decimals m with lower ≤ m ≤ upper (upper null: capped integer part). */
function magAst(lower: Mag, upper: Mag | null, capped: boolean): Node {
  const IL = lower.int;
  const IH = upper ? upper.int : capFor(IL);
  if (IL > IH) return NONE;
  const fracDigits = (intLen: number): number => (capped ? Math.max(1, CAP_DIGITS - intLen) : CAP_DIGITS);
  const memo = new Map<string, Node>();
  const frac = (I: bigint, a: string | null, aEx: boolean, b: string | null, bEx: boolean): Node =>
    seq(lit(I.toString()), fracAst(a, aEx, b, bEx, fracDigits(I.toString().length), memo));
  /** Integer parts in [a, b], each followed by any fraction. */
  const free = (a: bigint, b: bigint): Node =>
    alt(...rangeParts(a, b).map((p) => seq(p.node, opt(seq(lit('.'), rep(DIGITS, 1, fracDigits(p.len)))))));
  if (!upper) return alt(frac(IL, lower.frac, lower.ex, null, false), free(IL + 1n, IH));
  if (IL === IH) return frac(IL, lower.frac, lower.ex, upper.frac, upper.ex);
  return alt(frac(IL, lower.frac, lower.ex, null, false), free(IL + 1n, IH - 1n), frac(IH, null, false, upper.frac, upper.ex));
}

/** Optional fraction `.ddd` whose value 0.ddd satisfies a ≤ · ≤ b (strict if *Ex); null = unbounded. */
function fracAst(a: string | null, aEx: boolean, b: string | null, bEx: boolean, K: number, memo: Map<string, Node>): Node {
  const g = digitsAst(a, aEx, b, bEx, K, memo);
  return alt(g.empty ? EPS : NONE, seq(lit('.'), g.nonEmpty));
}

/** Digit strings s (split into empty / non-empty) with a ≤ 0.s ≤ b, at most `rem` digits. */
function digitsAst(
  a0: string | null, aEx: boolean, b: string | null, bEx: boolean, rem: number, memo: Map<string, Node>,
): { empty: boolean; nonEmpty: Node } {
  const a = a0 === '' && !aEx ? null : a0;
  const empty = (a === null || (a === '' && !aEx)) && (b === null || b !== '' || !bEx);
  if (rem === 0) return { empty, nonEmpty: NONE };
  const key = `${a}|${aEx}|${b}|${bEx}|${rem}`;
  const hit = memo.get(key);
  if (hit) return { empty, nonEmpty: hit };
  const parts: Node[] = [];
  let freeLo = -1;
  let freeHi = -1;
  for (let c = 0; c <= 9; c++) {
    let na: string | null = null;
    if (a !== null) {
      const d = a === '' ? 0 : Number(a[0]);
      if (c < d) continue;
      na = c === d ? a.slice(1) : null;
    }
    let nb: string | null = null;
    if (b !== null) {
      const d = b === '' ? 0 : Number(b[0]);
      if (c > d) continue;
      nb = c === d ? b.slice(1) : null;
    }
    if (na === null && nb === null) {
      if (freeLo < 0) freeLo = c;
      freeHi = c;
      continue;
    }
    const sub = digitsAst(na, aEx, nb, bEx, rem - 1, memo);
    parts.push(seq(lit(String(c)), alt(sub.empty ? EPS : NONE, sub.nonEmpty)));
  }
  if (freeLo >= 0) parts.push(seq(chars([48 + freeLo, 48 + freeHi]), rep(DIGITS, 0, rem - 1)));
  const nonEmpty = alt(...parts);
  memo.set(key, nonEmpty);
  return { empty, nonEmpty };
}
