/**
 * GGUF-metadata tokenizers against the tokenizer.json originals. GGUF-style
 * metadata is built from each tokenizer.json the way llama.cpp's converter
 * would store it (tokens by id, scores, token types, merges, special ids),
 * then the synthesized tokenizer must encode/decode identically. For
 * SentencePiece ('llama') the score-derived merges must reproduce the
 * tokenizer.json merge list exactly.
 */
import { describe, expect, test } from 'vitest';
import { ModelFormatError, UnsupportedModelError } from '../../core/errors.ts';
import { GGUF_TOKEN_TYPE, ggufToTokenizerJson, tokenizerFromGguf } from '../../core/tokenizer/gguf_tokenizer.ts';
import type { Tokenizer } from '../../core/tokenizer/tokenizer.ts';
import { loadModel, type ModelName, modelFiles, randomText, rng } from './fixtures/models.ts';

type Json = Record<string, unknown>;
const T = GGUF_TOKEN_TYPE;

/** tokens/types by id from a tokenizer.json (model vocab + added tokens). */
function vocabById(json: Json): { tokens: string[]; types: number[] } {
  const model = json.model as { vocab: Record<string, number> };
  const added = json.added_tokens as { id: number; content: string; special: boolean }[];
  let n = 0;
  for (const id of Object.values(model.vocab)) n = Math.max(n, id + 1);
  for (const a of added) n = Math.max(n, a.id + 1);
  const tokens = new Array<string>(n).fill('');
  const types = new Array<number>(n).fill(T.NORMAL);
  for (const [t, id] of Object.entries(model.vocab)) {
    tokens[id] = t;
    if (/^<0x[0-9A-F]{2}>$/.test(t)) types[id] = T.BYTE;
  }
  for (const a of added) {
    tokens[a.id] = a.content;
    types[a.id] = a.special ? T.CONTROL : T.USER_DEFINED;
  }
  return { tokens, types };
}

function mergeList(json: Json): [string, string][] {
  const merges = (json.model as { merges: (string | [string, string])[] }).merges;
  return merges.map((m) => (typeof m === 'string' ? (m.split(' ', 2) as [string, string]) : m));
}

/** SentencePiece metadata; `score(id, token)` stands in for the .model file's piece scores. */
function spmMeta(name: ModelName, score: (id: number, token: string) => number): Json {
  const { json, config } = modelFiles(name);
  const { tokens, types } = vocabById(json);
  const unk = tokens.indexOf('<unk>');
  types[unk] = T.UNKNOWN;
  return {
    'tokenizer.ggml.model': 'llama',
    'tokenizer.ggml.tokens': tokens,
    'tokenizer.ggml.scores': Float32Array.from(tokens, (t, id) => score(id, t)),
    'tokenizer.ggml.token_type': Int32Array.from(types),
    'tokenizer.ggml.bos_token_id': BigInt(tokens.indexOf(config.bos_token as string)), // GGUF uint32 may arrive as bigint
    'tokenizer.ggml.eos_token_id': tokens.indexOf(config.eos_token as string),
    'tokenizer.ggml.unknown_token_id': unk,
    'tokenizer.ggml.add_bos_token': true,
    'tokenizer.ggml.add_eos_token': false,
  };
}

function bpeMeta(name: ModelName, pre: string, addBos: boolean): Json {
  const { json, config } = modelFiles(name);
  const { tokens, types } = vocabById(json);
  const meta: Json = {
    'tokenizer.ggml.model': 'gpt2',
    'tokenizer.ggml.pre': pre,
    'tokenizer.ggml.tokens': tokens,
    'tokenizer.ggml.token_type': types,
    'tokenizer.ggml.merges': mergeList(json).map(([a, b]) => `${a} ${b}`),
    'tokenizer.ggml.eos_token_id': tokens.indexOf(config.eos_token as string),
    'tokenizer.ggml.add_bos_token': addBos,
    'tokenizer.chat_template': config.chat_template,
  };
  if (typeof config.bos_token === 'string') meta['tokenizer.ggml.bos_token_id'] = tokens.indexOf(config.bos_token);
  if (typeof config.pad_token === 'string') meta['tokenizer.ggml.padding_token_id'] = tokens.indexOf(config.pad_token);
  return meta;
}

/**
 * Piece scores for a SentencePiece vocab whose .model file we don't have:
 * minus the rank of the first tokenizer.json merge that builds the piece
 * (single characters, bytes and specials: 0). Scores like llama2.c's.
 */
