/**
 * ONNX encoders through the service, over real loopback HTTP: a Service started with
 * start() (every app on an ephemeral port, no generative reader) whose config starts
 * test/fixtures/encoders/bert_onnx (graph only, no safetensors) as group `embed`; then
 * `PUT /models` on the management port starts bert_reranker_onnx (`rerank`) and
 * roberta_onnx (`classify`). The readers run onnxruntime-web's WASM EP in their worker
 * threads (core/models/onnx_encoder.ts, picked by core/models/load_encoder.ts).
 *
 * Checked against the native kernels on the same weights (EncoderModel on the safetensors
 * fixtures, in this process): /embed vectors, truncation and token counts; /rerank scores
 * and order; /classify labels and scores (max |diff| <= 1e-4: the two backends compute in
 * f32 with different summation orders, observed ~1e-7); /v1/embeddings with the official
 * openai client returns the /embed vectors. Also: reader info (backend
 * onnxruntime-web/wasm), reader-type detection of ONNX directories, and dtype f16 on an
 * ONNX model refused as invalid_reader_config.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { filesSource } from '../../core/formats/source.ts';
import { EncoderModel } from '../../core/models/bert/encoder.ts';
import { loadConfig } from '../../server/config.ts';
import { dirSource } from '../../server/fs_source.ts';
import { start, type Running } from '../../server/main.ts';
import { readerTypeOf } from '../../server/readers/open_encoder.ts';
import { gpuFor } from '../helpers/gpu.ts';

const BACKEND = process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles';
const dir = (name: string): string => fileURLToPath(new URL(`../fixtures/encoders/${name}`, import.meta.url));
const golden = (name: string): { inputs: { text?: string; pair?: [string, string] }[] } => JSON.parse(readFileSync(`${dir(name)}/golden.json`, 'utf8'));
const TEXTS = golden('bert').inputs.flatMap((r) => (r.text !== undefined ? [r.text] : []));
const PAIRS = golden('bert_reranker').inputs.flatMap((r) => (r.pair ? [r.pair] : []));

let run: Running;
const native: Record<'bert' | 'bert_reranker' | 'roberta', EncoderModel> = {} as never;

const url = (app: string, path: string): string => `http://127.0.0.1:${run.servers.find((s) => s.name === app)!.port}${path}`;
async function call<T>(app: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(url(app, path), { method, headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { status: res.status, body: (await res.json()) as T };
}
const inf = <T>(path: string, body: unknown): Promise<{ status: number; body: T }> => call<T>('inference', 'POST', path, body);

type Embed = { result: number[][]; dims: number; truncated: boolean[]; usage: { prompt_tokens: number } };
type Summary = { reader_id: string; type: string; backend: string | null; device: string | null; ready: boolean; state: string; error: { code: string; message: string } | null };

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

async function settled(id: string): Promise<Summary> {
  for (let i = 0; i < 600; i++) {
    const s = (await call<Summary>('management', 'GET', `/reader/${id}`)).body;
    if (s.state !== 'loading' && s.state !== 'restarting') return s;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`reader ${id} did not settle`);
}

beforeAll(async () => {
  const config = loadConfig({
    env: {},
    overrides: {
      model: '',
      embeddingModel: '',
      host: '127.0.0.1',
      port: 0,
      managementPort: 0,
      openaiPort: 0,
      sagemakerPort: 0,
      vertexPort: 0,
      backend: BACKEND,
      logDisableTimestamps: true,
      batchDurationMillis: 2,
      readers: [{ model: dir('bert_onnx'), consumer_group: 'embed', reader_id: 'embed-0', backend: BACKEND }],
    },
  });
  run = await start(config, { ephemeral: true });
  const ctx = await gpuFor(BACKEND);
  for (const name of ['bert', 'bert_reranker', 'roberta'] as const) native[name] = await EncoderModel.load(ctx, dirSource(dir(name)), { batchDurationMs: 1 });
  for (const [model, group] of [['bert_reranker_onnx', 'rerank'], ['roberta_onnx', 'classify']] as const) {
    const put = await call<Summary>('management', 'PUT', '/models', { model: dir(model), consumer_group: group, reader_id: `${group}-0`, backend: BACKEND });
    expect(put.status).toBe(201);
  }
  for (const id of ['embed-0', 'rerank-0', 'classify-0']) {
    const s = await settled(id);
    if (!s.ready) throw new Error(`reader ${id} did not load: ${JSON.stringify(s.error)}`);
  }
}, 180_000);
afterAll(async () => {
  for (const m of Object.values(native)) m?.destroy();
  await run?.close();
});

describe('ONNX encoder readers over HTTP', () => {
  it('load as encoder readers on onnxruntime-web (WASM EP)', async () => {
    const s = await Promise.all(['embed-0', 'rerank-0', 'classify-0'].map(async (id) => (await call<Summary>('management', 'GET', `/reader/${id}`)).body));
    expect(s.map((x) => [x.reader_id, x.type, x.backend, x.ready])).toEqual([
      ['embed-0', 'embed', 'onnxruntime-web/wasm', true],
      ['rerank-0', 'classify', 'onnxruntime-web/wasm', true],
      ['classify-0', 'classify', 'onnxruntime-web/wasm', true],
    ]);
    const info = run.service.readers.get('embed-0').info!;
    expect(info).toMatchObject({ type: 'embed', architecture: 'BertModel', dims: native.bert.dims, contextLength: 64 });
    expect(run.service.readers.get('classify-0').info!.labels).toEqual(['negative', 'neutral', 'positive']);
    const tok = await inf<{ tokens: number[] }>('/tokenize/embed-0', { text: TEXTS[0] });
    expect(tok.body.tokens).toEqual(native.bert.encode(TEXTS[0]!).ids);
  });

  it('/embed returns the native vectors, truncation and token counts', async () => {
    const res = await inf<Embed>('/embed', { text: TEXTS, consumer_group: 'embed' });
    expect(res.status).toBe(200);
    const ref = await native.bert.embed(TEXTS);
    expect(res.body.dims).toBe(ref.dims);
    expect(res.body.truncated).toEqual(ref.truncated);
    expect(res.body.truncated).toContain(true);
    expect(res.body.usage.prompt_tokens).toBe(ref.tokens.reduce((a, b) => a + b, 0));
    const d = Math.max(...res.body.result.map((v, i) => maxDiff(v, ref.vectors[i]!)));
    expect(d).toBeLessThanOrEqual(1e-4);
    const raw = (await inf<{ result: number[] }>('/embed', { text: TEXTS[1], consumer_group: 'embed', normalize: false })).body.result;
    expect(maxDiff(raw, (await native.bert.embed([TEXTS[1]!], { normalize: false })).vectors[0]!)).toBeLessThanOrEqual(1e-4);
  });

  it('/rerank and /classify follow the native cross-encoder and classifier', async () => {
    const query = PAIRS[0]![0];
    const docs = PAIRS.map((p) => p[1]);
    const rr = await inf<{ results: { index: number; score: number }[]; scores: number[] }>('/rerank', { query, documents: docs, consumer_group: 'rerank' });
    expect(rr.status).toBe(200);
    const ref = await native.bert_reranker.rerank(query, docs);
    expect(maxDiff(rr.body.scores, ref.scores)).toBeLessThanOrEqual(1e-4);
    expect(rr.body.results.map((r) => r.index)).toEqual(ref.ranking.map((r) => r.index));

    const cl = await inf<{ result: { label: string; score: number; scores: Record<string, number> }[] }>('/classify', { text: TEXTS, consumer_group: 'classify' });
    expect(cl.status).toBe(200);
    const want = await native.roberta.classify(TEXTS);
    cl.body.result.forEach((c, i) => {
      expect(c.label).toBe(want[i]!.label);
      expect(maxDiff(Object.values(c.scores), Object.values(want[i]!.scores))).toBeLessThanOrEqual(1e-4);
    });
    const bad = await inf<{ error: { code: string } }>('/rerank', { query: 'q', documents: ['d'], consumer_group: 'classify' });
    expect([bad.status, bad.body.error.code]).toEqual([400, 'not_a_reranker']);
  });

  it('/v1/embeddings (official client) returns the /embed vectors', async () => {
    const ref = (await inf<Embed>('/embed', { text: TEXTS.slice(0, 3), consumer_group: 'embed' })).body;
    const oai = new OpenAI({ baseURL: url('openai', '/v1'), apiKey: 'none', maxRetries: 0 });
    const got = await oai.embeddings.create({ model: 'embed', input: TEXTS.slice(0, 3) });
    expect(got.usage.prompt_tokens).toBe(ref.usage.prompt_tokens);
    got.data.forEach((d, i) => expect(maxDiff(d.embedding, ref.result[i]!)).toBeLessThanOrEqual(1e-6));
  });

  it('refuses a GPU dtype for an ONNX model as invalid_reader_config', async () => {
    const put = await call<Summary>('management', 'PUT', '/models', { model: dir('bert_onnx'), consumer_group: 'f16', reader_id: 'f16-0', dtype: 'f16', backend: BACKEND });
    expect(put.status).toBe(201);
    try {
      const s = await settled('f16-0');
      expect([s.state, s.error?.code]).toEqual(['failed', 'invalid_reader_config']);
      expect(s.error?.message).toMatch(/dtype f16 does not apply to ONNX encoders/);
    } finally {
      await call('management', 'DELETE', '/reader/f16-0');
    }
  });

  it('detects ONNX directories as encoder readers, decoders excepted', async () => {
    expect(await readerTypeOf(dirSource(dir('bert_onnx')))).toBe('embed');
    expect(await readerTypeOf(dirSource(dir('roberta_onnx')))).toBe('classify');
    const graph = readFileSync(`${dir('bert_onnx')}/onnx/model.onnx`);
    const withConfig = (cfg: object): ReturnType<typeof filesSource> =>
      filesSource(new Map([['config.json', new TextEncoder().encode(JSON.stringify(cfg))], ['onnx/model.onnx', graph]]), 'm');
    expect(await readerTypeOf(withConfig({ architectures: ['DistilBertModel'], model_type: 'distilbert' }))).toBe('embed');
    expect(await readerTypeOf(withConfig({ model_type: 'mpnet' }))).toBe('embed');
    expect(await readerTypeOf(withConfig({ architectures: ['LlamaForCausalLM'], model_type: 'llama' }))).toBe('generate');
  });
});
