/**
 * A real regex parser (JavaScript `u`-mode syntax) producing the pattern AST.
 *
 * Used for `regex_string` requests, JSON Schema `pattern`, and the built-in
 * `format` regexes. Supported: literals and escapes (\t \n \xHH \uHHHH \u{..}
 * \cX ...), `.`, classes with ranges/negation and \d \w \s \D \W \S, \p{..} /
 * \P{..} (host Unicode tables), groups (capturing, named, `(?:`), alternation,
 * quantifiers * + ? {n} {n,} {n,m} (lazy forms behave as greedy: only the
 * language matters), and `^` / `$` at the ends of top-level alternatives.
 * Backreferences, lookaround, word boundaries and mid-pattern anchors cannot
 * be expressed by a finite automaton and are refused with `invalid_regex`.
 * Matching is over characters; nfa.ts lowers each class to UTF-8 byte paths, so
 * `[^"]` accepts any multi-byte character.
 */
import { type Node, alt, cls, fail, rep, seq } from './ast.ts';
import { type Ranges, DIGIT, DOT, negate, ranges, single, SPACE, union, unicodeProperty, WORD } from './charset.ts';

/** One top-level alternative and whether it was anchored with ^ / $. */
export interface RegexBranch {
  readonly node: Node;
  readonly start: boolean;
  readonly end: boolean;
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

/** The language of a whole-string match of `src` (anchors at the ends are no-ops). */
export function regexFullMatch(src: string, where: RegexWhere): Node {
  return alt(...parseRegex(src, where).map((b) => b.node));
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

  top(): RegexBranch[] {
    const out: RegexBranch[] = [];
    for (;;) {
      const start = this.eat('^');
      const node = this.sequence(true);
      let end = false;
      if (this.eat('$')) end = true;
      if (this.peek() === cp('$') || this.peek() === cp('^')) this.err('anchors are only supported at the ends of the pattern');
      out.push({ node, start, end });
      if (this.eat('|')) continue;
      if (this.i < this.cps.length) this.err(this.peek() === cp(')') ? 'unmatched ")"' : 'unexpected character');
      return out;
    }
  }

  /** Terms until `|`, `)`, end, or (at top level) a final `$`. */
  private sequence(top: boolean): Node {
    const items: Node[] = [];
    for (;;) {
      const c = this.peek();
      if (c === undefined || c === cp('|') || c === cp(')')) break;
      if (c === cp('$')) {
        const next = this.peek(1);
        if (top && (next === undefined || next === cp('|'))) break;
        this.err('anchors are only supported at the ends of the pattern');
      }
      if (c === cp('^')) this.err('anchors are only supported at the ends of the pattern');
      items.push(this.quantified(this.atom()));
    }
    return seq(...items);
  }

  private disjunction(): Node {
    const items = [this.sequence(false)];
    while (this.eat('|')) items.push(this.sequence(false));
    return items.length === 1 ? items[0]! : alt(...items);
  }

  private atom(): Node {
    const c = this.cps[this.i++]!;
    switch (String.fromCodePoint(c)) {
      case '(': {
        if (this.eat('?')) {
          if (this.eat(':')) return this.group();
          if (this.peek() === cp('=') || this.peek() === cp('!')) this.err('lookahead assertions are not supported');
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
      case '}':
      case ']':
        return this.err(`lone "${String.fromCodePoint(c)}" (escape it)`);
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
    else if (this.peek() === cp('{')) {
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
    if (c === cp('*') || c === cp('+') || c === cp('?') || c === cp('{')) this.err('nothing to repeat');
    return rep(atom, min, max);
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
        if (!('cp' in a) || !('cp' in b)) this.err('a class escape cannot be a range endpoint');
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
      case 'b':
      case 'B': return this.err('word boundaries (\\b, \\B) are not supported');
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
