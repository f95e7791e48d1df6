/**
 * The ONNX encoder fallback (core/models/onnx_encoder.ts) against the native kernels on the
 * same weights, and against the float64 goldens of those weights.
 *
 * Fixtures: test/fixtures/encoders/{bert,bert_reranker,roberta}_onnx are the bert,
 * bert_reranker (one-label cross-encoder) and roberta (3-label classifier with id2label,
 * RoBERTa positions, one token type) fixtures exported by
 * scripts/golden/export_encoder_onnx.py (graph only: no safetensors, so loadEncoder must
 * pick ONNX for them); goldens are read from the source fixtures. Checked, on
 * onnxruntime-web's WASM EP:
 *  - tokenization equals the native model's (same template / truncation code);
 *  - hidden states of padded batches, embeddings (mean pooling + Dense + Normalize) agree
 *    with EncoderModel on the first test backend (cosine >= 0.99999, max |diff| <= 1e-4)
 *    and with golden.json (<= 1e-4);
 *  - cross-encoder rerank scores and classifier scores / labels agree with EncoderModel on
 *    the same weights (max |diff| <= 1e-4, same labels, same ranking) and follow the
 *    golden logits;
 *  - loadEncoder picks native for safetensors BERT, ONNX for graph-only directories and
 *    unsupported architectures, and obeys `backend`.
 * WebGPU EP (Dawn OpenGL ES, on the test's own device): the same embeddings against the
 * golden. It works, but ORT's session creation and first run compile its pipelines while
 * blocking the event loop (~60 s here for the 2-layer fixture on an idle machine, ~290 s
 * under load), which would stall vitest's worker RPC; so it runs in a child process
 * (onnx_webgpu_child.ts, awaited asynchronously) with a hard 600 s timeout.
 * WEFT_TEST_ORT_WEBGPU=0 skips it.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EncoderModel } from '../../core/models/bert/encoder.ts';
import { cosine, sigmoid, softmax } from '../../core/models/bert/pooling.ts';
import { chooseEncoderBackend, loadEncoder } from '../../core/models/load_encoder.ts';
import { OnnxEncoderModel } from '../../core/models/onnx_encoder.ts';
import { filesSource } from '../../core/formats/source.ts';
import { dirSource } from '../../server/fs_source.ts';
import { gpuFor, TEST_BACKENDS } from '../helpers/gpu.ts';

const dir = (name: string): string => fileURLToPath(new URL(`../fixtures/encoders/${name}`, import.meta.url));

interface GoldenInput {
  text?: string;
  pair?: [string, string];
  ids: number[];
  hidden: number[][];
  embedding?: number[];
  logits?: number[];
}
const golden = (name: string): { inputs: GoldenInput[] } => JSON.parse(readFileSync(`${dir(name)}/golden.json`, 'utf8'));

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

const observed: string[] = [];
afterAll(() => {
  if (observed.length) console.info(`onnx encoder agreement:\n  ${observed.join('\n  ')}`);
});

const backend = TEST_BACKENDS[0] ?? 'swiftshader';

describe('ONNX fallback (WASM EP) vs native kernels and goldens: bert', () => {
  const g = golden('bert');
  const singles = g.inputs.filter((r) => r.text !== undefined);
  let onnx: OnnxEncoderModel;
  let native: EncoderModel;
  beforeAll(async () => {
    const ctx = await gpuFor(backend);
    const m = await loadEncoder(ctx, dirSource(dir('bert_onnx')), { batchDurationMs: 1 });
    expect(m).toBeInstanceOf(OnnxEncoderModel);
    onnx = m as OnnxEncoderModel;
    native = await EncoderModel.load(ctx, dirSource(dir('bert')), { batchDurationMs: 1 });
  });
  afterAll(() => {
    onnx?.destroy();
    native?.destroy();
  });

  it('has the native model shape and tokenization', () => {
    expect(onnx.executionProvider).toBe('wasm');
    expect([onnx.kind, onnx.dims, onnx.maxTokens, onnx.hiddenSize]).toEqual([native.kind, native.dims, native.maxTokens, 32]);
    for (const r of g.inputs) expect(onnx.encode(r.text ?? r.pair!)).toEqual(native.encode(r.text ?? r.pair!));
  });

  it('hidden states of padded batches agree with the native path and the golden', async () => {
    const enc = g.inputs.map((r) => onnx.encode(r.text ?? r.pair!));
    const [a, b] = [await onnx.hiddenStates(enc), await native.hiddenStates(enc)];
    const vsNative = Math.max(...a.map((h, i) => maxDiff(h, b[i]!)));
    const vsGolden = Math.max(...a.map((h, i) => maxDiff(h, g.inputs[i]!.hidden.flat())));
    observed.push(`bert hidden: onnx-wasm vs native(${backend}) ${vsNative.toExponential(2)}, vs golden ${vsGolden.toExponential(2)}`);
    expect(vsNative).toBeLessThanOrEqual(1e-4);
    expect(vsGolden).toBeLessThanOrEqual(1e-4);
  });

  it('embeddings agree (cosine >= 0.99999, max |diff| <= 1e-4); rerank by cosine', async () => {
    const texts = singles.map((r) => r.text!);
    const [a, b] = await Promise.all([onnx.embed(texts), native.embed(texts)]);
    expect(a.dims).toBe(16);
    expect(a.tokens).toEqual(b.tokens);
    expect(a.truncated).toEqual(b.truncated);
    let minCos = 1;
    let diff = 0;
    let vsGolden = 0;
    a.vectors.forEach((v, i) => {
      minCos = Math.min(minCos, cosine(v, b.vectors[i]!));
      diff = Math.max(diff, maxDiff(v, b.vectors[i]!));
      vsGolden = Math.max(vsGolden, maxDiff(v, singles[i]!.embedding!));
    });
    observed.push(`bert embeddings: min cosine ${minCos.toFixed(9)}, max |diff| vs native ${diff.toExponential(2)}, vs golden ${vsGolden.toExponential(2)}`);
    expect(minCos).toBeGreaterThanOrEqual(0.99999);
    expect(diff).toBeLessThanOrEqual(1e-4);
    expect(vsGolden).toBeLessThanOrEqual(1e-4);
    const raw = await onnx.embed(texts.slice(0, 1), { normalize: false });
    expect(maxDiff(raw.vectors[0]!, (await native.embed(texts.slice(0, 1), { normalize: false })).vectors[0]!)).toBeLessThanOrEqual(1e-4);
    const [ro, rn] = [await onnx.rerank(texts[0]!, texts.slice(1)), await native.rerank(texts[0]!, texts.slice(1))];
    expect(maxDiff(ro.scores, rn.scores)).toBeLessThanOrEqual(1e-4);
    expect(ro.ranking.map((r) => r.index)).toEqual(rn.ranking.map((r) => r.index));
    await expect(onnx.classify(['x'])).rejects.toMatchObject({ code: 'not_a_classifier' });
  });
});

describe('ONNX fallback (WASM EP): bert_reranker cross-encoder', () => {
  const g = golden('bert_reranker');
  const pairs = g.inputs.filter((r) => r.pair !== undefined);
  let m: OnnxEncoderModel;
  let native: EncoderModel;
  beforeAll(async () => {
    const ctx = await gpuFor(backend);
    m = (await loadEncoder(ctx, dirSource(dir('bert_reranker_onnx')), { batchDurationMs: 1 })) as OnnxEncoderModel;
    native = await EncoderModel.load(ctx, dirSource(dir('bert_reranker')), { batchDurationMs: 1 });
  });
  afterAll(() => {
    m?.destroy();
    native?.destroy();
  });

  it('rerank scores and order agree with the native cross-encoder', async () => {
    const query = pairs[0]!.pair![0];
    const docs = [...pairs.map((r) => r.pair![1]), 'an unrelated sentence about trains', ''];
    const [a, b] = [await m.rerank(query, docs), await native.rerank(query, docs)];
    const d = maxDiff(a.scores, b.scores);
    observed.push(`bert_reranker rerank: onnx-wasm vs native(${backend}) max |diff| ${d.toExponential(2)}`);
    expect(d).toBeLessThanOrEqual(1e-4);
    expect(a.ranking.map((r) => r.index)).toEqual(b.ranking.map((r) => r.index));
  });

  it('classify and rerank follow the golden logits', async () => {
    expect([m.kind, m.labels]).toEqual(['classify', ['LABEL_0']]);
    const got = await m.classify(g.inputs.map((r) => r.text ?? r.pair!));
    const err = Math.max(...got.map((c, i) => Math.abs(c.score - sigmoid(g.inputs[i]!.logits![0]!))));
    observed.push(`bert_reranker scores vs golden ${err.toExponential(2)}`);
    expect(err).toBeLessThanOrEqual(1e-4);
    const rr = await m.rerank(pairs[0]!.pair![0], pairs.map((r) => r.pair![1]));
    const want = pairs.map((r) => sigmoid(r.logits![0]!));
    expect(maxDiff(rr.scores, want)).toBeLessThanOrEqual(1e-4);
    expect(rr.ranking.map((x) => x.index)).toEqual(want.map((s, i) => [s, i] as const).sort((a, b) => b[0] - a[0]).map(([, i]) => i));
    await expect(m.embed(['x'])).rejects.toMatchObject({ code: 'not_an_embedding_model' });
  });
});

describe('ONNX fallback (WASM EP): roberta 3-label classifier', () => {
  const g = golden('roberta');
  const inputs = g.inputs.map((r) => r.text ?? r.pair!);
  let m: OnnxEncoderModel;
  let native: EncoderModel;
  beforeAll(async () => {
    const ctx = await gpuFor(backend);
    m = (await loadEncoder(ctx, dirSource(dir('roberta_onnx')), { batchDurationMs: 1 })) as OnnxEncoderModel;
    native = await EncoderModel.load(ctx, dirSource(dir('roberta')), { batchDurationMs: 1 });
  });
  afterAll(() => {
    m?.destroy();
    native?.destroy();
  });

  it('labels and scores agree with the native classifier and the golden logits', async () => {
    expect(m).toBeInstanceOf(OnnxEncoderModel);
    expect([m.kind, m.labels, m.maxTokens]).toEqual(['classify', ['negative', 'neutral', 'positive'], native.maxTokens]);
    for (const x of inputs) expect(m.encode(x)).toEqual(native.encode(x)); // RoBERTa template, pairs, truncation
    expect(inputs.some((x) => m.encode(x).truncated)).toBe(true);
    // Concurrent calls share the batcher; each still gets its own rows.
    const [a, b, half] = await Promise.all([m.classify(inputs), native.classify(inputs), m.classify(inputs.slice(0, 5))]);
    let d = 0;
    let vsGolden = 0;
    a.forEach((c, i) => {
      expect(c.label).toBe(b[i]!.label);
      const want = softmax(g.inputs[i]!.logits!);
      const names = ['negative', 'neutral', 'positive'];
      expect(c.label).toBe(names[want.indexOf(Math.max(...want))]);
      for (const [k, n] of names.entries()) {
        d = Math.max(d, Math.abs(c.scores[n]! - b[i]!.scores[n]!));
        vsGolden = Math.max(vsGolden, Math.abs(c.scores[n]! - want[k]!));
      }
    });
    observed.push(`roberta classify: onnx-wasm vs native(${backend}) max |diff| ${d.toExponential(2)}, vs golden ${vsGolden.toExponential(2)}`);
    expect(d).toBeLessThanOrEqual(1e-4);
    expect(vsGolden).toBeLessThanOrEqual(1e-4);
    half.forEach((c, i) => {
      expect(c.label).toBe(a[i]!.label);
      expect(maxDiff(Object.values(c.scores), Object.values(a[i]!.scores))).toBeLessThanOrEqual(1e-5);
    });
    await expect(m.rerank('q', ['d'])).rejects.toMatchObject({ code: 'not_a_reranker' });
  });
});

describe('loadEncoder backend choice', () => {
  const files = (name: string, patch: (cfg: Record<string, unknown>) => void, extra: Record<string, string> = {}) => {
    const cfg = JSON.parse(readFileSync(`${dir('bert')}/config.json`, 'utf8'));
    patch(cfg);
    const m = new Map<string, Uint8Array>();
    m.set('config.json', new TextEncoder().encode(JSON.stringify(cfg)));
    for (const f of ['tokenizer.json', 'tokenizer_config.json', 'model.safetensors']) m.set(f, readFileSync(`${dir('bert')}/${f}`));
    for (const [k, v] of Object.entries(extra)) m.set(k, readFileSync(v));
    return filesSource(m, name);
  };
  const graph = { 'onnx/model.onnx': `${dir('bert_onnx')}/onnx/model.onnx` };

  it('native for supported safetensors checkpoints, ONNX for graph-only or unsupported ones', async () => {
    expect(await chooseEncoderBackend(dirSource(dir('bert')))).toBe('native');
    expect(await chooseEncoderBackend(dirSource(dir('bert_onnx')))).toBe('onnx');
    expect(await chooseEncoderBackend(files('both', () => {}, graph))).toBe('native');
    expect(await chooseEncoderBackend(files('both', () => {}, graph), { backend: 'onnx' })).toBe('onnx');
    const other = files('distil', (c) => Object.assign(c, { architectures: ['DistilBertModel'], model_type: 'distilbert' }), graph);
    expect(await chooseEncoderBackend(other)).toBe('onnx');
    const m = await loadEncoder(await gpuFor(backend), other);
    try {
      expect(m).toBeInstanceOf(OnnxEncoderModel);
      expect(m.dims).toBe(32); // no modules.json: mean pooling of the hidden states
    } finally {
      m.destroy();
    }
    const none = files('none', (c) => Object.assign(c, { architectures: ['DistilBertModel'], model_type: 'distilbert' }));
    await expect(loadEncoder(await gpuFor(backend), none)).rejects.toThrow(/unsupported encoder architecture/);
  });
});

describe.skipIf(process.env.WEFT_TEST_ORT_WEBGPU === '0')('ONNX fallback on the WebGPU EP (Dawn OpenGL ES), in a child process', () => {
  it('agrees with the golden embeddings', async () => {
    const script = fileURLToPath(new URL('./onnx_webgpu_child.ts', import.meta.url));
    // Asynchronously: this worker's event loop must stay free for vitest's RPC meanwhile.
    const r = await new Promise<{ stdout: string; stderr: string; why: string }>((resolve) => {
      execFile(process.execPath, ['--import', 'tsx', script, dir('bert_onnx'), `${dir('bert')}/golden.json`, 'opengles'], { timeout: 600_000, killSignal: 'SIGKILL', maxBuffer: 1 << 24 }, (e, stdout, stderr) =>
        resolve({ stdout, stderr, why: e ? `${e.signal ?? `exit ${String(e.code)}`}` : 'ok' }),
      );
    });
    const line = r.stdout.split('\n').find((l) => l.startsWith('RESULT '));
    observed.push(`webgpu EP (opengles) child: ${line?.slice(7) ?? `no result (${r.why})`}`);
    expect(line, `the WebGPU EP child gave no result: ${r.stderr.slice(-500)}`).toBeDefined();
    const res = JSON.parse(line!.slice(7)) as { ep: string; maxDiff: number };
    expect(res.ep).toBe('webgpu');
    expect(res.maxDiff).toBeLessThanOrEqual(1e-4);
  }, 620_000);
});
