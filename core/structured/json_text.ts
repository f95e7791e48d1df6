/**
 * JSON lexical pieces as pattern ASTs: strings (with length, pattern, format),
 * object keys, literal values and separators.
 *
 * Schema keywords describe *decoded* strings, but the model writes the
 * *encoded* JSON text. Unconstrained strings accept every escape form
 * (\" \\ \/ \b \f \n \r \t and \uXXXX except lone surrogates, so each unit is
 * exactly one character and lengths count like ajv's code-point length). For
 * `pattern` / `format`, each character class of the regex is rewritten to the
 * canonical encoding of its members (raw UTF-8, or the short / \u00XX escape
 * for `"`, `\` and controls): a match on the text is then a match on the value.
 * JSON Schema patterns are unanchored searches, so unanchored sides get `.*`.
 * Several string constraints are intersected (`and`) by product construction.
 */
import { type Node, alt, and, chars, cls, diff, EPS, lit, NONE, rep, seq } from './ast.ts';
import { ANY, hasCp, type Ranges, intersect, members, ranges, single, subtract, union } from './charset.ts';
import { TooLargeError } from './budget.ts';
import { applyLookaheads, parseRegex, regexFullMatch, type RegexBranch } from './regex.ts';

/**
 * Insignificant whitespace the output must use:
 * 'none' = `{"a":1,"b":[1,2]}`; 'compact' = `{"a": 1, "b": [1, 2]}` (exactly
 * one space after every ':' and ',', none elsewhere; Python json.dumps'
 * default separators); 'flexible' = any run of JSON whitespace (space, tab,
 * LF, CR) of at most FLEXIBLE_MAX characters wherever JSON allows whitespace
 * inside the value — after '{' and '[', before '}' and ']', around ':' and ','
 * (an empty `{}` / `[]` holds two such runs) — so indented output stays on
 * the model's distribution while a model cannot loop on whitespace;
 * 'flexible:N' sets that maximum to N (1..64). Never before or after the
 * root value: the output starts with its first token and ends with its last.
 */
export type Whitespace = 'none' | 'compact' | 'flexible' | `flexible:${number}`;
export const WHITESPACES: readonly Whitespace[] = ['none', 'compact', 'flexible'];
/** Longest whitespace run in 'flexible' mode (enough for 2-space indent at depth 7 after a newline). */
export const FLEXIBLE_MAX = 16;
export const FLEXIBLE_LIMIT = 64;

/** The longest whitespace run a mode allows between two tokens (0: none; compact's single spaces are fixed). */
export function flexibleMax(ws: Whitespace): number {
  if (ws === 'flexible') return FLEXIBLE_MAX;
  return ws.startsWith('flexible:') ? Number(ws.slice(9)) : 0;
}

/** A run of insignificant whitespace (flexible modes only; ε otherwise). */
export function wsRun(ws: Whitespace): Node {
  const max = flexibleMax(ws);
  return max ? rep(chars([0x09, 0x0a], [0x0d, 0x0d], [0x20, 0x20]), 0, max) : EPS;
}

/** Characters JSON requires escaped. */
const ESC: Ranges = ranges([[0, 0x1f], [0x22, 0x22], [0x5c, 0x5c]]);
const SHORT: Record<number, string> = { 0x22: '"', 0x5c: '\\', 8: 'b', 12: 'f', 10: 'n', 13: 'r', 9: 't' };
const HEX: Node = chars([0x30, 0x39], [0x41, 0x46], [0x61, 0x66]);

/** One character of a JSON string in any valid encoding (lone-surrogate \u escapes excluded). */
export const JSON_CHAR: Node = alt(
  cls(subtract(ANY, ESC)),
  seq(
    lit('\\'),
    alt(
      chars([0x22, 0x22], [0x5c, 0x5c], [0x2f, 0x2f], [0x62, 0x62], [0x66, 0x66], [0x6e, 0x6e], [0x72, 0x72], [0x74, 0x74]),
      seq(
        lit('u'),
        alt(
          seq(chars([0x30, 0x39], [0x41, 0x43], [0x61, 0x63]), rep(HEX, 3, 3)),
          seq(chars([0x44, 0x44], [0x64, 0x64]), chars([0x30, 0x37]), rep(HEX, 2, 2)),
          seq(chars([0x45, 0x46], [0x65, 0x66]), rep(HEX, 3, 3)),
        ),
      ),
    ),
  ),
);

