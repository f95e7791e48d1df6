/**
 * IncrementalDecoder: streaming output must equal one-shot decode, never
 * emit a partial character or a U+FFFD that later tokens complete, keep
 * SentencePiece leading spaces right with prompt context, and cost O(1)
 * decoded ids per pushed token.
 */
import { describe, expect, test } from 'vitest';
import { IncrementalDecoder } from '../../core/tokenizer/incremental.ts';
import type { Tokenizer } from '../../core/tokenizer/tokenizer.ts';
import { loadFixture, loadModel, type ModelName, randomText, rng } from './fixtures/models.ts';

function stream(tok: Tokenizer, ids: readonly number[], opts: { skipSpecialTokens?: boolean; prefixIds?: number[] } = {}) {
  const dec = new IncrementalDecoder(tok, opts);
  const parts = ids.map((id) => dec.push(id));
  parts.push(dec.flush());
  return parts;
}

/** A part may not end in the middle of a surrogate pair, nor carry a U+FFFD the full text lacks. */
function expectCleanParts(parts: string[], full: string): void {
  for (const p of parts) {
    if (p.length === 0) continue;
    const last = p.charCodeAt(p.length - 1);
    expect(last >= 0xd800 && last <= 0xdbff).toBe(false);
  }
  const ffffd = (s: string) => s.split('\uFFFD').length - 1;
  expect(ffffd(parts.join(''))).toBe(ffffd(full));
}

const MODELS: (ModelName | 'wordpiece_tiny' | 'unigram_tiny')[] = ['stories', 'mistral', 'llama3', 'qwen3', 'gemma3', 'wordpiece_tiny', 'unigram_tiny'];
const load = (n: (typeof MODELS)[number]) => (n === 'wordpiece_tiny' || n === 'unigram_tiny' ? loadFixture(n) : loadModel(n));

describe.each(MODELS)('%s', (name) => {
  test('streaming == one-shot decode on encoded random text', () => {
    const tok = load(name);
    const r = rng(name.length * 31 + 1);
    for (let i = 0; i < 120; i++) {
      const ids = tok.encode(randomText(r, 20), { addSpecialTokens: r() < 0.5 });
      for (const skip of [false, true]) {
        const parts = stream(tok, ids, { skipSpecialTokens: skip });
        const full = tok.decode(ids, { skipSpecialTokens: skip });
        expect(parts.join('')).toBe(full);
        expectCleanParts(parts, full);
      }
    }
  });

  test('streaming == one-shot decode on random id sequences (bytes, specials, anything)', () => {
    const tok = load(name);
    const r = rng(name.length * 17 + 5);
    const valid = (id: number) => tok.idToToken(id) !== undefined;
    for (let i = 0; i < 120; i++) {
      const n = 1 + Math.floor(r() * 40);
      // Bias towards low ids: that is where byte tokens and specials live.
      const ids = Array.from({ length: n }, () => Math.floor((r() < 0.5 ? r() * 300 : r() * tok.vocabSize))).filter(valid);
      for (const skip of [false, true]) {
        expect(stream(tok, ids, { skipSpecialTokens: skip }).join('')).toBe(tok.decode(ids, { skipSpecialTokens: skip }));
      }
    }
  });

  test('prompt context: continuation text == decode(prompt + gen) - decode(prompt)', () => {
    const tok = load(name);
    const r = rng(name.length * 7 + 3);
    for (let i = 0; i < 60; i++) {
      const prompt = tok.encode(randomText(r), { addSpecialTokens: true });
      const gen = tok.encode(randomText(r), { addSpecialTokens: false });
      const whole = tok.decode([...prompt, ...gen]);
      const head = tok.decode(prompt);
      if (!whole.startsWith(head) || head.endsWith('\uFFFD')) continue;
      expect(stream(tok, gen, { prefixIds: prompt }).join('')).toBe(whole.slice(head.length));
    }
  });
});

