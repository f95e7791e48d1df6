/**
 * Code-point sets and their UTF-8 byte encodings.
 *
 * Every automaton in core/structured runs over UTF-8 *bytes* (that is what a
 * token contributes), while regexes and JSON Schema talk about *characters*.
 * This module is the bridge: a character class is a sorted list of inclusive
 * code-point ranges (surrogates never included: they cannot appear in UTF-8),
 * and `utf8Sequences` turns such a set into a small list of byte-range
 * sequences that accept exactly the valid UTF-8 encodings of its members (no
 * overlong forms), as in Russ Cox's / Rust regex-syntax's utf8-ranges.
 */

/** Flat sorted inclusive ranges [lo0, hi0, lo1, hi1, ...]: disjoint and non-adjacent. */
export type Ranges = readonly number[];

export const MAX_CP = 0x10ffff;
const SUR_LO = 0xd800;
const SUR_HI = 0xdfff;

/** Normalizes arbitrary [lo, hi] pairs (any order, overlapping) into Ranges, removing surrogates. */
export function ranges(pairs: ReadonlyArray<readonly [number, number]>): Ranges {
  const ps: Array<readonly [number, number]> = [];
  for (const p of pairs) if (p[0] <= p[1]) ps.push(p);
  ps.sort((x, y) => x[0] - y[0]);
  const out: number[] = [];
  for (const [a, b] of ps) {
    const n = out.length;
    if (n && a <= out[n - 1]! + 1) out[n - 1] = Math.max(out[n - 1]!, b);
    else out.push(a, b);
  }
  return removeSurrogates(out);
}

function removeSurrogates(r: number[]): Ranges {
  let clean = true;
  for (let i = 0; i < r.length && clean; i += 2) clean = r[i + 1]! < SUR_LO || r[i]! > SUR_HI;
  if (clean) return r;
  const out: number[] = [];
  for (let i = 0; i < r.length; i += 2) push(out, r[i]!, r[i + 1]!);
  return out;
}

/** Appends [a, b] minus the surrogates to a sorted list whose last range ends before a - 1. */
function push(out: number[], a: number, b: number): void {
  if (b < SUR_LO || a > SUR_HI) out.push(a, b);
  else {
    if (a < SUR_LO) out.push(a, SUR_LO - 1);
    if (b > SUR_HI) out.push(SUR_HI + 1, b);
  }
}

export const single = (cp: number): Ranges => (cp >= SUR_LO && cp <= SUR_HI ? [] : [cp, cp]);

// The set operations below merge normalized lists in one linear pass: they run for every
// property-name trie node and string class of a schema, so they allocate only their result.

export function union(...rs: Ranges[]): Ranges {
  let acc: Ranges = [];
  for (const r of rs) acc = acc.length === 0 ? r : r.length === 0 ? acc : union2(acc, r);
  return acc;
}

function union2(a: Ranges, b: Ranges): Ranges {
  const out: number[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    let lo: number;
    let hi: number;
    if (j >= b.length || (i < a.length && a[i]! <= b[j]!)) {
      lo = a[i]!;
      hi = a[i + 1]!;
      i += 2;
    } else {
      lo = b[j]!;
      hi = b[j + 1]!;
      j += 2;
    }
    const n = out.length;
    if (n && lo <= out[n - 1]! + 1) {
      if (hi > out[n - 1]!) out[n - 1] = hi;
    } else out.push(lo, hi);
  }
  // Two ranges on either side of the surrogates never merge across them (neither holds them).
  return out;
}

/** All scalar values not in `r`. */
export function negate(r: Ranges): Ranges {
  const out: number[] = [];
  let next = 0;
  for (let i = 0; i < r.length; i += 2) {
    if (r[i]! > next) push(out, next, r[i]! - 1);
    next = r[i + 1]! + 1;
  }
  if (next <= MAX_CP) push(out, next, MAX_CP);
  return out;
}

export function intersect(a: Ranges, b: Ranges): Ranges {
  const out: number[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const lo = Math.max(a[i]!, b[j]!);
    const hi = Math.min(a[i + 1]!, b[j + 1]!);
    if (lo <= hi) out.push(lo, hi);
    if (a[i + 1]! < b[j + 1]!) i += 2;
    else j += 2;
  }
  return out;
}

export const subtract = (a: Ranges, b: Ranges): Ranges => (b.length === 0 ? a : intersect(a, negate(b)));
export const isEmptySet = (r: Ranges): boolean => r.length === 0;

