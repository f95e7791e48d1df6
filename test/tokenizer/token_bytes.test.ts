/**
 * tokenBytes: the exact bytes each token contributes to decoded text.
 * Property: for random unicode strings, the concatenated token bytes equal
 * the UTF-8 bytes of decode(ids) — except the one leading space that
 * SentencePiece/WordPiece/Metaspace decoders drop at the very start of a
 * sequence, which reappears exactly when a BOS/CLS token comes first.
 */
import { describe, expect, test } from 'vitest';
import { loadTokenizer } from '../../core/tokenizer/tokenizer.ts';
import { concatTokenBytes, loadFixture, loadModel, modelFiles, randomText, rng, utf8Bytes } from './fixtures/models.ts';

const MODELS = [
  // name, strips the first token's leading space, id to put in front for the exact check
  ['stories', true, 1],
  ['mistral', true, 1],
  ['gemma3', false, 2],
  ['llama3', false, 128000],
  ['qwen3', false, 151644],
  ['wordpiece_tiny', true, null], // [CLS] itself gets the leading space mid-sequence
  ['unigram_tiny', true, null],
] as const;

function load(name: (typeof MODELS)[number][0]) {
  return name === 'wordpiece_tiny' || name === 'unigram_tiny' ? loadFixture(name) : loadModel(name);
}

/** bytes == utf8(text), allowing the single leading space a first-token-stripping decoder drops. */
function expectSameText(bytes: number[], text: string, stripsLeadingSpace: boolean): void {
  const decoded = utf8Bytes(text);
  if (stripsLeadingSpace && bytes.length === decoded.length + 1 && bytes[0] === 0x20) {
    expect(bytes.slice(1)).toEqual(decoded);
  } else {
    expect(bytes).toEqual(decoded);
  }
}

describe.each(MODELS)('%s', (name, stripsLeadingSpace, anchor) => {
  test('concat(tokenBytes) == utf8(decode) on random strings', () => {
    const tok = load(name);
    const r = rng(name.length * 7919);
    for (let i = 0; i < 200; i++) {
      const ids = tok.encode(randomText(r), { addSpecialTokens: false });
      if (ids.length === 0) continue;
      expectSameText(concatTokenBytes(tok, ids), tok.decode(ids), stripsLeadingSpace);
      if (anchor !== null) {
        // With a special token in front nothing is stripped: exact equality.
        const anchored = [anchor, ...ids];
        expect(concatTokenBytes(tok, anchored)).toEqual(utf8Bytes(tok.decode(anchored)));
      }
    }
  });

  test('every id has bytes; random id sequences concatenate like decode', () => {
    const tok = load(name);
    const r = rng(99);
    const sample = tok.vocabSize > 5000 ? Array.from({ length: 5000 }, () => Math.floor(r() * tok.vocabSize)) : [...Array(tok.vocabSize).keys()];
    for (const id of sample) {
      if (tok.idToToken(id) === undefined) continue;
      expect(tok.tokenBytes(id)).toBeInstanceOf(Uint8Array);
    }
    // Arbitrary ids may form invalid UTF-8 (U+FFFD); compare through a lossy decode.
    const lossy = new TextDecoder();
    for (let i = 0; i < 100; i++) {
      const ids = [...(anchor === null ? [] : [anchor]), ...Array.from({ length: 1 + Math.floor(r() * 20) }, () => Math.floor(r() * tok.vocabSize))].filter(
        (id) => tok.idToToken(id) !== undefined,
      );
      // WordPiece keeps '##' on a sequence-initial continuation piece; encode never starts with one.
      while (ids.length > 0 && tok.idToToken(ids[0]!)!.startsWith('##')) ids.shift();
      const bytes = concatTokenBytes(tok, ids);
      const text = tok.decode(ids);
      if (stripsLeadingSpace && anchor === null && bytes[0] === 0x20 && !text.startsWith(' ')) {
        expect(lossy.decode(Uint8Array.from(bytes.slice(1)))).toBe(text);
      } else {
        expect(lossy.decode(Uint8Array.from(bytes))).toBe(text);
      }
    }
  });
});

test.each([
  ['llama3', 'Ġworld', ' world'],
  ['llama3', 'Ċ', '\n'],
  ['llama3', '<|eot_id|>', '<|eot_id|>'],
  ['qwen3', 'ĠHello', ' Hello'],
  ['qwen3', '<|im_end|>', '<|im_end|>'],
  ['qwen3', '<think>', '<think>'],
  ['mistral', '▁Hello', ' Hello'],
  ['mistral', '<s>', '<s>'],
  ['stories', '▁Once', ' Once'],
  ['gemma3', '▁▁', '  '],
  ['gemma3', '\n', '\n'],
  ['gemma3', '<start_of_turn>', '<start_of_turn>'],
  ['wordpiece_tiny', 'hello', ' hello'],
  ['wordpiece_tiny', '##ing', 'ing'],
  ['wordpiece_tiny', '[CLS]', ' [CLS]'],
  ['unigram_tiny', '▁the', ' the'],
  ['unigram_tiny', 'at', 'at'],
] as const)('%s tokenBytes(%j) = %j', (name, token, text) => {
  const tok = load(name);
  const id = tok.tokenToId(token);
  expect(id).toBeDefined();
  expect(Array.from(tok.tokenBytes(id!))).toEqual(utf8Bytes(text));
});

test('single bytes: byte-fallback <0xNN> and byte-level characters', () => {
  const stories = loadModel('stories');
  expect(Array.from(stories.tokenBytes(stories.tokenToId('<0xF0>')!))).toEqual([0xf0]);
  expect(Array.from(stories.tokenBytes(stories.tokenToId('<0x0A>')!))).toEqual([0x0a]);
  const llama = loadModel('llama3');
  // 😀 = F0 9F 98 80 = 'ð','Ł','ĺ','Ģ' in GPT-2's byte alphabet.
  expect(['ð', 'Ł', 'ĺ', 'Ģ'].map((t) => Array.from(llama.tokenBytes(llama.tokenToId(t)!)))).toEqual([[0xf0], [0x9f], [0x98], [0x80]]);
  expect(Array.from(llama.tokenBytes(llama.tokenToId('Ġ')!))).toEqual([0x20]);
});

test('no tokenizer_config: BOS read off the post-processor template', () => {
  const tok = loadTokenizer(modelFiles('stories').json);
  expect(tok.bosId).toBe(1);
  expect(tok.encode('Once upon a time')).toEqual([1, 403, 407, 261, 378]);
});
