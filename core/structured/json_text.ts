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
import { type Node, alt, and, chars, cls, EPS, lit, NONE, rep, seq } from './ast.ts';
import { ANY, type Ranges, intersect, members, ranges, single, subtract, union } from './charset.ts';
import { parseRegex, regexFullMatch, type RegexBranch } from './regex.ts';

/**
 * Insignificant whitespace the output must use — exactly, not at most:
 * 'none' = `{"a":1,"b":[1,2]}`, 'compact' = `{"a": 1, "b": [1, 2]}` (one space
 * after every ':' and ',', none elsewhere; Python json.dumps' default
 * separators). No indented mode: its indent depends on nesting depth, which a
 * rule shared across depths (recursive $ref, any-value) cannot know.
 */
export type Whitespace = 'none' | 'compact';
export const WHITESPACES: readonly Whitespace[] = ['none', 'compact'];

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

/** Canonical JSON-string encoding of one character from `set`. */
export function encodedClass(set: Ranges): Node {
  const esc = intersect(set, ESC);
  return alt(cls(subtract(set, ESC)), ...members(esc).map((c) => lit(escapeOf(c))));
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
  return alt(...branches.map((b) => seq(b.start ? EPS : anyRun, encodeChars(b.node), b.end ? EPS : anyRun)));
}

// The supported `format`s, as regexes over ASCII (a subset of what ajv-formats accepts).
const DATE = String.raw`\d{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)`;
const TIME = String.raw`(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)`;
const LABEL = String.raw`[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,20}[a-zA-Z0-9])?`;
const OCTET = String.raw`(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)`;
export const FORMATS: Readonly<Record<string, string>> = {
  date: DATE,
  time: TIME,
  'date-time': `${DATE}T${TIME}`,
  uuid: String.raw`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`,
  email: String.raw`[a-zA-Z0-9_+-]{1,20}(?:\.[a-zA-Z0-9_+-]{1,20}){0,2}@(?:${LABEL}\.){1,3}[a-zA-Z]{2,6}`,
  ipv4: String.raw`(?:${OCTET}\.){3}${OCTET}`,
  hostname: String.raw`${LABEL}(?:\.${LABEL}){0,4}`,
  uri: String.raw`https?://${LABEL}(?:\.${LABEL}){0,4}(?::[1-9]\d{1,4})?(?:/[a-zA-Z0-9._~-]*)*(?:\?[a-zA-Z0-9._~=&-]*)?`,
};

export interface StringSpec {
  minLength: number;
  maxLength: number;
  patterns: ReadonlyArray<{ src: string; path: string }>;
  formats: ReadonlyArray<{ name: string; path: string }>;
}

/** A whole JSON string (with quotes) satisfying every constraint in `spec`. */
export function stringAst(spec: StringSpec): Node {
  const parts: Node[] = [];
  for (const p of spec.patterns) parts.push(patternContent(parseRegex(p.src, { path: p.path, keyword: 'pattern' })));
  for (const f of spec.formats) parts.push(regexFullMatch(FORMATS[f.name]!, { path: f.path, keyword: 'format' }));
  if (spec.minLength > 0 || spec.maxLength !== Infinity || parts.length === 0) {
    parts.push(rep(JSON_CHAR, spec.minLength, spec.maxLength));
  }
  return seq(lit('"'), and(...parts), lit('"'));
}

/** A JSON string key whose decoded value is none of `names` (canonical encoding only). */
export function keyExcluding(names: readonly string[]): Node {
  if (names.length === 0) return seq(lit('"'), rep(JSON_CHAR, 0, Infinity), lit('"'));
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
  const anyRun = rep(ANY_ENCODED, 0, Infinity);
  const walk = (t: T): Node => {
    const kidSet = union(...[...t.kids.keys()].map(single));
    const parts: Node[] = [t.end ? NONE : EPS, seq(encodedClass(subtract(ANY, kidSet)), anyRun)];
    for (const [c, k] of t.kids) parts.push(seq(encodedClass(single(c)), walk(k)));
    return alt(...parts);
  };
  return seq(lit('"'), walk(root), lit('"'));
}

export const sepAst = (ws: Whitespace): Node => lit(ws === 'none' ? ',' : ', ');
export const colonAst = (ws: Whitespace): Node => lit(ws === 'none' ? ':' : ': ');

/** A literal JSON value (enum / const member), honouring the whitespace mode. */
export function valueAst(v: unknown, ws: Whitespace): Node {
  if (Array.isArray(v)) {
    const items: Node[] = [];
    v.forEach((x, i) => items.push(...(i ? [sepAst(ws)] : []), valueAst(x, ws)));
    return seq(lit('['), ...items, lit(']'));
  }
  if (v !== null && typeof v === 'object') {
    const items: Node[] = [];
    Object.entries(v).forEach(([k, x], i) => items.push(...(i ? [sepAst(ws)] : []), lit(JSON.stringify(k)), colonAst(ws), valueAst(x, ws)));
    return seq(lit('{'), ...items, lit('}'));
  }
  return lit(JSON.stringify(v));
}
