/**
 * Encode/decode tables for every tokenizer family: SentencePiece BPE with
 * byte fallback (stories260K, Mistral, Gemma 3), byte-level BPE (Llama 3,
 * Qwen 3), WordPiece and Unigram (small fixtures). Expected tokens are written
 * as token strings (checkable by eye) with a few well-known ids as anchors;
 * Llama 3 is cross-checked against gpt-tokenizer's cl100k (its first 100k
 * ranks are Llama 3's) and all real models against @lenml/tokenizers.
 */
import { describe, expect, test } from 'vitest';
import { TokenizerLoader } from '@lenml/tokenizers';
import { encode as cl100kEncode } from 'gpt-tokenizer/encoding/cl100k_base';
import { InvalidRequestError, ModelFormatError } from '../../core/errors.ts';
import { loadTokenizer, loadTokenizerFromSource, type Tokenizer } from '../../core/tokenizer/tokenizer.ts';
import {
  dirSource, loadFixture, loadModel, MODEL_DIRS, type ModelName, modelFiles, randomText, rng,
} from './fixtures/models.ts';

type Case = { text: string; special?: boolean; tokens?: (string | number)[]; ids?: number[] };

/** tokens: token strings, or numbers for literal ids. */
const CASES: Record<ModelName | 'wordpiece_tiny' | 'unigram_tiny', Case[]> = {
  stories: [
    { text: 'Once upon a time', special: true, ids: [1, 403, 407, 261, 378] }, // model README
    { text: 'Once upon a time', tokens: ['▁Once', '▁upon', '▁a', '▁time'] },
    { text: 'Hello world', special: true, tokens: ['<s>', '▁He', 'll', 'o', '▁w', 'or', 'ld'] },
    { text: ' Hello  world\n', tokens: ['▁', '▁He', 'll', 'o', '▁', '▁w', 'or', 'ld', '<0x0A>'] },
    // é is a vocab piece; 😀 = F0 9F 98 80 falls back to bytes.
    { text: 'héllo 😀', tokens: ['▁h', 'é', 'll', 'o', '▁', '<0xF0>', '<0x9F>', '<0x98>', '<0x80>'] },
    { text: '', special: true, tokens: ['<s>'] },
    { text: '', tokens: [] },
  ],
  mistral: [
    { text: 'Hello world', special: true, ids: [1, 22557, 1526] },
    { text: 'Hello world', tokens: ['▁Hello', '▁world'] },
    { text: ' Hello  world\n', tokens: ['▁', '▁Hello', '▁', '▁world', '<0x0A>'] },
    { text: 'héllo 😀 日本語', tokens: ['▁h', 'é', 'll', 'o', '▁', '😀', '▁', '日', '本', '語'] },
    { text: '<s>[INST] Hi [/INST]', tokens: [1, '▁[', 'INST', ']', '▁Hi', '▁[', '/', 'INST', ']'] },
  ],
  llama3: [
    { text: 'Hello world', special: true, ids: [9906, 1917] }, // this tokenizer.json adds no BOS
    { text: 'Once upon a time', tokens: ['Once', 'Ġupon', 'Ġa', 'Ġtime'] },
    { text: ' Hello  world\n', tokens: ['ĠHello', 'Ġ', 'Ġworld', 'Ċ'] },
    { text: '12345', tokens: ['123', '45'] },
    { text: '<|begin_of_text|>Hi<|eot_id|>', tokens: [128000, 'Hi', 128009] },
  ],
  qwen3: [
    { text: 'Hello world', special: true, ids: [9707, 1879] },
    { text: ' Hello  world\n', tokens: ['ĠHello', 'Ġ', 'Ġworld', 'Ċ'] },
    { text: '12345', tokens: ['1', '2', '3', '4', '5'] },
    { text: '<|im_start|>user\nHi<|im_end|>', tokens: [151644, 'user', 'Ċ', 'Hi', 151645] },
    { text: '<think>\n\n</think>', tokens: ['<think>', 'ĊĊ', '</think>'] },
  ],
  gemma3: [
    { text: 'Hello world', special: true, ids: [2, 9259, 1902] },
    { text: ' Hello  world\n', tokens: ['▁Hello', '▁▁', 'world', '\n'] },
    { text: '<start_of_turn>user\nHi<end_of_turn>', tokens: [105, 'user', '\n', 'Hi', 106] },
  ],
  wordpiece_tiny: [
    { text: 'Hello, world!', special: true, tokens: ['[CLS]', 'hello', ',', 'world', '!', '[SEP]'] },
    { text: 'The cat sat on the mat.', tokens: ['the', 'cat', 'sat', 'on', 'the', 'mat', '.'] },
    { text: 'unaffable', tokens: ['un', '##aff', '##able'] },
    { text: 'Playing played dogs', tokens: ['play', '##ing', 'play', '##ed', 'dog', '##s'] },
    { text: 'Café NAÏVE', tokens: ['cafe', 'naive'] }, // lowercase + strip accents
    { text: '日本', tokens: ['日', '本'] }, // CJK chars are split apart
    { text: 'xyz 123', tokens: ['[UNK]', '12', '##3'] },
  ],
  unigram_tiny: [
    { text: 'the cat sat on', special: true, tokens: ['▁the', '▁cat', '▁s', 'at', '▁on', '</s>'] },
    { text: 'é 日本', tokens: ['▁é', '▁', '日本'] },
    { text: 'café', tokens: ['▁ca', '<unk>', 'é'] }, // f is unknown
    { text: 'the xyz', tokens: ['▁the', '▁', '<unk>'] }, // unknowns are fused
  ],
};

