/**
 * A real regex parser (JavaScript `u`-mode syntax) producing the pattern AST.
 *
 * Used for `regex_string` requests, JSON Schema `pattern`, and the built-in
 * `format` regexes. Supported: literals and escapes (\t \n \xHH \uHHHH \u{..}
 * \cX ...), `.`, classes with ranges/negation and \d \w \s \D \W \S, \p{..} /
 * \P{..} (host Unicode tables), groups (capturing, named, `(?:`), alternation,
 * quantifiers * + ? {n} {n,} {n,m} (lazy forms behave as greedy: only the
 * language matters), `^` / `$` anywhere (the input's ends: `(^http|^https)/`,
 * `(^a$|b$)`) and word boundaries `\b` / `\B` (exact: regex_assertions.ts), and
 * lookaheads `(?=X)` / `(?!X)` at the start of an alternative anchored there
 * (`^(?!X)Y`, the common "not this name" form: intersection with, or
 * difference from, the strings that start with X). Also the web-compatibility
 * syntax of ECMA-262 Annex B that real schemas rely on (what `new RegExp(p)`
 * without the `u` flag reads): identity escapes of ASCII punctuation (`\-`,
 * `\@`), a lone `]` or `}`, a `{` that does not start a quantifier, and a
 * class escape next to `-` inside a class (`[\w-.]`: the `-` is literal).
 * Backreferences, lookbehind, other lookaheads, and word boundaries under
 * an unbounded repeat are refused with `invalid_regex`. Matching is over
 * characters (as in `u` mode); nfa.ts lowers each class to UTF-8 byte paths,
 * so `[^"]` accepts any multi-byte character.
 */
import { type Node, alt, and, cls, diff, EPS, fail, rep, seq } from './ast.ts';
import { ANY, type Ranges, DIGIT, DOT, negate, ranges, single, SPACE, union, unicodeProperty, WORD } from './charset.ts';
import { BOL, contextClasses, EOL, leftContext, meetContexts, NOT_WORD_BOUNDARY, rightContext, WORD_BOUNDARY } from './regex_assertions.ts';

/** One top-level alternative and whether it was anchored with ^ / $. */
export interface RegexBranch {
  readonly node: Node;
  readonly start: boolean;
  readonly end: boolean;
  /**
   * Lookaheads at the alternative's start (only when it is anchored there):
   * the whole string must (`negative: false`) or must not start with a match
   * of one of `branches` (each itself anchored at its end or not).
   */
  readonly ahead?: ReadonlyArray<{ readonly negative: boolean; readonly branches: readonly RegexBranch[] }>;
}

export interface RegexWhere {
  readonly path: string;
  readonly keyword: string;
}

/** Largest {n,m} count, checked while parsing (before the repeat is unrolled into automaton states). */
export const MAX_REPEAT = 1000;
const SYNTAX = new Set([...'^$\\.*+?()[]{}|/'].map((c) => c.codePointAt(0)!));
const cp = (c: string): number => c.codePointAt(0)!;

/** Parses `src`; returns its top-level alternatives with their anchors. */
export function parseRegex(src: string, where: RegexWhere): RegexBranch[] {
  return new Parser(src, where).top();
}

/** The language of a whole-string match of `src` (anchors at the ends are no-ops; leading lookaheads apply to the whole string). */
export function regexFullMatch(src: string, where: RegexWhere): Node {
  const anyRun = rep(cls(ANY), 0, Infinity);
  return alt(...new Parser(src, where).top(true).map((b) => applyLookaheads(b.node, b, (n) => n, anyRun)));
}

/**
 * A branch's leading lookaheads applied to its language `base` (the branch is
 * anchored at the start, so they look at the whole string): ∩ the strings that
 * start with a match of X for (?=X), ∖ them for (?!X). `enc` maps X's
 * characters to the text being matched (JSON string content for `pattern`);
 * `anyRun` is any rest of that text.
 */
export function applyLookaheads(base: Node, b: RegexBranch, enc: (n: Node) => Node, anyRun: Node): Node {
  let out = base;
  for (const la of b.ahead ?? []) {
    const starts = alt(...la.branches.map((x) => seq(enc(x.node), x.end ? EPS : anyRun)));
    out = la.negative ? diff(out, starts) : and(out, starts);
  }
  return out;
}

type ClassAtom = { cp: number } | { set: Ranges };

class Parser {
  private readonly cps: number[];
  private i = 0;