const escapeOf = (c: number): string => (SHORT[c] !== undefined ? `\\${SHORT[c]}` : `\\u${c.toString(16).padStart(4, '0')}`);

/** The canonical escape of each character JSON requires escaped (34 of them), built once. */
const ESCAPED = new Map(members(ESC).map((c) => [c, lit(escapeOf(c))]));

/** Canonical JSON-string encoding of one character from `set`. */
export function encodedClass(set: Ranges): Node {
  if (set.length === 2 && set[0] === set[1]) return ESCAPED.get(set[0]!) ?? cls(set);
  const esc = intersect(set, ESC);
  if (esc.length === 0) return cls(set);
  return alt(cls(subtract(set, ESC)), ...members(esc).map((c) => ESCAPED.get(c)!));
}

const ANY_ENCODED = encodedClass(ANY);

/** Rewrites every character class of a char-level regex AST to its JSON encoding. */
function encodeChars(n: Node): Node {
  switch (n.t) {
    case 'cls':
      return encodedClass(n.set);
    case 'seq':
      return seq(...n.items.map(encodeChars));
    case 'alt':
      return alt(...n.items.map(encodeChars));
    case 'rep':
      return rep(encodeChars(n.item), n.min, n.max);
    default:
      return n;
  }
}

/** A JSON Schema `pattern` (unanchored search semantics) over encoded string content. */
export function patternContent(branches: readonly RegexBranch[]): Node {
  const anyRun = rep(ANY_ENCODED, 0, Infinity);
  return alt(...branches.map((b) => applyLookaheads(seq(b.start ? EPS : anyRun, encodeChars(b.node), b.end ? EPS : anyRun), b, encodeChars, anyRun)));
}

// The supported `format`s, as regexes over ASCII. Each accepts a subset of what ajv-formats
// (full mode) accepts, so generated strings always validate; unknown-to-ajv IDN/IRI formats use
// their ASCII forms (every URI is an IRI, every email an idn-email).
const DATE = String.raw`\d{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)`;
const TIME = String.raw`(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)`;
const LABEL = String.raw`[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,20}[a-zA-Z0-9])?`;
const OCTET = String.raw`(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)`;
const SEG = String.raw`[a-zA-Z0-9._~!$&()*+,;=:@-]`;
const TAIL = String.raw`(?:\?[a-zA-Z0-9._~!$&()*+,;=:@/?-]*)?(?:#[a-zA-Z0-9._~!$&()*+,;=:@/?-]*)?`;
/** scheme ":" then "//" authority path, an absolute path or a rootless path; any scheme (file:///x, urn:a:b, mailto:a@b). */
const URI = String.raw`[a-zA-Z][a-zA-Z0-9+.-]{0,15}:(?://[a-zA-Z0-9._~-]*(?::\d{1,5})?(?:/${SEG}*)*|/(?:${SEG}+(?:/${SEG}*)*)?|${SEG}+(?:/${SEG}*)*)${TAIL}`;
/** A relative reference whose first segment has no ':' (./a, ../b?q, /x, #frag, empty). */
const RELATIVE_REF = String.raw`(?:/?[a-zA-Z0-9._~-]+(?:/${SEG}*)*)?${TAIL}`;
/** A URI, or a relative reference. */
const URI_REF = `${URI}|${RELATIVE_REF}`;
const H16 = '[0-9a-fA-F]{1,4}';
/** IPv6: eight groups, or "::" standing for at least one zero group (left + right ≤ 7 groups). */
const IPV6 = [`(?:${H16}:){7}${H16}`]
  .concat(Array.from({ length: 8 }, (_, l) => Array.from({ length: 8 - l }, (_, r) => {
    const left = l ? `(?:${H16}:){${l - 1}}${H16}` : '';
    const right = r ? `${H16}(?::${H16}){${r - 1}}` : '';
    return `${left}::${right}`;
  })).flat())
  .join('|');