function load(name: keyof typeof CASES): Tokenizer {
  return name === 'wordpiece_tiny' || name === 'unigram_tiny' ? loadFixture(name) : loadModel(name);
}

describe.each(Object.keys(CASES) as (keyof typeof CASES)[])('%s', (name) => {
  test.each(CASES[name])('encode $text (special: $special)', (c) => {
    const tok = load(name);
    const ids = tok.encode(c.text, { addSpecialTokens: c.special ?? false });
    if (c.ids) expect(ids).toEqual(c.ids);
    if (c.tokens) {
      expect(ids.map((id, i) => (typeof c.tokens![i] === 'number' ? id : tok.idToToken(id)))).toEqual(c.tokens);
    }
  });
});

const ROUND_TRIP: ModelName[] = ['stories', 'mistral', 'llama3', 'qwen3', 'gemma3'];

describe.each(ROUND_TRIP)('%s round trip', (name) => {
  test('unicode strings decode back exactly', () => {
    const tok = loadModel(name);
    const fixed = ['😀👍🏽🇯🇵', '日本語のテキスト', 'Ça va? Ñandú, über, naïve', '한국어 Привет مرحبا', 'a\u00a0b\tc\n\nd', '  lead', 'trail  '];
    const r = rng(11);
    const texts = [...fixed, ...Array.from({ length: 150 }, () => randomText(r))];
    for (const text of texts) {
      expect(tok.decode(tok.encode(text, { addSpecialTokens: false }))).toBe(text);
    }
  });

  test('agrees with @lenml/tokenizers on random text', () => {
    const tok = loadModel(name);
    const { json, config } = modelFiles(name);
    const ref = TokenizerLoader.fromPreTrained({ tokenizerJSON: json, tokenizerConfig: config } as never) as unknown as {
      encode(text: string, o: { add_special_tokens: boolean }): number[];
    };
    const r = rng(3);
    for (let i = 0; i < 150; i++) {
      const text = randomText(r);
      expect(tok.encode(text, { addSpecialTokens: false })).toEqual(ref.encode(text, { add_special_tokens: false }));
    }
  });
});

test('Llama 3 matches tiktoken cl100k on English and code', () => {
  const tok = loadModel('llama3');
  const texts = [
    'The quick brown fox jumps over the lazy dog.',
    "I'll be there at 10:30, won't I? It's 2024-05-01.",
    'function add(a, b) {\n  return a + b;\n}\n',
    '    indented    spaces\t\ttabs\r\nCRLF',
    'URLs like https://example.com/path?q=1&r=2 and emails a.b@c.de',
    'Numbers: 1234567890 3.14159 -42 1e10',
  ];
  for (const text of texts) expect(tok.encode(text, { addSpecialTokens: false })).toEqual(cl100kEncode(text));
});

