/**
 * Long texts tokenize on the reader's tokenizer worker (server/readers/
 * tokenize_pool.ts), not on the thread that steps the batch. The worker
 * rebuilds the tokenizer from `Tokenizer.source`, so its ids equal the reader's
 * own encode for every tokenizer kind (SentencePiece BPE, byte-level BPE of
 * Llama 3 and Qwen 3, WordPiece, Unigram, a GGUF vocabulary with duplicate
 * tokens). On a real stories260K reader: a long /tokenize resolves while
 * another generation keeps producing tokens (counted, not timed), and a long
 * prompt encoded on the worker generates exactly what the inline path does.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GenerationEvent } from '../../core/engine/engine.ts';
import { LocalReader } from '../../core/engine/local_reader.ts';
import { loadDecoder, type LoadedDecoder } from '../../core/api/load_decoder.ts';
import { tokenizerFromGguf } from '../../core/tokenizer/gguf_tokenizer.ts';
import type { Tokenizer } from '../../core/tokenizer/tokenizer.ts';
import { dirSource } from '../../server/fs_source.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { OFF_THREAD_MIN_CHARS, TokenizePool } from '../../server/readers/tokenize_pool.ts';
import { gpuFor } from '../helpers/gpu.ts';
import { loadFixture, loadModel, randomText, rng } from '../tokenizer/fixtures/models.ts';

const pools: TokenizePool[] = [];
const poolFor = (tok: Tokenizer): TokenizePool => {
  const p = new TokenizePool(tok.source!);
  pools.push(p);
  return p;
};
afterAll(async () => {
  for (const p of pools) await p.close();
});

function texts(seed: number): string[] {
  const r = rng(seed);
  const long = Array.from({ length: 400 }, () => randomText(r)).join(' ');
  return [long, `${long}</s><|endoftext|>${long.slice(0, 900)}`, 'Once upon a time, '.repeat(60), ' \n\t'.repeat(300)];
}

describe('the tokenizer worker encodes as the reader does', () => {
  const kinds: [string, () => Tokenizer][] = [
    ['stories260K (SentencePiece BPE)', () => loadModel('stories')],
    ['Llama 3 (byte-level BPE, 128k)', () => loadModel('llama3')],
    ['Qwen 3 (byte-level BPE)', () => loadModel('qwen3')],
    ['WordPiece', () => loadFixture('wordpiece_tiny')],
    ['Unigram', () => loadFixture('unigram_tiny')],
    [
      'GGUF vocabulary with a duplicate token',
      () =>
        tokenizerFromGguf({
          'tokenizer.ggml.model': 'llama',
          'tokenizer.ggml.tokens': ['<unk>', '<s>', '</s>', '<0x43>', '<0xC3>', '<0xA9>', '▁', 'a', 'b', 'ab', '▁a', '▁ab', 'ab'],
          'tokenizer.ggml.scores': [0, 0, 0, 0, 0, 0, -1, -1, -1, -2, -5, -3, -9],
          'tokenizer.ggml.token_type': [2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1],
          'tokenizer.ggml.bos_token_id': 1,
          'tokenizer.ggml.eos_token_id': 2,
          'tokenizer.ggml.unknown_token_id': 0,
        }),
    ],
  ];
  it.each(kinds)('%s', async (_name, make) => {
    const tok = make();
    const pool = poolFor(tok);
    for (const text of texts(_name.length)) {
      for (const add of [true, false]) expect(await pool.encode(text, add)).toEqual(tok.encode(text, { addSpecialTokens: add }));
    }
    expect(pool.encoded).toBe(8);
    // Short texts stay on the calling thread; a cancelled job rejects and the worker keeps serving.
    expect(pool.encodeLong('a'.repeat(OFF_THREAD_MIN_CHARS - 1), true)).toBeUndefined();
    const ac = new AbortController();
    const cancelled = pool.encode(texts(1)[0]!, true, ac.signal);
    ac.abort();
    await expect(cancelled).rejects.toMatchObject({ code: 'cancelled' });
    expect(await pool.encode('ab a', true)).toEqual(tok.encode('ab a'));
  }, 120_000);
});

describe('a reader with a tokenizer worker', () => {
  let loaded: LoadedDecoder;
  let pool: TokenizePool;
  let reader: LocalReader;
  let inline: LocalReader;
  beforeAll(async () => {
    const ctx = await gpuFor(process.env.WEFT_TEST_MODEL_BACKEND ?? 'opengles');
    loaded = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { maxSeqs: 4 });
    pool = poolFor(loaded.tokenizer);
    const meta = { readerId: 'r', model: 'stories260K', device: 'test', backend: 'test' };
    reader = new LocalReader(loaded, meta, undefined, (text, add, signal) => pool.encodeLong(text, add, signal));
    inline = new LocalReader(loaded, meta);
  }, 120_000);
  afterAll(() => loaded?.destroy());

  async function collect(it: AsyncIterable<GenerationEvent>): Promise<GenerationEvent[]> {
    const out: GenerationEvent[] = [];
    for await (const ev of it) out.push(ev);
    return out;
  }

  it('a long /tokenize resolves while another generation keeps producing tokens', async () => {
    let tokens = 0;
    const ac = new AbortController();
    const other = (async () => {
      for await (const ev of reader.generate({ prompt: 'Once upon a time', maxNewTokens: 100_000, ignoreEos: true, sampling: { temperature: 1, seed: 1 } }, ac.signal)) if (ev.type === 'token') tokens++;
    })();
    while (tokens === 0) await new Promise((r) => setTimeout(r, 5));
    // ~300 ms of SentencePiece BPE for 64 KB on this host: long enough for many steps of the other request.
    const text = 'Once upon a time there was a cat who liked to sleep. '.repeat(1200);
    const before = { tokens, encoded: pool.encoded };
    const r = await reader.tokenize(text);
    const during = tokens - before.tokens;
    ac.abort();
    await other.catch(() => undefined);
    expect(pool.encoded).toBe(before.encoded + 1);
    expect(r.ids).toEqual(loaded.tokenizer.encode(text));
    expect(during, 'tokens of the other request while the text was tokenized').toBeGreaterThan(3);
  }, 300_000);

  it('a long prompt encoded on the worker generates what the inline path generates', async () => {
    const prompt = 'Lily and Ben went to the park to play with a big red ball. '.repeat(20);
    const req = { prompt, maxNewTokens: 12, promptMaxTokens: 200, sampling: { temperature: 0 } };
    const encoded = pool.encoded;
    const viaWorker = (await collect(reader.generate(req))).at(-1) as { text: string; usage: { promptTokens: number } };
    expect(pool.encoded).toBe(encoded + 1);
    const here = (await collect(inline.generate(req))).at(-1) as { text: string; usage: { promptTokens: number } };
    expect(viaWorker.text).toBe(here.text);
    expect(viaWorker.usage.promptTokens).toBe(200);
  }, 300_000);
});
