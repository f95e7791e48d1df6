/**
 * The engine library in Node, through its public entries only: core/api
 * (models as a file map or a URL on a loopback HTTP server) and the Node entry
 * server/library.ts (models as a filesystem path). A real tiny Llama
 * (models/stories260K, no chat template: chat falls back to ChatML) and a real
 * BERT sentence-transformer fixture with its golden embedding.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine as createEngineAt } from '../../server/library.ts';
import { CancelledError, createEngine, type ChatCompletionChunk, type Completion, type LoadProgress, type WeftEngine } from '../../core/api/index.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const STORIES = join(ROOT, 'models/stories260K');
const BERT = join(ROOT, 'test/fixtures/encoders/bert');
const backend = process.env.WEFT_TEST_BACKENDS?.split(',')[0] ?? 'swiftshader';

function fileMap(dir: string): Map<string, Uint8Array> {
  const m = new Map<string, Uint8Array>();
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (e.isFile()) m.set(join(e.parentPath, e.name).slice(dir.length + 1), new Uint8Array(readFileSync(join(e.parentPath, e.name))));
  }
  return m;
}

const messages = [{ role: 'user' as const, content: 'Once upon a time' }];

describe('engine library (Node)', () => {
  let engine: WeftEngine;
  const progress: LoadProgress[] = [];

  beforeAll(async () => {
    engine = await createEngine({ model: fileMap(STORIES), name: 'stories260K', gpuBackend: backend, maxContext: 256, onProgress: (p) => progress.push(p) });
  });
  afterAll(() => engine?.unload());

  it('reports load progress up to ready, weights counted in bytes', () => {
    expect(progress[0]?.stage).toBe('device');
    const w = progress.filter((p) => p.stage === 'weights');
    expect(w.length).toBeGreaterThan(0);
    expect(w.at(-1)!.loaded).toBe(w.at(-1)!.total);
    expect(w.at(-1)!.total).toBeGreaterThan(900_000);
    expect(progress.at(-1)!.stage).toBe('ready');
    expect(engine.info()).toMatchObject({ type: 'generate', model: 'stories260K', architecture: 'LlamaForCausalLM' });
  });

  it('chat completion: OpenAI shape, seeded sampling reproducible, usage counted', async () => {
    const a = await engine.chat.completions.create({ messages, max_tokens: 12, temperature: 0.8, seed: 7 });
    const b = await engine.chat.completions.create({ messages, max_tokens: 12, temperature: 0.8, seed: 7 });
    expect(a.object).toBe('chat.completion');
    expect(a.model).toBe('stories260K');
    expect(a.choices[0]!.message.role).toBe('assistant');
    expect(a.choices[0]!.message.content.length).toBeGreaterThan(0);
    expect(b.choices[0]!.message.content).toBe(a.choices[0]!.message.content);
    expect(a.usage.completion_tokens).toBeGreaterThan(0);
    expect(a.usage.completion_tokens).toBeLessThanOrEqual(12);
    expect(a.usage.total_tokens).toBe(a.usage.prompt_tokens + a.usage.completion_tokens);
    expect(['stop', 'length']).toContain(a.choices[0]!.finish_reason);
  });

  it('a stream is chunks in OpenAI shape whose text equals the non-streamed answer', async () => {
    const whole = await engine.chat.completions.create({ messages, max_tokens: 16, temperature: 0 });
    const chunks: ChatCompletionChunk[] = [];
    for await (const c of await engine.chat.completions.create({ messages, max_tokens: 16, temperature: 0, stream: true, stream_options: { include_usage: true } })) chunks.push(c);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0]!.id)).toBe(true);
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(text).toBe(whole.choices[0]!.message.content);
    const fin = chunks.at(-2)!;
    expect(fin.choices[0]!.finish_reason).toBe(whole.choices[0]!.finish_reason);
    expect(chunks.at(-1)!.choices).toEqual([]);
    expect(chunks.at(-1)!.usage).toEqual(whole.usage);
  });

  it('text completion stops at max_tokens with finish_reason length', async () => {
    const r = await engine.completions.create({ prompt: 'The little dog', max_tokens: 5, temperature: 0 });
    expect(r.object).toBe('text_completion');
    expect(r.usage!.completion_tokens).toBe(5);
    expect(r.choices[0]!.finish_reason).toBe('length');
    const pieces: Completion[] = [];
    for await (const c of await engine.completions.create({ prompt: 'The little dog', max_tokens: 5, temperature: 0, stream: true })) pieces.push(c);
    expect(pieces.map((p) => p.choices[0]!.text).join('')).toBe(r.choices[0]!.text);
  });

  it('response_format json_schema constrains the output to the schema', async () => {
    const r = await engine.chat.completions.create({
      messages,
      max_tokens: 8,
      temperature: 1,
      seed: 3,
      response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'string', enum: ['yes', 'no'] } } },
    });
    expect(['"yes"', '"no"']).toContain(r.choices[0]!.message.content);
  });

  it('tokenize gives ids and token strings, BOS first by default', async () => {
    const t = await engine.tokenize('Once upon a time');
    const bare = await engine.tokenize('Once upon a time', { addSpecialTokens: false });
    expect(t.ids.length).toBe(bare.ids.length + 1);
    expect(t.ids.slice(1)).toEqual(bare.ids);
    expect(t.tokens.length).toBe(t.ids.length);
    expect(await engine.detokenize(bare.ids)).toBe('Once upon a time');
  });

  it('aborting: a stream ends with finish_reason abort; a plain call rejects; engine.abort() stops all', async () => {
    const ac = new AbortController();
    const seen: ChatCompletionChunk[] = [];
    for await (const c of await engine.chat.completions.create({ messages, max_tokens: 200, temperature: 0.9, seed: 1, stream: true }, { signal: ac.signal })) {
      seen.push(c);
      if (seen.length === 3) ac.abort();
    }
    expect(seen.at(-1)!.choices[0]!.finish_reason).toBe('abort');
    expect(seen.length).toBeLessThan(60);
    const p = engine.completions.create({ prompt: 'Once', max_tokens: 200, temperature: 0.9, seed: 2 });
    setTimeout(() => engine.abort(), 20);
    await expect(p).rejects.toBeInstanceOf(CancelledError);
    const pre = new AbortController();
    pre.abort();
    await expect(engine.completions.create({ prompt: 'Once', max_tokens: 5 }, { signal: pre.signal })).rejects.toMatchObject({ code: 'cancelled' });
    // The engine still serves after aborts.
    expect((await engine.completions.create({ prompt: 'Once', max_tokens: 2 })).usage!.completion_tokens).toBe(2);
  });

  it('bad requests are typed errors with stable codes', async () => {
    await expect(engine.chat.completions.create({ messages, n: 2 })).rejects.toMatchObject({ code: 'unsupported_parameter', details: { field: 'n' } });
    await expect(engine.chat.completions.create({ messages: [] })).rejects.toMatchObject({ code: 'invalid_parameter' });
    await expect(engine.chat.completions.create({ messages, max_tokens: 0 })).rejects.toMatchObject({ code: 'invalid_parameter', details: { field: 'max_tokens' } });
    await expect(engine.embeddings.create({ input: 'x' })).rejects.toMatchObject({ code: 'wrong_reader_type' });
  });
});

describe('engine library model sources (Node)', () => {
  let server: Server;
  let base: string;
  beforeAll(async () => {
    server = createServer((req, res) => {
      const file = join(STORIES, decodeURIComponent(new URL(req.url!, 'http://x').pathname.replace(/^\/m\//, '')));
      try {
        const body = readFileSync(file);
        res.writeHead(200, { 'content-length': body.length });
        res.end(req.method === 'HEAD' ? undefined : body);
      } catch {
        res.writeHead(404).end();
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/m/`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('a URL, a path (Node entry) and a file map load the same model and answer alike', async () => {
    const req = { prompt: 'Lily went', max_tokens: 8, temperature: 0 };
    const fetched: LoadProgress[] = [];
    const byUrl = await createEngine({ model: base, gpuBackend: backend, maxContext: 128, onProgress: (p) => fetched.push(p) });
    const a = await byUrl.completions.create(req);
    await byUrl.unload();
    await expect(byUrl.completions.create(req)).rejects.toMatchObject({ code: 'engine_unloaded' });
    expect(fetched.some((p) => p.stage === 'fetch' && p.loaded === p.total && p.total > 900_000)).toBe(true);
    const byPath = await createEngineAt({ model: STORIES, gpuBackend: backend, maxContext: 128 });
    const b = await byPath.completions.create(req);
    await byPath.unload();
    expect(b.choices[0]!.text).toBe(a.choices[0]!.text);
    expect(a.model).toBe('m');
    expect(b.model).toBe('stories260K');
  });

  it('a missing model is a typed error, not a crash', async () => {
    await expect(createEngine({ model: `${base}nothing-here/`, gpuBackend: backend })).rejects.toMatchObject({ code: expect.any(String) });
    await expect(createEngine({ model: '/no/such/dir', gpuBackend: backend })).rejects.toMatchObject({ code: 'invalid_model' });
  });
});

describe('engine library embeddings (Node)', () => {
  it('embeddings.create matches the reference embedding, as floats and as base64', async () => {
    const golden = JSON.parse(readFileSync(join(BERT, 'golden.json'), 'utf8')) as { inputs: { text: string; embedding: number[] }[] };
    const engine = await createEngine({ model: fileMap(BERT), name: 'bert', gpuBackend: backend });
    try {
      expect(engine.info().type).toBe('embed');
      const input = golden.inputs.slice(0, 2).map((i) => i.text);
      const r = await engine.embeddings.create({ input });
      expect(r.object).toBe('list');
      expect(r.data.map((d) => d.index)).toEqual([0, 1]);
      expect(r.usage.prompt_tokens).toBeGreaterThan(0);
      for (const [k, d] of r.data.entries()) {
        const v = d.embedding as number[];
        const g = golden.inputs[k]!.embedding;
        const cos = v.reduce((a, x, i) => a + x * g[i]!, 0) / Math.hypot(...v) / Math.hypot(...g);
        expect(cos).toBeGreaterThan(0.999);
      }
      const b64 = await engine.embeddings.create({ input: input[0]!, encoding_format: 'base64' });
      const bytes = Buffer.from(b64.data[0]!.embedding as string, 'base64');
      const f = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
      expect(Array.from(f)).toEqual((r.data[0]!.embedding as number[]).map(Math.fround));
      await expect(engine.chat.completions.create({ messages })).rejects.toMatchObject({ code: 'wrong_reader_type' });
    } finally {
      await engine.unload();
    }
  });
});