/** Local part unbounded (ajv-formats' is too; a counted one makes every length its own automaton state); labels bounded (its fast mode bounds them). */
const EMAIL = String.raw`[a-zA-Z0-9_+-]+(?:\.[a-zA-Z0-9_+-]+){0,2}@(?:${LABEL}\.){1,3}[a-zA-Z]{2,6}`;
const HOSTNAME = String.raw`${LABEL}(?:\.${LABEL}){0,4}`;
export const FORMATS: Readonly<Record<string, string>> = {
  date: DATE,
  time: TIME,
  'date-time': `${DATE}T${TIME}`,
  uuid: String.raw`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`,
  email: EMAIL,
  'idn-email': EMAIL,
  ipv4: String.raw`(?:${OCTET}\.){3}${OCTET}`,
  ipv6: IPV6,
  hostname: HOSTNAME,
  'idn-hostname': HOSTNAME,
  uri: URI,
  iri: URI,
  'uri-reference': URI_REF,
  'iri-reference': URI_REF,
  'uri-template': String.raw`(?:[a-zA-Z0-9._~:/?#@!$&()*+,;=-]|\{[+#./;?&]?[a-zA-Z0-9_]{1,20}(?:,[a-zA-Z0-9_]{1,20}){0,4}\})*`,
  byte: String.raw`(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?`,
  url: String.raw`https?://(?:[a-zA-Z0-9]{1,20}\.){1,3}[a-zA-Z]{2,6}(?::[1-9]\d{1,4})?(?:/[a-zA-Z0-9._~-]*)*`,
  'json-pointer': String.raw`(?:/(?:[a-zA-Z0-9_.-]|~[01])*)*`,
  'relative-json-pointer': String.raw`(?:0|[1-9]\d{0,3})(?:#|(?:/(?:[a-zA-Z0-9_.-]|~[01])*)*)`,
  /** Literal text, optionally anchored: always a valid ECMA-262 pattern. */
  regex: String.raw`\^?[a-zA-Z0-9_ -]*\$?`,
  // Formats ajv-formats does not know (validators ignore them), each a subset of what its
  // definition accepts: XML Schema's `language` (BCP 47 tag syntax); a `color` as a CSS hex
  // color; protobuf's Duration JSON (`google-duration`: seconds, up to 9 decimals, then `s`;
  // 11 integer digits stay inside its ±315,576,000,000 s range); `relative-uri`, a relative
  // reference.
  language: String.raw`[a-zA-Z]{1,8}(?:-[a-zA-Z0-9]{1,8})*`,
  color: String.raw`#(?:[0-9a-fA-F]{3}){1,2}`,
  'google-duration': String.raw`-?\d{1,11}(?:\.\d{1,9})?s`,
  'relative-uri': RELATIVE_REF,
  duration: String.raw`P(?:\d{1,4}W|\d{1,4}Y(?:\d{1,4}M)?(?:\d{1,4}D)?|\d{1,4}M(?:\d{1,4}D)?|\d{1,4}D)(?:T(?:\d{1,4}H(?:\d{1,4}M)?(?:\d{1,4}S)?|\d{1,4}M(?:\d{1,4}S)?|\d{1,4}S))?|PT(?:\d{1,4}H(?:\d{1,4}M)?(?:\d{1,4}S)?|\d{1,4}M(?:\d{1,4}S)?|\d{1,4}S)`,
};

export interface StringSpec {
  minLength: number;
  maxLength: number;
  patterns: ReadonlyArray<{ src: string; path: string }>;
  formats: ReadonlyArray<{ name: string; path: string }>;
  /** Decoded values the string must not be (`not: {const/enum}`); canonical encodings only. */
  excluded?: readonly string[];
  /** Patterns the string must not match (negated `pattern`); canonical encodings only. */
  notPatterns?: ReadonlyArray<{ src: string; path: string }>;
}

/** A whole JSON string (with quotes) satisfying every constraint in `spec`. */
export function stringAst(spec: StringSpec): Node {
  const parts: Node[] = [];
  for (const p of spec.patterns) parts.push(patternContent(parseRegex(p.src, { path: p.path, keyword: 'pattern' })));
  for (const f of spec.formats) parts.push(regexFullMatch(FORMATS[f.name]!, { path: f.path, keyword: 'format' }));
  if (spec.excluded?.length) parts.push(contentExcluding(spec.excluded));
  const negated = (spec.notPatterns ?? []).map((p) => patternContent(parseRegex(p.src, { path: p.path, keyword: 'pattern' })));
  if (negated.length) {
    // A complement is taken among canonical encodings (what the matched languages are written in):
    // a non-canonical escape of a matching string must not slip through as "not matching".
    parts.push(rep(ANY_ENCODED, spec.minLength, spec.maxLength));
    let content = and(...parts);
    for (const n of negated) content = diff(content, n);
    return seq(lit('"'), content, lit('"'));
  }
  if (spec.minLength > 0 || spec.maxLength !== Infinity || parts.length === 0) {
    parts.push(rep(JSON_CHAR, spec.minLength, spec.maxLength));
  }
  return seq(lit('"'), and(...parts), lit('"'));
}