describe('split characters', () => {
  test('stories: emoji and CJK over byte-fallback tokens are held until complete', () => {
    const tok = loadModel('stories');
    const ids = tok.encode('a 😀 日本', { addSpecialTokens: false });
    const parts = stream(tok, ids);
    expect(parts.join('')).toBe('a 😀 日本');
    // Each emitted piece is whole characters: the emoji arrives in one part.
    expect(parts).toContain('😀');
    expect(parts.filter((p) => p.length > 0).every((p) => !p.includes('\uFFFD'))).toBe(true);
  });

  test('llama3: 😀 as four single-byte tokens', () => {
    const tok = loadModel('llama3');
    const ids = ['Ġ', 'ð', 'Ł', 'ĺ', 'Ģ', 'Ġok'].map((t) => tok.tokenToId(t)!);
    expect(stream(tok, ids)).toEqual([' ', '', '', '', '😀', ' ok', '']);
  });

  test('invalid bytes are released as U+FFFD exactly when decode would produce them', () => {
    const tok = loadModel('stories');
    const b = (x: number) => tok.tokenToId(`<0x${x.toString(16).toUpperCase().padStart(2, '0')}>`)!;
    const a = tok.tokenToId('▁a')!;
    expect(stream(tok, [b(0xff), a])).toEqual(['\uFFFD', ' a', '']);
    expect(stream(tok, [b(0xe4), a])).toEqual(['', '\uFFFD a', '']);
    expect(stream(tok, [b(0xe4), b(0xb8), b(0xad), a])).toEqual(['', '', '中', ' a', '']);
    expect(stream(tok, [b(0xf0), b(0x9f)])).toEqual(['', '', '\uFFFD']); // unfinished at the end: flush
    expect(stream(tok, [b(0xe0), b(0x80)])).toEqual(['', '\uFFFD\uFFFD', '']); // E0 80 can never complete
  });
});

describe('SentencePiece leading space', () => {
  test('first token of a stream loses its space, later ones keep it', () => {
    const tok = loadModel('stories');
    expect(stream(tok, [403, 407, 261, 378])).toEqual(['Once', ' upon', ' a', ' time', '']);
    expect(stream(tok, [403, 407, 261, 378], { prefixIds: [1] })).toEqual([' Once', ' upon', ' a', ' time', '']);
  });

  test('prefixIds supply context', () => {
    const tok = loadModel('stories');
    expect(stream(tok, [261, 378], { prefixIds: [1, 403, 407] })).toEqual([' a', ' time', '']);
    expect(stream(tok, [261, 378])).toEqual(['a', ' time', '']);
  });

  test('skipped specials do not break spacing', () => {
    const tok = loadModel('mistral');
    const hello = tok.tokenToId('▁Hello')!;
    const world = tok.tokenToId('▁world')!;
    expect(stream(tok, [hello, 2, world], { skipSpecialTokens: true })).toEqual(['Hello', '', ' world', '']);
    expect(stream(tok, [hello, 2, world])).toEqual(['Hello', '</s>', ' world', '']);
  });
});

test('O(1) amortized: decoded ids per push stay bounded over long streams', () => {
  const tok = loadModel('qwen3');
  let decodedIds = 0;
  const counting: Tokenizer = Object.create(tok, {
    decode: {
      value: (ids: readonly number[], o?: { skipSpecialTokens?: boolean }) => {
        decodedIds += ids.length;
        return tok.decode(ids, o);
      },
    },
  });
  const r = rng(42);
  let text = '';
  while (text.length < 20000) text += randomText(r);
  const ids = tok.encode(text, { addSpecialTokens: false });
  const dec = new IncrementalDecoder(counting, { prefixIds: ids.slice(0, 100) });
  let out = '';
  for (const id of ids) out += dec.push(id);
  out += dec.flush();
  expect(out).toBe(tok.decode(ids));
  expect(ids.length).toBeGreaterThan(4000);
  expect(decodedIds / ids.length).toBeLessThan(12);
});

test('bad ids throw at push time', () => {
  const dec = new IncrementalDecoder(loadModel('stories'));
  expect(() => dec.push(100000)).toThrow(/not in the vocabulary/);
});