function rankScores(name: ModelName): (id: number, token: string) => number {
  const rank = new Map<string, number>();
  mergeList(modelFiles(name).json).forEach(([a, b], i) => {
    if (!rank.has(a + b)) rank.set(a + b, i);
  });
  return (_id, t) => -(rank.get(t) ?? 0);
}

const TABLE = [
  'Once upon a time', 'Hello world', ' Hello  world\n', 'héllo 😀 日本語', 'Lily saw a big, red ball.', '   ', '\n\n\t',
  "It's 12:30 — don't you think?", '<s>inline</s>', '',
];

function expectSameTokenizer(name: ModelName, meta: Json, opts: { specialsDiffer?: boolean } = {}): Tokenizer {
  const ref = loadModel(name);
  const gguf = tokenizerFromGguf(meta);
  expect(gguf.vocabSize).toBe(ref.vocabSize);
  expect(gguf.eosIds[0]).toBe(ref.eosIds[0]);
  const r = rng(name.length);
  const texts = [...TABLE, ...Array.from({ length: 150 }, () => randomText(r))];
  for (const text of texts) {
    const ids = ref.encode(text, { addSpecialTokens: false });
    expect(gguf.encode(text, { addSpecialTokens: false })).toEqual(ids);
    if (!opts.specialsDiffer) expect(gguf.encode(text)).toEqual(ref.encode(text));
    expect(gguf.decode(ids)).toBe(ref.decode(ids));
    for (const id of ids) expect(gguf.tokenBytes(id)).toEqual(ref.tokenBytes(id));
  }
  return gguf;
}

describe("'llama' (SentencePiece) metadata", () => {
  test('stories260K: merges from scores == tokenizer.json merges; identical encodings', () => {
    const meta = spmMeta('stories', rankScores('stories'));
    expect((ggufToTokenizerJson(meta).tokenizerJson.model as Json).merges).toEqual(mergeList(modelFiles('stories').json));
    const tok = expectSameTokenizer('stories', meta);
    expect(tok.encode('Once upon a time')).toEqual([1, 403, 407, 261, 378]);
    expect(tok.bosId).toBe(1);
    expect(tok.decode([1, 403, 407, 261, 378], { skipSpecialTokens: true })).toBe('Once upon a time');
  });

  test('Mistral: 32k vocab, merges from scores == tokenizer.json merges; identical encodings', () => {
    const meta = spmMeta('mistral', rankScores('mistral'));
    expect((ggufToTokenizerJson(meta).tokenizerJson.model as Json).merges).toEqual(mergeList(modelFiles('mistral').json));
    expectSameTokenizer('mistral', meta);
  });

  test('hand-made vocab: highest-score pair merges first; duplicates decode; unknown chars use bytes', () => {
    // '▁ab' can be built as ▁a+b or ▁+ab: scores decide ('ab' > '▁a'), as in SentencePiece.
    const tokens = ['<unk>', '<s>', '</s>', '<0x43>', '<0xC3>', '<0xA9>', '▁', 'a', 'b', 'ab', '▁a', '▁ab', 'ab'];
    const scores = [0, 0, 0, 0, 0, 0, -1, -1, -1, -2, -5, -3, -9];
    const types = [T.UNKNOWN, T.CONTROL, T.CONTROL, T.BYTE, T.BYTE, T.BYTE, 1, 1, 1, 1, 1, 1, 1];
    const meta = {
      'tokenizer.ggml.model': 'llama', 'tokenizer.ggml.tokens': tokens, 'tokenizer.ggml.scores': scores,
      'tokenizer.ggml.token_type': types, 'tokenizer.ggml.bos_token_id': 1, 'tokenizer.ggml.eos_token_id': 2,
      'tokenizer.ggml.unknown_token_id': 0,
    };
    expect((ggufToTokenizerJson(meta).tokenizerJson.model as Json).merges).toEqual([['a', 'b'], ['▁', 'ab'], ['▁a', 'b'], ['▁', 'a']]);
    const tok = tokenizerFromGguf(meta);
    expect(tok.encode('ab a')).toEqual([1, 11, 10]);
    expect(tok.encode('C é', { addSpecialTokens: false })).toEqual([6, 3, 6, 4, 5]);
    expect(tok.decode([11, 12, 6, 4, 5])).toBe('abab é');
    expect(tok.vocabSize).toBe(13);
  });

  test('stored tokenizer.ggml.merges win over (placeholder) scores', () => {
    // llama.cpp's converter writes -1000 for every score of a tokenizer.json-only vocab.
    const merges = mergeList(modelFiles('stories').json);
    const meta = { ...spmMeta('stories', () => -1000), 'tokenizer.ggml.merges': merges.map((m) => m.join(' ')) };
    expect((ggufToTokenizerJson(meta).tokenizerJson.model as Json).merges).toEqual(merges);
    expectSameTokenizer('stories', meta);
    // Unusable merges (a part outside the vocab) fall back to the scores.
    const bad = { ...spmMeta('stories', rankScores('stories')), 'tokenizer.ggml.merges': ['▁ nope'] };
    expect((ggufToTokenizerJson(bad).tokenizerJson.model as Json).merges).toEqual(merges);
  });

  test('add_space_prefix=false drops the ▁ prefix and the Strip decoder', () => {
    const meta = { ...spmMeta('stories', (id) => -id), 'tokenizer.ggml.add_space_prefix': false };
    const tok = tokenizerFromGguf(meta);
    const ids = tok.encode('Once', { addSpecialTokens: false });
    expect(ids.map((i) => tok.idToToken(i))).not.toContain('▁Once');
    expect(tok.decode(tok.encode(' Once upon', { addSpecialTokens: false }))).toBe(' Once upon');
  });
});