  constructor(
    private readonly src: string,
    private readonly where: RegexWhere,
  ) {
    this.cps = Array.from(src, (c) => c.codePointAt(0)!);
  }

  private err(reason: string, code: 'invalid_regex' | 'constraint_too_complex' = 'invalid_regex'): never {
    return fail(code, `invalid regex /${this.src}/: ${reason}`, this.where.path, this.where.keyword, {
      position: this.i,
      reason,
    });
  }

  private peek(k = 0): number | undefined {
    return this.cps[this.i + k];
  }

  private eat(c: string): boolean {
    if (this.cps[this.i] === cp(c)) {
      this.i++;
      return true;
    }
    return false;
  }

  /**
   * `full`: the pattern must match from position 0 (regex_string, formats, a lookahead's body); a
   * lookahead's body (`lookaheadBody`) need not reach the input's end unless it says so with `$`.
   */
  top(full = false, lookaheadBody = false): RegexBranch[] {
    const out: RegexBranch[] = [];
    for (;;) {
      const ahead: Array<{ negative: boolean; branches: RegexBranch[] }> = [];
      let start = this.eat('^');
      for (let la; (la = this.lookahead()); ) {
        ahead.push(la);
        if (!start) start = this.eat('^');
      }
      if (ahead.length && !start && !full) this.err('lookahead assertions are only supported at the start of an alternative anchored with ^');
      const classes = contextClasses(this.sequence(), (reason, code) => this.err(reason, code));
      // One branch per context class that is not empty (none at all when the assertions cannot hold).
      for (const [k, body] of classes.entries()) {
        if (body.t === 'none') continue;
        const l = start || (full && ahead.length > 0) ? meetContexts(k >> 2, 1) : k >> 2;
        const r = k & 3;
        if (l < 0) continue;
        let node: Node = body;
        if (full) {
          // Position 0 is the input's start: nothing stands before it (a word character cannot).
          if (l === 2) continue;
          // A lookahead's match is followed by the rest of the input, which it does not see.
          if (lookaheadBody && r > 1) this.err('word boundaries at the end of a lookahead are not supported');
          if (!lookaheadBody && r === 2) continue;
        } else node = seq(leftContext(l), body, rightContext(r));
        const branch = { node, start: l !== 0 || (full && !lookaheadBody), end: r !== 0 };
        out.push(ahead.length ? { ...branch, ahead } : branch);
      }
      if (this.eat('|')) continue;
      if (this.i < this.cps.length) this.err(this.peek() === cp(')') ? 'unmatched ")"' : 'unexpected character');
      return out;
    }
  }

  /** A `(?=X)` / `(?!X)` here: consumed, with X's alternatives; null if there is none. */
  private lookahead(): { negative: boolean; branches: RegexBranch[] } | null {
    if (this.peek() !== cp('(') || this.peek(1) !== cp('?') || (this.peek(2) !== cp('=') && this.peek(2) !== cp('!'))) return null;
    const negative = this.peek(2) === cp('!');
    const open = this.i;
    this.i += 3;
    // The body up to the matching ")", then parsed on its own (anchors at its ends allowed, as at the top).
    let depth = 1;
    let inClass = false;
    const from = this.i;
    for (; this.i < this.cps.length; this.i++) {
      const c = this.cps[this.i]!;
      if (c === cp('\\')) this.i++;
      else if (inClass) inClass = c !== cp(']');
      else if (c === cp('[')) inClass = true;
      else if (c === cp('(')) depth++;
      else if (c === cp(')') && --depth === 0) break;
    }
    if (depth !== 0) {
      this.i = open;
      this.err('unterminated group');
    }
    const body = String.fromCodePoint(...this.cps.slice(from, this.i));
    this.i++;
    const branches = new Parser(body, this.where).top(true, true);
    if (branches.some((b) => b.ahead)) {
      this.i = open;
      this.err('nested lookahead assertions are not supported');
    }
    return { negative, branches };
  }