describe('special tokens and ids', () => {
  test.each([
    ['stories', 1, [2], null, 512],
    ['mistral', 1, [2], null, 32000],
    ['llama3', 128000, [128001, 128009], null, 128256],
    ['qwen3', null, [151645, 151643], 151643, 151669],
    ['gemma3', 2, [106, 1], 0, 262145],
  ] as const)('%s bos/eos/pad/vocab', (name, bos, eos, pad, vocab) => {
    const tok = loadModel(name);
    expect(tok.bosId).toBe(bos);
    expect(tok.eosIds).toEqual(eos);
    expect(tok.padId).toBe(pad);
    expect(tok.vocabSize).toBe(vocab);
    for (const id of [...eos, ...(bos === null ? [] : [bos])]) expect(tok.isSpecial(id)).toBe(true);
  });

  test('isSpecial / skipSpecialTokens / token lookups', () => {
    const qwen = loadModel('qwen3');
    const ids = qwen.encode('<|im_start|>assistant\nHi there<|im_end|>');
    expect(qwen.isSpecial(151644)).toBe(true);
    expect(qwen.isSpecial(qwen.tokenToId('<think>')!)).toBe(false); // added but not special
    expect(qwen.isSpecial(ids[1]!)).toBe(false);
    expect(qwen.decode(ids)).toBe('<|im_start|>assistant\nHi there<|im_end|>');
    expect(qwen.decode(ids, { skipSpecialTokens: true })).toBe('assistant\nHi there');
    expect(qwen.tokenToId('<|im_end|>')).toBe(151645);
    expect(qwen.idToToken(151645)).toBe('<|im_end|>');
    expect(qwen.tokenToId('no-such-token-xyz')).toBeUndefined();
    expect(qwen.idToToken(-1)).toBeUndefined();
    expect(qwen.idToToken(10 ** 7)).toBeUndefined();

    const stories = loadModel('stories');
    expect(stories.decode([1, 403, 407, 261, 378])).toBe('<s> Once upon a time');
    expect(stories.decode([1, 403, 407, 261, 378], { skipSpecialTokens: true })).toBe('Once upon a time');
    expect(stories.decode([])).toBe('');
    expect(stories.decode([1], { skipSpecialTokens: true })).toBe('');

    const bert = loadFixture('wordpiece_tiny');
    const enc = bert.encode('Hello, world!');
    expect(bert.decode(enc)).toBe('[CLS] hello, world! [SEP]');
    expect(bert.decode(enc, { skipSpecialTokens: true })).toBe('hello, world!');
    expect(bert.bosId).toBe(null);
    expect(bert.padId).toBe(0);

    const uni = loadFixture('unigram_tiny');
    expect(uni.decode(uni.encode('the cat sat on'))).toBe('the cat sat on</s>');
    expect(uni.eosIds).toEqual([1]);
  });

  test('decode never applies clean_up_tokenization_spaces (Llama 3 config enables it)', () => {
    const tok = loadModel('llama3');
    expect(tok.decode(tok.encode('Hello , world . Is it ?', { addSpecialTokens: false }))).toBe('Hello , world . Is it ?');
  });

  test('tokenizer_config add_bos_token wins over the post-processor', () => {
    const { json, config } = modelFiles('stories');
    expect(loadTokenizer(json, { ...config, add_bos_token: false }).encode('Once')).toEqual([403]);
    expect(loadTokenizer(json, { ...config, add_eos_token: true }).encode('Once')).toEqual([1, 403, 2]);
    const llama = modelFiles('llama3');
    const withBos = loadTokenizer(llama.json, { ...llama.config, add_bos_token: true });
    expect(withBos.encode('Hello world')).toEqual([128000, 9906, 1917]);
    expect(withBos.encode('Hello world', { addSpecialTokens: false })).toEqual([9906, 1917]);
  });
});

describe('errors', () => {
  test('invalid ids are InvalidRequestError(invalid_token_id)', () => {
    const tok = loadModel('stories');
    for (const bad of [512, -1, 1.5, Number.NaN]) {
      expect(() => tok.decode([bad])).toThrow(InvalidRequestError);
      expect(() => tok.tokenBytes(bad)).toThrow(InvalidRequestError);
    }
    try {
      tok.decode([5, 9999]);
    } catch (e) {
      expect((e as InvalidRequestError).code).toBe('invalid_token_id');
    }
  });

  test('malformed tokenizer files are ModelFormatError', () => {
    expect(() => loadTokenizer(null)).toThrow(ModelFormatError);
    expect(() => loadTokenizer({ version: '1.0' })).toThrow(ModelFormatError);
    expect(() => loadTokenizer({ model: { type: 'Bogus' } })).toThrow(ModelFormatError);
    expect(() => loadTokenizer(modelFiles('stories').json, 'nope')).toThrow(ModelFormatError);
    try {
      loadTokenizer({ model: { type: 'Bogus' } });
    } catch (e) {
      expect((e as ModelFormatError).code).toBe('model_format');
    }
  });
});

describe('loadTokenizerFromSource', () => {
  test('reads tokenizer.json, config, generation_config and chat_template.jinja', async () => {
    const src = dirSource(MODEL_DIRS.stories, {
      'chat_template.jinja': '{% for m in messages %}{{ bos_token }}{{ m.content }}{% endfor %}',
    });
    const tok = await loadTokenizerFromSource(src);
    expect(tok.encode('Once upon a time')).toEqual([1, 403, 407, 261, 378]);
    expect(tok.eosIds).toEqual([2]);
    expect(tok.hasChatTemplate).toBe(true);
    expect(tok.applyChatTemplate([{ role: 'user', content: 'Hi' }])).toBe('<s>Hi');
  });

  test('chat_template.json (processor format) and special_tokens_map.json', async () => {
    const { json } = modelFiles('stories');
    const files: Record<string, string> = {
      'tokenizer.json': JSON.stringify(json),
      'special_tokens_map.json': JSON.stringify({ bos_token: { content: '<s>' }, eos_token: '</s>', pad_token: '<unk>' }),
      'chat_template.json': JSON.stringify({ chat_template: '{{ eos_token }}' }),
    };
    const tok = await loadTokenizerFromSource({
      readText: async (p) => files[p]!,
      exists: async (p) => p in files,
    });
    expect(tok.bosId).toBe(1);
    expect(tok.padId).toBe(0);
    expect(tok.applyChatTemplate([])).toBe('</s>');
  });

  test('missing or broken files are ModelFormatError', async () => {
    await expect(loadTokenizerFromSource({ readText: async () => '', exists: async () => false })).rejects.toThrow(
      ModelFormatError,
    );
    await expect(
      loadTokenizerFromSource({ readText: async () => '{not json', exists: async (p) => p === 'tokenizer.json' }),
    ).rejects.toThrow(/tokenizer.json is not valid JSON/);
  });
});