describe("'gpt2' (byte-level BPE) metadata", () => {
  test('Llama 3 (pre = llama-bpe)', () => {
    const meta = bpeMeta('llama3', 'llama-bpe', true);
    const tok = expectSameTokenizer('llama3', meta, { specialsDiffer: true });
    // GGUF add_bos_token=true adds <|begin_of_text|> (this tokenizer.json version does not).
    expect(tok.encode('Hello world')).toEqual([128000, 9906, 1917]);
    expect(tok.hasChatTemplate).toBe(true);
    expect(tok.applyChatTemplate([{ role: 'user', content: 'Hi' }])).toBe(
      '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
    );
  });

  test('Qwen 3 (pre = qwen2): digits split, NFC, <think> non-special', () => {
    const meta = bpeMeta('qwen3', 'qwen2', false);
    const tok = expectSameTokenizer('qwen3', meta);
    expect(tok.padId).toBe(151643);
    expect(tok.isSpecial(tok.tokenToId('<think>')!)).toBe(false);
    expect(tok.isSpecial(151645)).toBe(true);
    expect(tok.encode('e\u0301')).toEqual(loadModel('qwen3').encode('é'));
  });

  test('named chat templates and extra end-of-generation ids', () => {
    const meta = {
      ...bpeMeta('qwen3', 'qwen2', false),
      'tokenizer.chat_template': 'A',
      'tokenizer.chat_template.tool_use': 'B',
      'tokenizer.ggml.eot_token_id': 151643,
    };
    const tok = tokenizerFromGguf(meta);
    expect(tok.applyChatTemplate([])).toBe('A');
    expect(tok.applyChatTemplate([], { tools: [{}] })).toBe('B');
    expect(tok.eosIds).toContain(151643);
  });
});

describe('errors', () => {
  test.each([
    [{ 'tokenizer.ggml.model': 'bert', 'tokenizer.ggml.tokens': ['a'] }, UnsupportedModelError],
    [{ 'tokenizer.ggml.model': 'gpt2', 'tokenizer.ggml.tokens': ['a'], 'tokenizer.ggml.merges': [], 'tokenizer.ggml.pre': 'mystery' }, UnsupportedModelError],
    [{}, UnsupportedModelError],
    [{ 'tokenizer.ggml.model': 'llama' }, ModelFormatError],
    [{ 'tokenizer.ggml.model': 'llama', 'tokenizer.ggml.tokens': 'abc', 'tokenizer.ggml.scores': [] }, ModelFormatError],
    [{ 'tokenizer.ggml.model': 'llama', 'tokenizer.ggml.tokens': ['a', 7], 'tokenizer.ggml.scores': [0, 0] }, ModelFormatError],
    [{ 'tokenizer.ggml.model': 'gpt2', 'tokenizer.ggml.tokens': ['a'] }, ModelFormatError],
  ])('%j', (meta, cls) => {
    expect(() => tokenizerFromGguf(meta)).toThrow(cls);
  });
});
