/**
 * Keys (and `not: {enum}` strings) that must differ from a set of names: the
 * automaton of keyExcluding(names) accepts exactly the canonically encoded
 * JSON strings whose decoded value is not a name. Checked by enumerating every
 * string of up to 3 characters over an alphabet with plain ASCII, a character
 * that needs an escape, a quote and a multi-byte one, for name sets with and
 * without such characters (the two constructions in json_text.ts).
 */
import { describe, expect, it } from 'vitest';
import { Dfa } from '../../core/structured/dfa.ts';
import { keyExcluding } from '../../core/structured/json_text.ts';
import { buildNfa, trim } from '../../core/structured/nfa.ts';
import { allStrings } from './support.ts';

const ALPHABET = ['a', 'b', '"', '\n', 'é'];

function accepts(d: Dfa, text: string): boolean {
  let s = d.start;
  for (const b of new TextEncoder().encode(text)) {
    s = d.stepAll(s)[b]!;
    if (s < 0) return false;
  }
  return d.accepting(s);
}

const NAME_SETS: string[][] = [
  ['a'],
  ['ab', 'abb', 'b'],
  ['', 'é'],
  ['a"b', 'a\n'], // names with characters that need escapes
  ['includePlatforms', 'excludePlatforms', 'name', 'a'],
];

describe('keyExcluding: every key but the names', () => {
  it.each(NAME_SETS.map((n) => [JSON.stringify(n), n] as const))('%s', (_, names) => {
    const nfa = buildNfa(keyExcluding(names), null);
    trim(nfa, () => false);
    const d = new Dfa(nfa);
    for (const s of allStrings(ALPHABET, 3)) expect(accepts(d, JSON.stringify(s)), JSON.stringify(s)).toBe(!names.includes(s));
    // Names longer than the enumeration are refused too, and their extensions allowed.
    for (const n of names) {
      expect(accepts(d, JSON.stringify(n))).toBe(false);
      expect(accepts(d, JSON.stringify(`${n}a`))).toBe(!names.includes(`${n}a`));
    }
  });

  it('stays small for many long names (one shared tail, not one per trie node)', () => {
    const names = Array.from({ length: 40 }, (_, i) => `propertyNumber${i}WithALongName`);
    expect(buildNfa(keyExcluding(names), null).size).toBeLessThan(40 * 30 * 30);
  });
});