/** A JSON string key whose decoded value is none of `names` (canonical encoding only). */
export function keyExcluding(names: readonly string[]): Node {
  if (names.length === 0) return seq(lit('"'), rep(JSON_CHAR, 0, Infinity), lit('"'));
  return seq(lit('"'), contentExcluding(names), lit('"'));
}

/** Longest key or string value that can be excluded (UTF-16 units). */
const MAX_EXCLUDED_NAME = 256;

/** String content (between the quotes) whose decoded value is none of `names`, canonically encoded. */
function contentExcluding(names: readonly string[]): Node {
  // The construction below nests one level per character (AST and automaton builders recurse on it).
  if (names.some((n) => n.length > MAX_EXCLUDED_NAME)) throw new TooLargeError(`a name to exclude is longer than ${MAX_EXCLUDED_NAME} characters`);
  interface T {
    end: boolean;
    kids: Map<number, T>;
  }
  const root: T = { end: false, kids: new Map() };
  for (const name of names) {
    let t = root;
    for (const ch of name) {
      const c = ch.codePointAt(0)!;
      let k = t.kids.get(c);
      if (!k) t.kids.set(c, (k = { end: false, kids: new Map() }));
      t = k;
    }
    t.end = true;
  }
  // A value is excluded-free iff it leaves the names' trie (a character no name continues with, then
  // anything) or stops at a trie node that ends no name. The "then anything" tail is shared by every
  // exit: one copy, not one per trie node (schemas exclude dozens of long property names).
  const anyRun = rep(ANY_ENCODED, 0, Infinity);
  const stop = (t: T): Node => {
    const parts: Node[] = [t.end ? NONE : EPS];
    for (const [c, k] of t.kids) parts.push(seq(encodedClass(single(c)), stop(k)));
    return alt(...parts);
  };
  const kidSet = (t: T): Ranges => union(...[...t.kids.keys()].map(single));
  if (names.every((n) => !Array.from(n).some((ch) => hasCp(ESC, ch.codePointAt(0)!)))) {
    // No name holds a character that needs an escape (the usual case): any value with one is
    // excluded-free, so the exits inside the trie are only unescaped characters (a small class
    // each, instead of every escape sequence once per trie node).
    const leave = (t: T): Node => alt(cls(subtract(subtract(ANY, ESC), kidSet(t))), ...[...t.kids].map(([c, k]) => seq(encodedClass(single(c)), leave(k))));
    const escaped = seq(rep(cls(subtract(ANY, ESC)), 0, Infinity), encodedClass(ESC), anyRun);
    return alt(seq(leave(root), anyRun), stop(root), escaped);
  }
  const leave = (t: T): Node => alt(encodedClass(subtract(ANY, kidSet(t))), ...[...t.kids].map(([c, k]) => seq(encodedClass(single(c)), leave(k))));
  return alt(seq(leave(root), anyRun), stop(root));
}

export const sepAst = (ws: Whitespace): Node => seq(wsRun(ws), lit(ws === 'compact' ? ', ' : ','), wsRun(ws));
export const colonAst = (ws: Whitespace): Node => seq(wsRun(ws), lit(ws === 'compact' ? ': ' : ':'), wsRun(ws));
/** An opening '{' or '[' with the whitespace that may follow it. */
export const openAst = (ws: Whitespace, c: '{' | '['): Node => seq(lit(c), wsRun(ws));
/** A closing '}' or ']' with the whitespace that may precede it. */
export const closeAst = (ws: Whitespace, c: '}' | ']'): Node => seq(wsRun(ws), lit(c));

/** A literal JSON value (enum / const member), honouring the whitespace mode. */
export function valueAst(v: unknown, ws: Whitespace): Node {
  if (Array.isArray(v)) {
    const items: Node[] = [];
    v.forEach((x, i) => items.push(...(i ? [sepAst(ws)] : []), valueAst(x, ws)));
    return seq(openAst(ws, '['), ...items, closeAst(ws, ']'));
  }
  if (v !== null && typeof v === 'object') {
    const items: Node[] = [];
    Object.entries(v).forEach(([k, x], i) => items.push(...(i ? [sepAst(ws)] : []), lit(JSON.stringify(k)), colonAst(ws), valueAst(x, ws)));
    return seq(openAst(ws, '{'), ...items, closeAst(ws, '}'));
  }
  return lit(JSON.stringify(v));
}