  /** Terms until `|`, `)` or the end; `^`, `$`, `\b` and `\B` become markers (contextClasses removes them). */
  private sequence(): Node {
    const items: Node[] = [];
    for (;;) {
      const c = this.peek();
      if (c === undefined || c === cp('|') || c === cp(')')) break;
      const boundary = c === cp('\\') && (this.peek(1) === cp('b') || this.peek(1) === cp('B'));
      if (c === cp('^') || c === cp('$') || boundary) {
        const marker = c === cp('^') ? BOL : c === cp('$') ? EOL : this.peek(1) === cp('b') ? WORD_BOUNDARY : NOT_WORD_BOUNDARY;
        this.i += boundary ? 2 : 1;
        const q = this.peek();
        if (q === cp('*') || q === cp('+') || q === cp('?') || (q === cp('{') && this.quantifierAhead())) this.err('nothing to repeat');
        items.push(marker);
        continue;
      }
      items.push(this.quantified(this.atom()));
    }
    return seq(...items);
  }

  private disjunction(): Node {
    const items = [this.sequence()];
    while (this.eat('|')) items.push(this.sequence());
    return items.length === 1 ? items[0]! : alt(...items);
  }

  private atom(): Node {
    const c = this.cps[this.i++]!;
    switch (String.fromCodePoint(c)) {
      case '(': {
        if (this.eat('?')) {
          if (this.eat(':')) return this.group();
          if (this.peek() === cp('=') || this.peek() === cp('!')) this.err('lookahead assertions are only supported at the start of an alternative anchored with ^');
          if (this.eat('<')) {
            if (this.peek() === cp('=') || this.peek() === cp('!')) this.err('lookbehind assertions are not supported');
            while (this.peek() !== undefined && this.peek() !== cp('>')) this.i++;
            if (!this.eat('>')) this.err('unterminated group name');
            return this.group();
          }
          this.err('unsupported group syntax (inline flags?)');
        }
        return this.group();
      }
      case ')':
        return this.err('unmatched ")"');
      case '[':
        return cls(this.charClass());
      case '.':
        return cls(DOT);
      case '\\':
        return this.escapeAtom();
      case '*':
      case '+':
      case '?':
        return this.err('nothing to repeat');
      case '{':
        // Annex B: a "{" that does not start a quantifier is a literal (a quantifier here has nothing to repeat).
        this.i--;
        if (this.quantifierAhead()) this.err('nothing to repeat');
        this.i++;
        return cls(single(c));
      case '}':
      case ']':
        return cls(single(c)); // Annex B: a lone "}" or "]" is a literal

      default:
        return cls(single(c));
    }
  }

  private group(): Node {
    const n = this.disjunction();
    if (!this.eat(')')) this.err('unterminated group');
    return n;
  }

  private quantified(atom: Node): Node {
    let min: number;
    let max: number;
    if (this.eat('*')) [min, max] = [0, Infinity];
    else if (this.eat('+')) [min, max] = [1, Infinity];
    else if (this.eat('?')) [min, max] = [0, 1];
    else if (this.peek() === cp('{') && this.quantifierAhead()) {
      this.i++;
      min = this.int();
      max = min;
      if (this.eat(',')) max = this.peek() === cp('}') ? Infinity : this.int();
      if (!this.eat('}')) this.err('malformed {n,m} quantifier');
      if (max < min) this.err('numbers out of order in {n,m} quantifier');
      if (min > MAX_REPEAT || (max !== Infinity && max > MAX_REPEAT)) this.err(`repetition counts above ${MAX_REPEAT} are not supported`, 'constraint_too_complex');
    } else return atom;
    this.eat('?'); // lazy: same language
    const c = this.peek();
    if (c === cp('*') || c === cp('+') || c === cp('?') || (c === cp('{') && this.quantifierAhead())) this.err('nothing to repeat');
    return rep(atom, min, max);
  }

  /** Whether a `{n}`, `{n,}` or `{n,m}` quantifier starts here. */
  private quantifierAhead(): boolean {
    return /^\{\d+(,\d*)?\}/.test(String.fromCodePoint(...this.cps.slice(this.i, this.i + 24)));
  }

  private int(): number {
    let s = '';
    while (this.peek() !== undefined && this.peek()! >= 0x30 && this.peek()! <= 0x39) s += String.fromCodePoint(this.cps[this.i++]!);
    if (!s) this.err('malformed {n,m} quantifier');
    return Number(s);
  }

