/**
 * Free text in a pattern (plain text taken alike but a few ASCII letters:
 * `.*z` under a length, `.*qx.*`): the text class of plain text without those
 * bytes, over the 128,256-token Llama 3 vocabulary, against a direct reading
 * of every token (which tokens are class text and of how many characters; for
 * the others, where their class start ends and what follows it, in the tail
 * trie); and masks of such patterns against the automaton itself, sampled
 * among the tokens the class settles differently (those with an odd letter,
 * those that are not plain text). Skipped if the tokenizer package is absent.
 */
import { describe, expect, it } from 'vitest';
import { llama3Vocab } from '../../bench/byte_level_vocab.ts';
import { compileConstraint } from '../../core/structured/index.ts';
import { type FlatTrie, TokenTrie } from '../../core/structured/trie.ts';
import { hasToken as has, liveAfter as live, rng } from './support.ts';

const vocab = llama3Vocab();

/** Every token of a flat trie with its group and key bytes (the path to its node). */
function trieTokens(t: FlatTrie): Map<number, { group: number; key: number[] }> {
  const out = new Map<number, { group: number; key: number[] }>();
  const path: number[] = [];
  for (let g = 0; g + 1 < t.groupStart.length; g++) {
    for (let i = t.groupStart[g]!; i < t.groupStart[g + 1]!; i++) {
      path.length = t.depth[i]! - 1;
      path.push(t.byte[i]!);
      for (let k = t.tokStart[i]!, e = k + t.tokCount[i]!; k < e; k++) out.set(t.tokens[k]!, { group: g, key: [...path] });
    }
  }
  return out;
}

/** The plain characters a token starts with, none of them an odd letter: how many, and where they end (bytes). */
function plainPrefix(b: Uint8Array, oddSet: Set<number>): { chars: number; end: number } {
  // Fatal: an ill-formed sequence (overlong, surrogate, out of range) is not a character.
  const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  let o = 0;
  let chars = 0;
  while (o < b.length) {
    const x = b[o]!;
    const len = x < 0x80 ? 1 : x >= 0xc2 && x <= 0xdf ? 2 : x >= 0xe0 && x <= 0xef ? 3 : x >= 0xf0 && x <= 0xf4 ? 4 : 0;
    if (len === 0 || o + len > b.length) break;
    let ch: string;
    try {
      ch = text.decode(b.subarray(o, o + len));
    } catch {
      break;
    }
    const cp = ch.codePointAt(0)!;
    // Not a control (C0, DEL, C1), quote or backslash, not an odd letter.
    if ([...ch].length !== 1 || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp === 0x22 || cp === 0x5c || oddSet.has(x)) break;
    o += len;
    chars++;
  }
  return { chars, end: o };
}

describe.runIf(vocab)('plain text but a few letters, Llama 3 vocabulary', () => {
  const trie = vocab ? TokenTrie.for(vocab) : null;

  it.each([['z'], ['qx'], ['jkv']])('class of plain text without %s: class tokens by length, the others in the tail trie from their class start', (letters) => {
    const oddSet = new Set([...letters].map((ch) => ch.charCodeAt(0)));
    const odd = new Uint8Array(128);
    for (const b of oddSet) odd[b] = 1;
    const cls = trie!.plainExceptClass(odd);
    expect(cls.tail).toBeDefined();
    const tails = trieTokens(cls.tail!.trie);
    let inClass = 0;
    for (const id of trie!.tokens) {
      const b = trie!.bytesOf[id]!;
      const { chars, end } = plainPrefix(b, oddSet);
      if (end === b.length) {
        inClass++;
        expect(has(cls.upTo(chars), id), `token ${id} in its length's bitset`).toBe(true);
        if (chars > 0) expect(has(cls.upTo(chars - 1), id), `token ${id} not in the shorter bitset`).toBe(false);
        expect(tails.has(id)).toBe(false);
      } else {
        expect(has(cls.upTo(cls.maxLen), id), `token ${id} is not class text`).toBe(false);
        expect(cls.tail!.from[id], `token ${id}'s tail offset`).toBe(end);
        expect(tails.get(id), `token ${id}'s tail`).toEqual({ group: chars, key: [...b.subarray(end)] });
      }
    }
    expect(inClass + tails.size).toBe(trie!.tokens.length);
    expect(tails.size).toBeGreaterThan(trie!.tail.groupStart.length); // the odd letters add tokens to the plain tail
  });

  it('a common letter gets no tail trie (too many tokens hold it): its masks take the trie walk', () => {
    const odd = new Uint8Array(128);
    odd['e'.charCodeAt(0)] = 1;
    expect(trie!.plainExceptClass(odd).tail).toBeUndefined();
  });

  it.each([
    ['a counted string ending in z', { type: 'string', pattern: 'z$', maxLength: 7 }, 'z'],
    ['a counted string holding qx', { type: 'string', pattern: 'qx', maxLength: 9 }, 'qx'],
    // A common letter: too many tokens for a tail trie, so the vocabulary trie is walked with the class's skips.
    ['a counted string ending in e', { type: 'string', pattern: 'e$', maxLength: 6 }, 'e'],
    ['allOf of a prefix, a suffix and lengths', { allOf: [{ type: 'string', pattern: '^a' }, { minLength: 3, maxLength: 6 }, { pattern: 'z$' }] }, 'z'],
  ])('%s: masks agree with the automaton on tokens with the letters and tokens that are not plain', (_name, schema, letters) => {
    const c = compileConstraint({ kind: 'json_schema', schema }, vocab!, { uncached: true });
    const ids = Array.from(trie!.tokens);
    const withOdd = ids.filter((t) => [...letters].some((ch) => trie!.bytesOf[t]!.includes(ch.charCodeAt(0))));
    const notPlain = ids.filter((t) => trie!.plainChars[t]! < 0);
    const rand = rng(11);
    const pick = (xs: number[], n: number): number[] => Array.from({ length: n }, () => xs[Math.floor(rand() * xs.length)]!);
    let allowedSeen = 0;
    for (let run = 0; run < 3; run++) {
      const st = c.start();
      const path: number[] = [];
      for (let step = 0; step < 6; step++) {
        const m = st.mask();
        const allowed = ids.filter((t) => has(m, t));
        if (allowed.length === 0) break;
        allowedSeen += allowed.length;
        for (const t of [...pick(withOdd, 150), ...pick(notPlain, 100), ...pick(ids, 50), ...pick(allowed, 30)]) {
          expect(has(m, t), `step ${step} token ${t} ${JSON.stringify(new TextDecoder().decode(trie!.bytesOf[t]))}`).toBe(live(c, path, t));
        }
        const t = allowed[Math.floor(rand() * allowed.length)]!;
        if (st.isComplete()) break;
        st.advance(t);
        path.push(t);
      }
    }
    expect(allowedSeen).toBeGreaterThan(0);
  });
});
