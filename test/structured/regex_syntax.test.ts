/**
 * The regex syntax beyond `u` mode that real schemas use: ECMA-262 Annex B
 * forms (identity escapes of punctuation, lone `]` / `}`, a `{` that is not a
 * quantifier, `-` next to a class escape) and leading lookaheads on anchored
 * alternatives. The automaton of a whole-string match must accept exactly the
 * strings `new RegExp('^(?:' + p + ')$')` (no `u` flag: the syntax these
 * patterns are written for) accepts, over every string of up to 4–6 characters
 * from a small alphabet. Also: what stays refused, with `invalid_regex`.
 */
import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../core/errors.ts';
import { regexFullMatch } from '../../core/structured/regex.ts';
import { allStrings, nodeMatcher } from './support.ts';

const CASES: Array<{ p: string; alphabet: string; len?: number }> = [
  { p: String.raw`\-\@\'\#[a\-]`, alphabet: "-@'#a", len: 5 },
  { p: String.raw`a]}`, alphabet: 'a]}' },
  { p: 'x{{a}}', alphabet: 'x{}a', len: 6 },
  { p: String.raw`a{,2}`, alphabet: 'a{},2', len: 5 },
  { p: String.raw`[\w-.]+`, alphabet: 'a-._ ' },
  { p: String.raw`[.-\d]+`, alphabet: '.-1a' },
  { p: String.raw`^(?!-)[-a-z]{1,3}$`, alphabet: '-ab' },
  { p: String.raw`^(?!ab$|ba$)[ab]+$`, alphabet: 'ab' },
  { p: String.raw`^(?!ab)[ab]+`, alphabet: 'ab' },
  { p: String.raw`^(?=.*b)(?!.*bb)[ab]{2,4}$`, alphabet: 'ab' },
  { p: String.raw`(?!a)^.+`, alphabet: 'ab' },
  { p: String.raw`^(?!a)b|^a`, alphabet: 'ab' },
  { p: String.raw`(?=[ab]{2})\w+`, alphabet: 'abc' },
];

const matcher = (p: string): ((s: string) => boolean) => nodeMatcher(regexFullMatch(p, { path: '', keyword: 'regex_string' }));

describe('regex syntax: Annex B forms and leading lookaheads', () => {
  it.each(CASES.map((c) => [c.p, c.alphabet, c.len ?? 4] as const))('%s', (p, alphabet, len) => {
    const ours = matcher(p);
    const ref = new RegExp(`^(?:${p})$`);
    let accepted = 0;
    for (const s of allStrings([...alphabet], len)) {
      expect(ours(s), JSON.stringify(s)).toBe(ref.test(s));
      if (ref.test(s)) accepted++;
    }
    expect(accepted).toBeGreaterThan(0);
  });

  it.each([
    [String.raw`a(?!b)c`, 'only supported at the start'],
    [String.raw`(?<=a)b`, 'lookbehind'],
    [String.raw`(?:\bw)*`, 'inside an unbounded repeat'],
    [String.raw`\q`, 'invalid escape'],
    [String.raw`a{2}{3}`, 'nothing to repeat'],
    [String.raw`(a)\1`, 'backreferences'],
    [String.raw`^(?!(?!a)b)c`, 'nested lookahead'],
  ])('refuses %s', (p, reason) => {
    const compile = (): unknown => regexFullMatch(p, { path: '', keyword: 'regex_string' });
    expect(compile).toThrow(InvalidRequestError);
    expect(compile).toThrow(reason);
  });
});