  private charClass(): Ranges {
    const neg = this.eat('^');
    const parts: Ranges[] = [];
    for (;;) {
      if (this.peek() === undefined) this.err('unterminated character class');
      if (this.eat(']')) break;
      const a = this.classAtom();
      if (this.peek() === cp('-') && this.peek(1) !== undefined && this.peek(1) !== cp(']')) {
        this.i++;
        const b = this.classAtom();
        if (!('cp' in a) || !('cp' in b)) {
          // Annex B: next to a class escape (\w-.), "-" is a literal, not a range.
          parts.push('cp' in a ? single(a.cp) : a.set, single(cp('-')), 'cp' in b ? single(b.cp) : b.set);
          continue;
        }
        if (a.cp > b.cp) this.err('range out of order in character class');
        parts.push(ranges([[a.cp, b.cp]]));
      } else parts.push('cp' in a ? single(a.cp) : a.set);
    }
    const set = union(...parts);
    return neg ? negate(set) : set;
  }

  private classAtom(): ClassAtom {
    const c = this.cps[this.i++]!;
    if (c !== cp('\\')) return { cp: c };
    if (this.eat('b')) return { cp: 8 };
    if (this.eat('-')) return { cp: cp('-') };
    return this.escape();
  }

  private escapeAtom(): Node {
    const e = this.escape();
    return cls('cp' in e ? single(e.cp) : e.set);
  }

  /** After a backslash (outside-class rules; classAtom handles \b and \-). */
  private escape(): ClassAtom {
    const c = this.cps[this.i++];
    if (c === undefined) return this.err('\\ at end of pattern');
    const ch = String.fromCodePoint(c);
    switch (ch) {
      case 'd': return { set: DIGIT };
      case 'D': return { set: negate(DIGIT) };
      case 'w': return { set: WORD };
      case 'W': return { set: negate(WORD) };
      case 's': return { set: SPACE };
      case 'S': return { set: negate(SPACE) };
      case 't': return { cp: 9 };
      case 'n': return { cp: 10 };
      case 'v': return { cp: 11 };
      case 'f': return { cp: 12 };
      case 'r': return { cp: 13 };
      case 'B': return this.err('\\B is not allowed in a character class');
      case 'k': return this.err('backreferences are not supported');
      case '0':
        if (this.peek() !== undefined && this.peek()! >= 0x30 && this.peek()! <= 0x39) this.err('octal escapes are not allowed');
        return { cp: 0 };
      case 'c': {
        const l = this.cps[this.i++];
        if (l === undefined || !/[A-Za-z]/.test(String.fromCodePoint(l))) this.err('invalid \\c escape');
        return { cp: l! % 32 };
      }
      case 'x': return { cp: this.hex(2) };
      case 'u': return { cp: this.unicodeEscape() };
      case 'p':
      case 'P': {
        if (!this.eat('{')) this.err('invalid \\p escape');
        let body = '';
        while (this.peek() !== undefined && this.peek() !== cp('}')) body += String.fromCodePoint(this.cps[this.i++]!);
        if (!this.eat('}')) this.err('unterminated \\p{...}');
        const set = unicodeProperty(body);
        if (!set) this.err(`unknown Unicode property "${body}"`);
        return { set: ch === 'p' ? set : negate(set) };
      }
      default:
        if (c >= 0x31 && c <= 0x39) this.err('backreferences are not supported');
        if (SYNTAX.has(c)) return { cp: c };
        // Annex B identity escapes, limited to ASCII punctuation (\- \@ \' \" …); an escaped letter stays an error.
        if (c < 0x80 && !/[A-Za-z0-9]/.test(ch)) return { cp: c };
        return this.err(`invalid escape "\\${ch}"`);
    }
  }

  private hex(n: number): number {
    let s = '';
    for (let k = 0; k < n; k++) {
      const c = this.cps[this.i++];
      if (c === undefined || !/[0-9a-fA-F]/.test(String.fromCodePoint(c))) this.err('invalid hex escape');
      s += String.fromCodePoint(c!);
    }
    return parseInt(s, 16);
  }

  private unicodeEscape(): number {
    if (this.eat('{')) {
      let s = '';
      while (this.peek() !== undefined && this.peek() !== cp('}')) s += String.fromCodePoint(this.cps[this.i++]!);
      if (!this.eat('}') || !/^[0-9a-fA-F]+$/.test(s) || parseInt(s, 16) > 0x10ffff) this.err('invalid \\u{...} escape');
      return parseInt(s, 16);
    }
    const hi = this.hex(4);
    if (hi >= 0xd800 && hi <= 0xdbff && this.peek() === cp('\\') && this.peek(1) === cp('u')) {
      const save = this.i;
      this.i += 2;
      const lo = this.hex(4);
      if (lo >= 0xdc00 && lo <= 0xdfff) return 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
      this.i = save;
    }
    return hi;
  }
}