export function hasCp(r: Ranges, cp: number): boolean {
  for (let i = 0; i < r.length; i += 2) if (cp >= r[i]! && cp <= r[i + 1]!) return true;
  return false;
}

/** Lists the members of a (small) set; used for JSON escapes of control characters. */
export function members(r: Ranges, limit = 4096): number[] {
  const out: number[] = [];
  for (let i = 0; i < r.length; i += 2) for (let c = r[i]!; c <= r[i + 1]! && out.length < limit; c++) out.push(c);
  return out;
}

// ---- predefined classes (JavaScript `u`-mode semantics) -------------------

export const ANY: Ranges = ranges([[0, MAX_CP]]);
export const DIGIT: Ranges = ranges([[0x30, 0x39]]);
export const WORD: Ranges = ranges([[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]]);
export const SPACE: Ranges = ranges([
  [0x09, 0x0d], [0x20, 0x20], [0xa0, 0xa0], [0x1680, 0x1680], [0x2000, 0x200a],
  [0x2028, 0x2029], [0x202f, 0x202f], [0x205f, 0x205f], [0x3000, 0x3000], [0xfeff, 0xfeff],
]);
/** `.` without the `s` flag: everything but line terminators. */
export const DOT: Ranges = negate(ranges([[0x0a, 0x0a], [0x0d, 0x0d], [0x2028, 0x2029]]));

const propCache = new Map<string, Ranges>();

/**
 * `\p{...}` via the host's own Unicode tables (every JS runtime has them):
 * scans all scalar values once per property, then caches the ranges.
 * Returns null if the host rejects the property name.
 */
export function unicodeProperty(body: string): Ranges | null {
  const hit = propCache.get(body);
  if (hit) return hit;
  let re: RegExp;
  try {
    re = new RegExp(`^\\p{${body}}$`, 'u');
  } catch {
    return null;
  }
  const out: Array<[number, number]> = [];
  let start = -1;
  for (let cp = 0; cp <= MAX_CP + 1; cp++) {
    if (cp === SUR_LO) cp = SUR_HI + 1;
    const ok = cp <= MAX_CP && re.test(String.fromCodePoint(cp));
    if (ok && start < 0) start = cp;
    if (!ok && start >= 0) {
      out.push([start, cp - 1]);
      start = -1;
    }
  }
  const r = ranges(out);
  propCache.set(body, r);
  return r;
}

// ---- UTF-8 ------------------------------------------------------------------

export function encodeCp(cp: number): number[] {
  if (cp < 0x80) return [cp];
  if (cp < 0x800) return [0xc0 | (cp >> 6), 0x80 | (cp & 63)];
  if (cp < 0x10000) return [0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63)];
  return [0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 63), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63)];
}

const utf8Encoder = new TextEncoder();
export const utf8 = (s: string): Uint8Array => utf8Encoder.encode(s);

/** A byte-range sequence: [[lo, hi], ...], one pair per byte position. */
export type ByteSeq = Array<[number, number]>;

/** Byte-range sequences accepting exactly the UTF-8 encodings of the members of `r`. */
export function utf8Sequences(r: Ranges): ByteSeq[] {
  const out: ByteSeq[] = [];
  for (let i = 0; i < r.length; i += 2) split(r[i]!, r[i + 1]!, out);
  return out;
}

function split(s: number, e: number, out: ByteSeq[]): void {
  if (s > e) return;
  for (const bound of [0x7f, 0x7ff, 0xffff]) {
    if (s <= bound && e > bound) {
      split(s, bound, out);
      split(bound + 1, e, out);
      return;
    }
  }
  if (e <= 0x7f) {
    out.push([[s, e]]);
    return;
  }
  const n = encodeCp(s).length;
  for (let i = 1; i < n; i++) {
    const m = (1 << (6 * i)) - 1;
    if ((s & ~m) !== (e & ~m)) {
      if ((s & m) !== 0) {
        split(s, s | m, out);
        split((s | m) + 1, e, out);
        return;
      }
      if ((e & m) !== m) {
        split(s, (e & ~m) - 1, out);
        split(e & ~m, e, out);
        return;
      }
    }
  }
  const x = encodeCp(s);
  const y = encodeCp(e);
  out.push(x.map((v, i) => [v, y[i]!] as [number, number]));
}
