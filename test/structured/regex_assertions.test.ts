/**
 * `^` and `$` anywhere in a pattern (no `m` flag: the input's ends only), as
 * real schemas write them: inside groups (`(^http|^https)/…`), around a whole
 * alternation, repeated, or where they can never hold (`a^b`); and word
 * boundaries `\b` / `\B` (`\b(?:high|low)\b`, a URL's `…{1,6}\b(…)*`). For every
 * string of up to 4–5 characters over a small alphabet, the automaton must
 * agree with JavaScript's RegExp, both as a search (JSON Schema `pattern`) and
 * as a whole-string match (`regex_string`, formats).
 */
import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../core/errors.ts';
import { alt, cls, EPS, type Node, rep, seq } from '../../core/structured/ast.ts';
import { ANY } from '../../core/structured/charset.ts';
import { applyLookaheads, parseRegex, regexFullMatch } from '../../core/structured/regex.ts';
import { allStrings, nodeMatcher } from './support.ts';

const CASES: Array<{ p: string; alphabet: string; len?: number }> = [
  { p: '(^a|^ab|^b)/(c+$|c/.$)', alphabet: 'abc/', len: 5 },
  { p: '(^(a|b)c$)', alphabet: 'abc' },
  { p: '(^a{2}$|^x|b$)', alphabet: 'abx' },
  { p: '^(?:^[a-b][a-c]*:)?[^\\s]*$', alphabet: 'ab: c' },
  { p: '^(?:^^a(?:b)*\\s*^c)+$', alphabet: 'abc ' },
  { p: 'a^b|c', alphabet: 'abc' },
  { p: 'a$b|^c$', alphabet: 'abc' },
  { p: '(^|x)ab', alphabet: 'abx' },
  { p: 'ab($|x)', alphabet: 'abx' },
  { p: '(?:^a|b)+', alphabet: 'ab' },
  { p: '(?:a$|b)+', alphabet: 'ab' },
  { p: '(?:^a|b$|c)*d', alphabet: 'abcd' },
  { p: '(?:^a$|b)*', alphabet: 'ab' },
  { p: '(?:^a|b$|c){2,3}', alphabet: 'abc', len: 5 },
  { p: '(?:(^)|a){2}b', alphabet: 'ab' },
  { p: '(?:$|a)(?:^|b)', alphabet: 'ab' },
  { p: '^$', alphabet: 'a' },
  { p: '($)^', alphabet: 'a' },
  { p: '^(?!ab)(^a|b)+$', alphabet: 'ab' },
  { p: '\\b(?:ab|b)\\b', alphabet: 'ab -' },
  { p: 'a\\b', alphabet: 'ab-' },
  { p: '\\ba', alphabet: 'ab-' },
  { p: 'a\\Bb', alphabet: 'ab-' },
  { p: '\\B', alphabet: 'a-' },
  { p: '\\b', alphabet: 'a-' },
  { p: '\\B-', alphabet: 'a-' },
  { p: '^\\b|\\b$', alphabet: 'a-' },
  { p: '(?:^)\\ba', alphabet: 'a-' },
  { p: 'a\\b$', alphabet: 'a-' },
  { p: '(?:a|-)\\b(?:-|b)', alphabet: 'ab-' },
  { p: '(?:\\ba){2}', alphabet: 'a-' },
  { p: '(?:a\\b|-){1,3}', alphabet: 'a-', len: 5 },
  { p: '(?:\\b|x)(?:\\B|-)a', alphabet: 'ax-' },
  { p: '[a.]{1,3}\\.[a-b]{1,2}\\b([a/.]*)', alphabet: 'ab./', len: 5 },
  { p: '^(?!\\ba)\\w+', alphabet: 'ab-' },
  { p: '[\\b]a', alphabet: 'a\b' },
  { p: 'a-?\\b', alphabet: 'a-' },
  { p: '\\b-?a', alphabet: 'a-' },
];

const anyRun: Node = rep(cls(ANY), 0, Infinity);

/** The pattern as a search, the way a JSON string's content is constrained (without the JSON encoding). */
function searchNode(p: string): Node {
  const where = { path: '', keyword: 'pattern' };
  return alt(...parseRegex(p, where).map((b) => applyLookaheads(seq(b.start ? EPS : anyRun, b.node, b.end ? EPS : anyRun), b, (n) => n, anyRun)));
}

describe('regex assertions (anchors anywhere, word boundaries)', () => {
  it.each(CASES.map((c) => [c.p, c.alphabet, c.len ?? 4] as const))('%s', (p, alphabet, len) => {
    const search = nodeMatcher(searchNode(p));
    const full = nodeMatcher(regexFullMatch(p, { path: '', keyword: 'regex_string' }));
    const refSearch = new RegExp(p);
    const refFull = new RegExp(`^(?:${p})$`);
    for (const s of allStrings([...alphabet], len)) {
      expect(search(s), `search ${JSON.stringify(s)}`).toBe(refSearch.test(s));
      expect(full(s), `full ${JSON.stringify(s)}`).toBe(refFull.test(s));
    }
  });

  it('a pattern whose anchors can never hold matches nothing (no branch), and is not an error', () => {
    expect(parseRegex('a^b', { path: '', keyword: 'pattern' })).toEqual([]);
    expect(parseRegex('x$y|^z$', { path: '', keyword: 'pattern' })).toHaveLength(1);
  });

  it.each([
    ['^*a', 'nothing to repeat'],
    ['a$+', 'nothing to repeat'],
    ['(?:^a){40}', 'repeats more than'],
    ['(?:\\ba)+', 'inside an unbounded repeat'],
    ['^(?=a\\b)a', 'end of a lookahead'],
  ])('refuses %s', (p, reason) => {
    const compile = (): unknown => parseRegex(p, { path: '', keyword: 'pattern' });
    expect(compile).toThrow(InvalidRequestError);
    expect(compile).toThrow(reason);
  });
});
