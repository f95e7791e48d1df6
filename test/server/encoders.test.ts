/**
 * Encoder readers through the service: a real Service (start(), loopback
 * listeners) with worker-thread readers loaded from the encoder fixtures —
 * bert (sentence-transformers embedding model) as group `embed`,
 * bert_reranker (one-label cross-encoder) as `rerank`, roberta (3-label
 * classifier) as `classify` — next to the default generative reader
 * (`primary`). Checked against EncoderModel run in this process on the same
 * backend: /embed vectors (single, list, normalize), /rerank scores and order,
 * /classify labels and scores, 16 concurrent clients each getting their own
 * vectors, wrong reader types and unknown groups, /v1/embeddings with the
 * official openai client (float and base64), and the reader-type detection,
 * batching settings and cancellation of encoder calls over the protocol.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RemoteReader, serveReader, type Endpoint, type Msg } from '../../core/engine/protocol.ts';
import type { EncoderReaderApi, ReaderInfo } from '../../core/engine/reader_api.ts';
import { EncoderModel } from '../../core/models/bert/encoder.ts';
import { buildApps, type Apps } from '../../server/apps/index.ts';
import { loadConfig } from '../../server/config.ts';
import { dirSource } from '../../server/fs_source.ts';
import { start, type Running } from '../../server/main.ts';
import { readerTypeOf } from '../../server/readers/open_encoder.ts';
import { parseReaderSpec } from '../../server/readers/spec.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { gpuFor } from '../helpers/gpu.ts';
import { post } from './helpers.ts';

const BACKEND = process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles';
const dir = (name: string): string => fileURLToPath(new URL(`../fixtures/encoders/${name}`, import.meta.url));
const golden = (name: string): { inputs: { text?: string; pair?: [string, string] }[] } => JSON.parse(readFileSync(`${dir(name)}/golden.json`, 'utf8'));
const TEXTS = golden('bert').inputs.flatMap((r) => (r.text !== undefined ? [r.text] : []));
const SHORT = TEXTS.filter((t) => t.length < 60);
const PAIRS = golden('bert_reranker').inputs.flatMap((r) => (r.pair ? [r.pair] : []));

let run: Running;
let apps: Apps;
const local: Record<'bert' | 'bert_reranker' | 'roberta', EncoderModel> = {} as never;

beforeAll(async () => {
  const reader = (name: string, group: string): Record<string, unknown> => ({ model: dir(name), consumer_group: group, reader_id: `${group}-0`, backend: BACKEND });
  const config = loadConfig({
    env: {},
    overrides: {
      embeddingModel: '',
      host: '127.0.0.1',
      port: 0,
      managementPort: 0,
      openaiPort: 0,
      sagemakerPort: 0,
      vertexPort: 0,
      backend: BACKEND,
      logDisableTimestamps: true,
      maxPromptStringBytes: 2000,
      batchDurationMillis: 2,
      readers: [reader('bert', 'embed'), reader('bert_reranker', 'rerank'), reader('roberta', 'classify')],
    },
  });
  run = await start(config, { ephemeral: true });
  const ctx = await gpuFor(BACKEND);
  for (const name of ['bert', 'bert_reranker', 'roberta'] as const) local[name] = await EncoderModel.load(ctx, dirSource(dir(name)), { batchDurationMs: 1 });
  await run.service.readers.waitSettled(60_000);
  for (const r of run.service.readers.all()) if (!r.ready) throw new Error(`reader ${r.readerId} did not load: ${JSON.stringify(r.error)}`);
  apps = buildApps(run.service);
});
afterAll(async () => {
  for (const m of Object.values(local)) m.destroy();
  await run?.close();
});

const inf = async <T = Record<string, unknown>>(path: string, body: unknown): Promise<{ status: number; body: T; headers: Headers }> => {
  const res = await apps.inference.request(path, post(body));
  return { status: res.status, body: (await res.json()) as T, headers: res.headers };
};
type Embed = { result: number[] | number[][]; dims: number; truncated: boolean | boolean[]; usage: { prompt_tokens: number } };
type Err = { error: { code: string; message: string; details?: Record<string, unknown> } };

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

describe('encoder readers', () => {
  it('load as encoder readers of the detected type, next to the generative reader', async () => {
    const res = await apps.management.request('/reader_groups');
    const groups = (await res.json()) as Record<string, { reader_id: string; type: string; ready: boolean }[]>;
    expect(Object.fromEntries(Object.entries(groups).map(([g, l]) => [g, l.map((r) => [r.reader_id, r.type, r.ready])]))).toEqual({
      primary: [['primary-0', 'generate', true]],
      embed: [['embed-0', 'embed', true]],
      rerank: [['rerank-0', 'classify', true]],
      classify: [['classify-0', 'classify', true]],
    });
    const info = run.service.readers.get('embed-0').info!;
    expect(info).toMatchObject({ type: 'embed', architecture: 'BertModel', dims: local.bert.dims, contextLength: 64, hasChatTemplate: false });
    expect(run.service.readers.get('classify-0').info!.labels).toEqual(['negative', 'neutral', 'positive']);
    // The common reader routes work on encoders too.
    const tok = await inf<{ tokens: number[] }>('/tokenize/embed-0', { text: SHORT[0] });
    expect(tok.body.tokens).toEqual(local.bert.encode(SHORT[0]!).ids);
    expect((await inf<Err>('/chat_template/embed-0', { messages: [{ role: 'user', content: 'hi' }] })).body.error.code).toBe('wrong_reader_type');
  });

  it('/embed returns the in-process vectors for one text and for a list', async () => {
    const one = await inf<Embed>('/embed', { text: SHORT[0], consumer_group: 'embed' });
    expect(one.status).toBe(200);
    expect(one.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const ref1 = await local.bert.embed([SHORT[0]!]);
    expect(one.body).toMatchObject({ dims: ref1.dims, truncated: false, usage: { prompt_tokens: ref1.tokens[0] } });
    expect(maxDiff(one.body.result as number[], ref1.vectors[0]!)).toBeLessThanOrEqual(1e-6);

    const list = await inf<Embed>('/embed', { text: TEXTS, consumer_group: 'embed' });
    const ref = await local.bert.embed(TEXTS);
    const got = list.body.result as number[][];
    expect(got).toHaveLength(TEXTS.length);
    expect(list.body.truncated).toEqual(ref.truncated);
    expect(list.body.truncated).toContain(true); // the long golden text is cut to 64 tokens
    expect(list.body.usage.prompt_tokens).toBe(ref.tokens.reduce((a, b) => a + b, 0));
    got.forEach((v, i) => {
      expect(v).toHaveLength(list.body.dims);
      expect(maxDiff(v, ref.vectors[i]!)).toBeLessThanOrEqual(1e-6);
      expect(Math.hypot(...v)).toBeCloseTo(1, 5); // the fixture ends in a Normalize module
    });
  });

  it('/embed normalize: false skips the Normalize module, true restores unit norm', async () => {
    const raw = (await inf<Embed>('/embed', { text: SHORT[1], consumer_group: 'embed', normalize: false })).body.result as number[];
    const ref = await local.bert.embed([SHORT[1]!], { normalize: false });
    expect(maxDiff(raw, ref.vectors[0]!)).toBeLessThanOrEqual(1e-6);
    expect(Math.abs(Math.hypot(...raw) - 1)).toBeGreaterThan(1e-3);
    const unit = (await inf<Embed>('/embed', { text: [SHORT[1]], consumer_group: 'embed', normalize: true })).body.result as number[][];
    expect(Math.hypot(...unit[0]!)).toBeCloseTo(1, 6);
    const n = Math.hypot(...raw);
    expect(maxDiff(unit[0]!, raw.map((x) => x / n))).toBeLessThanOrEqual(1e-6);
  });

  it('serves 16 concurrent clients each their own vectors (same as sequential requests)', async () => {
    const texts = SHORT.flatMap((a, i) => SHORT.filter((_, j) => j !== i).map((b) => `${a} ${b}`)).slice(0, 16);
    const bodies = texts.map((t, k) => ({ text: k % 3 === 0 ? [t, texts[(k + 5) % 16]!] : k % 3 === 1 ? t : [t], consumer_group: 'embed' }));
    const vectors = (b: Embed): number[][] => (Array.isArray(b.result[0]) ? (b.result as number[][]) : [b.result as number[]]);
    const sequential: number[][][] = [];
    for (const body of bodies) sequential.push(vectors((await inf<Embed>('/embed', body)).body));
    const concurrent = await Promise.all(bodies.map(async (body) => vectors((await inf<Embed>('/embed', body)).body)));
    let err = 0;
    concurrent.forEach((vs, k) => {
      expect(vs).toHaveLength(sequential[k]!.length);
      vs.forEach((v, i) => (err = Math.max(err, maxDiff(v, sequential[k]![i]!))));
    });
    // Batch composition moves values by float rounding only (padding is masked) ...
    expect(err).toBeLessThanOrEqual(1e-5);
    // ... while any two different texts are far apart, so a leaked vector could not pass.
    const firsts = sequential.map((vs) => vs[0]!);
    let closest = Infinity;
    for (let a = 0; a < firsts.length; a++) for (let b = a + 1; b < firsts.length; b++) closest = Math.min(closest, maxDiff(firsts[a]!, firsts[b]!));
    expect(closest).toBeGreaterThan(1e-3);
  });

  it('/rerank orders documents by the cross-encoder score (top_n, return_documents)', async () => {
    const query = PAIRS[0]![0];
    const docs = PAIRS.map((p) => p[1]);
    const res = await inf<{ results: { index: number; score: number; document?: string }[]; scores: number[] }>('/rerank', { query, documents: docs, consumer_group: 'rerank' });
    expect(res.status).toBe(200);
    const ref = await local.bert_reranker.rerank(query, docs);
    expect(maxDiff(res.body.scores, ref.scores)).toBeLessThanOrEqual(1e-6);
    expect(res.body.results.map((r) => r.index)).toEqual(ref.ranking.map((r) => r.index));
    for (let i = 1; i < res.body.results.length; i++) expect(res.body.results[i - 1]!.score).toBeGreaterThanOrEqual(res.body.results[i]!.score);
    res.body.results.forEach((r) => expect(r.score).toBe(res.body.scores[r.index]));
    expect(res.body.results.every((r) => !('document' in r))).toBe(true);
    const top = await inf<{ results: { index: number; document?: string }[]; scores: number[] }>('/rerank', { query, documents: docs, consumer_group: 'rerank', top_n: 2, return_documents: true });
    expect(top.body.results).toHaveLength(2);
    expect(top.body.results.map((r) => r.document)).toEqual(top.body.results.map((r) => docs[r.index]));
    expect(top.body.scores).toHaveLength(docs.length);
    // An embedding reader reranks by cosine similarity.
    const bi = await inf<{ results: { index: number }[]; scores: number[] }>('/rerank', { query: SHORT[0], documents: SHORT.slice(1), consumer_group: 'embed' });
    const biRef = await local.bert.rerank(SHORT[0]!, SHORT.slice(1));
    expect(maxDiff(bi.body.scores, biRef.scores)).toBeLessThanOrEqual(1e-6);
    expect(bi.body.results.map((r) => r.index)).toEqual(biRef.ranking.map((r) => r.index));
  });

  it('/classify labels texts, and pairs on a cross-encoder', async () => {
    const res = await inf<{ result: { label: string; score: number; scores: Record<string, number> }[] }>('/classify', { text: TEXTS, consumer_group: 'classify' });
    expect(res.status).toBe(200);
    const ref = await local.roberta.classify(TEXTS);
    expect(res.body.result.map((r) => r.label)).toEqual(ref.map((r) => r.label));
    res.body.result.forEach((r, i) => {
      expect(Object.keys(r.scores)).toEqual(['negative', 'neutral', 'positive']);
      expect(Math.abs(r.score - ref[i]!.score)).toBeLessThanOrEqual(1e-6);
      expect(r.score).toBe(Math.max(...Object.values(r.scores)));
    });
    const single = await inf<{ result: { label: string }[] }>('/classify', { text: TEXTS[1], consumer_group: 'classify' });
    expect(single.body.result).toEqual([res.body.result[1]]);
    // Pairs on the cross-encoder: one sigmoid label, the same scores /rerank gives.
    const pairs = await inf<{ result: { label: string; score: number }[] }>('/classify', { text: PAIRS.slice(0, 3), consumer_group: 'rerank' });
    const rr = await local.bert_reranker.rerank(PAIRS[0]![0], PAIRS.slice(0, 3).map((p) => p[1]));
    expect(pairs.body.result.map((r) => r.label)).toEqual(['LABEL_0', 'LABEL_0', 'LABEL_0']);
    expect(maxDiff(pairs.body.result.map((r) => r.score), rr.scores)).toBeLessThanOrEqual(1e-6);
  });

  it.each([
    ['/embed on a generative group', '/embed', { text: 'hi' }, 400, 'wrong_reader_type'],
    ['/embed on a classifier group', '/embed', { text: 'hi', consumer_group: 'classify' }, 400, 'wrong_reader_type'],
    ['/classify on an embedding group', '/classify', { text: 'hi', consumer_group: 'embed' }, 400, 'wrong_reader_type'],
    ['/rerank on a generative group', '/rerank', { query: 'q', documents: ['d'], consumer_group: 'primary' }, 400, 'wrong_reader_type'],
    ['/rerank on a 3-label classifier', '/rerank', { query: 'q', documents: ['d'], consumer_group: 'classify' }, 400, 'not_a_reranker'],
    ['/generate on an embedding group', '/generate', { text: 'hi', consumer_group: 'embed' }, 400, 'wrong_reader_type'],
    ['/generate_stream on a classifier group', '/generate_stream', { text: 'hi', consumer_group: 'classify' }, 400, 'wrong_reader_type'],
    ['an unknown group', '/embed', { text: 'hi', consumer_group: 'nope' }, 404, 'consumer_group_not_found'],
    ['an empty list', '/embed', { text: [], consumer_group: 'embed' }, 400, 'invalid_request'],
    ['a malformed pair', '/classify', { text: [['a', 'b', 'c']], consumer_group: 'rerank' }, 400, 'invalid_request'],
    ['no documents', '/rerank', { query: 'q', documents: [], consumer_group: 'rerank' }, 400, 'invalid_request'],
    ['an oversize text', '/embed', { text: ['ok', 'x'.repeat(2001)], consumer_group: 'embed' }, 413, 'prompt_too_large'],
  ])('refuses %s', async (_name, path, body, status, code) => {
    const res = await inf<Err>(path, body);
    expect(res.status).toBe(status);
    expect(res.body.error.code).toBe(code);
    if (code === 'wrong_reader_type') expect(res.body.error.message).toMatch(/consumer group \w+ serves \w+ readers/);
  });

  it('documents the encoder routes in the OpenAPI document', async () => {
    const doc = (await (await apps.inference.request('/openapi.json')).json()) as { paths: Record<string, { post?: { requestBody?: unknown } }> };
    for (const p of ['/embed', '/classify', '/rerank']) expect(doc.paths[p]?.post?.requestBody).toBeDefined();
  });
});

describe('/v1/embeddings with the official client', () => {
  const client = (): OpenAI => new OpenAI({ baseURL: `http://127.0.0.1:${run.servers.find((s) => s.name === 'openai')!.port}/v1`, apiKey: 'none', maxRetries: 0 });

  it('returns the /embed vectors as floats and as base64 (the client default), with usage', async () => {
    const ref = (await inf<Embed>('/embed', { text: SHORT, consumer_group: 'embed' })).body;
    const oai = client();
    const b64 = await oai.embeddings.create({ model: 'embed', input: SHORT });
    expect(b64.object).toBe('list');
    expect(b64.model).toBe('embed');
    expect(b64.data.map((d) => d.index)).toEqual(SHORT.map((_, i) => i));
    expect(b64.usage).toEqual({ prompt_tokens: ref.usage.prompt_tokens, total_tokens: ref.usage.prompt_tokens });
    const flt = await oai.embeddings.create({ model: 'embed-0', input: SHORT, encoding_format: 'float' });
    (ref.result as number[][]).forEach((v, i) => {
      expect(maxDiff(b64.data[i]!.embedding, v)).toBeLessThanOrEqual(1e-6);
      expect(maxDiff(flt.data[i]!.embedding, v)).toBeLessThanOrEqual(1e-6);
    });
    const one = await oai.embeddings.create({ model: 'embed', input: SHORT[0]!, encoding_format: 'float' });
    expect(one.data).toHaveLength(1);
    expect(maxDiff(one.data[0]!.embedding, (ref.result as number[][])[0]!)).toBeLessThanOrEqual(1e-6);
  });

  it('refuses dimensions, token ids, generative groups (and chat on an embedding group) as typed client errors', async () => {
    const oai = client();
    const fail = (p: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> => p.then(() => expect.unreachable(), (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    const dims = await fail(oai.embeddings.create({ model: 'embed', input: 'hi', dimensions: 8 }));
    expect(dims).toBeInstanceOf(OpenAI.BadRequestError);
    expect([dims.code, dims.param]).toEqual(['unsupported_parameter', 'dimensions']);
    const ids = await fail(oai.embeddings.create({ model: 'embed', input: [1, 2, 3] }));
    expect([ids.status, ids.code, ids.param]).toEqual([400, 'unsupported_parameter', 'input']);
    const gen = await fail(oai.embeddings.create({ model: 'primary', input: 'hi' }));
    expect([gen.status, gen.code, gen.param]).toEqual([400, 'wrong_reader_type', 'model']);
    const missing = await fail(oai.embeddings.create({ model: 'nope', input: 'hi' }));
    expect([missing.status, missing.code]).toEqual([404, 'model_not_found']);
    const chat = await fail(oai.chat.completions.create({ model: 'embed', messages: [{ role: 'user', content: 'hi' }] }));
    expect([chat.status, chat.code, chat.param]).toEqual([400, 'wrong_reader_type', 'model']);
  });
});

describe('reader types, batching settings and encoder-call cancellation', () => {
  it('detects the reader type from config.json / modules.json; a spec type overrides it', async () => {
    expect(await readerTypeOf(dirSource(dir('bert')))).toBe('embed');
    expect(await readerTypeOf(dirSource(dir('xlmr')))).toBe('embed');
    expect(await readerTypeOf(dirSource(dir('bert_reranker')))).toBe('classify');
    expect(await readerTypeOf(dirSource(dir('roberta')))).toBe('classify');
    expect(await readerTypeOf(dirSource(DEFAULT_MODEL_DIR))).toBe('generate');
    expect(await readerTypeOf(dirSource(dir('roberta')), 'embed')).toBe('embed');
    expect(parseReaderSpec({ type: 'embed', batch_duration_millis: 0, max_batch_size: 8 }, { model: 'm' })).toMatchObject({ type: 'embed', batchDurationMillis: 0, maxSeqs: 8 });
    expect(() => parseReaderSpec({ type: 'chat' }, { model: 'm' })).toThrow(/type must be one of/);
  });

  it('PUT /models with a type forces it: embed on a classifier serves /embed; classify on an embedding model fails to load', async () => {
    const put = (body: object): Promise<Response> =>
      Promise.resolve(apps.management.request('/models', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ backend: BACKEND, ...body }) }));
    expect((await put({ model: dir('roberta'), consumer_group: 'forced', reader_id: 'forced-0', type: 'embed', max_batch_size: 4, batch_duration_millis: 0 })).status).toBe(201);
    expect((await put({ model: dir('bert'), consumer_group: 'bad', reader_id: 'bad-0', type: 'classify' })).status).toBe(201);
    const readers = run.service.readers;
    await Promise.all(['forced-0', 'bad-0'].map((id) => readers.get(id).waitSettled(60_000)));
    try {
      expect(readers.get('forced-0').info).toMatchObject({ type: 'embed', labels: ['negative', 'neutral', 'positive'] });
      const e = await inf<Embed>('/embed', { text: SHORT, consumer_group: 'forced' });
      const ref = await local.roberta.embed(SHORT);
      (e.body.result as number[][]).forEach((v, i) => expect(maxDiff(v, ref.vectors[i]!)).toBeLessThanOrEqual(1e-6));
      expect((await inf<Err>('/classify', { text: 'hi', consumer_group: 'forced' })).body.error.code).toBe('wrong_reader_type');
      expect(readers.get('bad-0').state).toBe('failed');
      expect(readers.get('bad-0').error).toMatchObject({ code: 'invalid_reader_config' });
    } finally {
      await readers.delete('forced-0');
      await readers.delete('bad-0');
    }
  });

  it('reads max_batch_size / batch_duration_millis from WEFT_* and applies them to readers that set none', () => {
    const cfg = loadConfig({ env: { WEFT_MAX_BATCH_SIZE: '8', WEFT_BATCH_DURATION_MILLIS: '3' } });
    expect([cfg.maxBatchSize, cfg.batchDurationMillis]).toEqual([8, 3]);
    expect(loadConfig({ env: {} })).toMatchObject({ maxBatchSize: null, batchDurationMillis: null });
    expect(() => loadConfig({ env: { WEFT_MAX_BATCH_SIZE: '0' } })).toThrow(/max_batch_size/);
    const svc = run.service;
    expect(svc.withReaderDefaults({ model: 'm', consumerGroup: 'g' })).toEqual({ model: 'm', consumerGroup: 'g', batchDurationMillis: 2 });
    expect(svc.withReaderDefaults({ model: 'm', consumerGroup: 'g', batchDurationMillis: 9 }).batchDurationMillis).toBe(9);
  });

  it('a rejected encoder call on the client side cancels it on the serving side', async () => {
    // Two in-memory endpoints joined back to back.
    const listeners: [((m: Msg) => void)[], ((m: Msg) => void)[]] = [[], []];
    const side = (me: 0 | 1): Endpoint => ({ post: (m) => queueMicrotask(() => listeners[1 - me]!.forEach((cb) => cb(structuredClone(m)))), onMessage: (cb) => listeners[me].push(cb) });
    let aborted = false;
    const info: ReaderInfo = { readerId: 'fake', model: 'fake', type: 'embed', device: 'none', backend: 'none', architecture: 'BertModel', contextLength: 8, vocabSize: 8, hasChatTemplate: false };
    const fake: Partial<EncoderReaderApi> = {
      info: () => info,
      embed: (_texts, opts) =>
        new Promise((_resolve, reject) =>
          opts?.signal?.addEventListener('abort', () => {
            aborted = true;
            reject(new Error('aborted'));
          }),
        ),
    };
    let ready: ReaderInfo | undefined;
    listeners[0].push((m) => {
      if (m.kind === 'ready') ready = m.content as ReaderInfo;
    });
    serveReader(fake as EncoderReaderApi, side(1));
    await new Promise((r) => setTimeout(r, 0));
    const remote = new RemoteReader(side(0), ready!);
    const ac = new AbortController();
    const call = remote.embed(['x'], { signal: ac.signal });
    await new Promise((r) => setTimeout(r, 5));
    ac.abort();
    await expect(call).rejects.toMatchObject({ code: 'cancelled' });
    await new Promise((r) => setTimeout(r, 5));
    expect(aborted).toBe(true);
    // A method the served reader lacks is wrong_reader_type, not a crash.
    await expect(remote.classify(['x'])).rejects.toMatchObject({ code: 'wrong_reader_type' });
    await expect(remote.tokenize('x')).rejects.toMatchObject({ code: 'wrong_reader_type' });
  });
});

describe('bundled default embedder', () => {
  it('starts USE-Lite as the `embed` group by default and serves /embed', async () => {
    const { startTestService } = await import('./helpers.ts');
    const t = await startTestService({ embeddingModel: 'use-lite', model: '' });
    try {
      const res = await t.apps.inference.request('/embed', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: ['The cat sat on the mat.', 'A kitten rested on the rug.', 'Stock markets fell sharply today.'], consumer_group: 'embed' }) });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { result: number[][]; dims: number };
      expect(body.dims).toBe(512);
      const cos = (a: number[], b: number[]): number => a.reduce((s, x, i) => s + x * b[i]!, 0);
      expect(cos(body.result[0]!, body.result[1]!)).toBeGreaterThan(cos(body.result[0]!, body.result[2]!));
    } finally {
      await t.svc.close();
    }
  });
});
