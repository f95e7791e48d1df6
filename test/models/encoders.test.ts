/**
 * Golden tests for the encoder architectures (test/fixtures/encoders/<name>/, made by
 * scripts/golden/make_encoders.py from an independent float64 PyTorch implementation):
 *
 *   bert           BertModel, sentence-transformers mean pooling + Dense(tanh) + Normalize
 *   bert_reranker  BertForSequenceClassification, 1 label (cross-encoder), `bert.` prefix
 *   roberta        RobertaForSequenceClassification, 3 labels, byte-level BPE, `roberta.` prefix
 *   xlmr           XLMRobertaModel, sentence-transformers CLS pooling + Normalize, Unigram
 *
 * Per fixture and test backend, EncoderModel.load in f32, then:
 *  - token ids / types / truncation flags equal the golden (the generator tokenizes with
 *    its own Python WordPiece / BPE / Unigram), singles equal tokenizer.encode();
 *  - the last hidden states of all inputs, run as padded batches (lengths 5..64), match the
 *    golden, max |diff| <= TOL.f32 (values are O(1): LayerNorm outputs), and CLS / mean /
 *    max pooling of our rows match the golden pooling (padding excluded);
 *  - each input alone gives the same rows as inside the padded batch (padding invariance);
 *  - embed() vectors (Dense, Normalize) match the golden embeddings, classify() scores
 *    match the activation of the golden logits and pick their argmax label, rerank()
 *    orders documents like the golden pair logits (cross-encoder) or the cosine of the
 *    golden embeddings (embedding models); concurrent calls get their own results;
 *  - an over-long input is truncated to the model's limit and reported as such.
 * Observed errors are printed at the end.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EncoderModel } from '../../core/models/bert/encoder.ts';
import { classScores, cosine, pool1, sigmoid } from '../../core/models/bert/pooling.ts';
import { dirSource } from '../../server/fs_source.ts';
import { gpuFor, TEST_BACKENDS } from '../helpers/gpu.ts';

const FIXTURES = ['bert', 'bert_reranker', 'roberta', 'xlmr'] as const;
type Fixture = (typeof FIXTURES)[number];

/** Max |diff| against float64 goldens of O(1) values, per weight dtype. */
const TOL = { f32: 1e-4, f16: 5e-3 } as const;

interface GoldenInput {
  text?: string;
  pair?: [string, string];
  ids: number[];
  type_ids: number[];
  truncated: boolean;
  hidden: number[][];
  pooled: { cls: number[]; mean: number[]; max: number[] };
  embedding?: number[];
  logits?: number[];
}

interface Golden {
  version: number;
  architecture: string;
  max_tokens: number;
  pooling: 'cls' | 'mean' | null;
  id2label: Record<string, string> | null;
  inputs: GoldenInput[];
}

const dir = (name: Fixture): string => fileURLToPath(new URL(`../fixtures/encoders/${name}`, import.meta.url));
const readGolden = (name: Fixture): Golden => JSON.parse(readFileSync(`${dir(name)}/golden.json`, 'utf8')) as Golden;

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

const observed: string[] = [];
afterAll(() => {
  if (observed.length) console.info(`encoder golden errors (max |diff|):\n  ${observed.join('\n  ')}`);
});

describe.each(FIXTURES)('%s fixture', (name) => {
  const g = readGolden(name);
  const singles = g.inputs.filter((r) => r.text !== undefined);
  const pairs = g.inputs.filter((r) => r.pair !== undefined);
  const input = (r: GoldenInput): string | [string, string] => r.text ?? r.pair!;

  describe.each(TEST_BACKENDS)('on %s', (backend) => {
    let m: EncoderModel;
    beforeAll(async () => {
      m = await EncoderModel.load(await gpuFor(backend), dirSource(dir(name)), { batchDurationMs: 1 });
    });
    afterAll(() => m?.destroy());

    it('tokenizes like the reference (ids, token types, truncation)', () => {
      expect(g.version).toBe(1);
      expect(m.maxTokens).toBe(g.max_tokens);
      expect(m.kind).toBe(g.id2label ? 'classify' : 'embed');
      for (const r of g.inputs) {
        const e = m.encode(input(r));
        expect({ ids: e.ids, typeIds: e.typeIds, truncated: e.truncated }).toEqual({ ids: r.ids, typeIds: r.type_ids, truncated: r.truncated });
        if (r.text !== undefined && !r.truncated) expect(m.tokenizer.encode(r.text)).toEqual(r.ids);
      }
    });

    it('hidden states of padded batches match the golden; pooling excludes padding', async () => {
      const hs = await m.hiddenStates(g.inputs.map((r) => m.encode(input(r))));
      const D = m.spec.cfg.hiddenSize;
      let err = 0;
      let poolErr = 0;
      hs.forEach((h, i) => {
        const r = g.inputs[i]!;
        err = Math.max(err, maxDiff(h, r.hidden.flat()));
        for (const mode of ['cls', 'mean', 'max'] as const) poolErr = Math.max(poolErr, maxDiff(pool1(h, r.ids.length, D, mode), r.pooled[mode]));
      });
      observed.push(`${name} ${backend} f32: hidden ${err.toExponential(2)}, pooled ${poolErr.toExponential(2)}`);
      expect(err).toBeLessThanOrEqual(TOL.f32);
      expect(poolErr).toBeLessThanOrEqual(TOL.f32);
    });

    it('the gpu kernel variant and f16 weights match too (f16 within its tolerance)', async () => {
      const ctx = await gpuFor(backend);
      const enc = g.inputs.map((r) => m.encode(input(r)));
      const want = g.inputs.map((r) => r.hidden.flat());
      const err = (hs: Float32Array[]): number => Math.max(...hs.map((h, i) => maxDiff(h, want[i]!)));
      const saved = ctx.variant;
      ctx.variant = 'gpu';
      let gpuErr: number;
      try {
        gpuErr = err(await m.hiddenStates(enc));
      } finally {
        ctx.variant = saved;
      }
      const half = await EncoderModel.load(ctx, dirSource(dir(name)), { dtype: 'f16' });
      let f16Err: number;
      try {
        f16Err = err(await half.hiddenStates(enc));
      } finally {
        half.destroy();
      }
      observed.push(`${name} ${backend}: gpu variant f32 ${gpuErr.toExponential(2)}, f16 weights ${f16Err.toExponential(2)}`);
      expect(gpuErr).toBeLessThanOrEqual(TOL.f32);
      expect(f16Err).toBeLessThanOrEqual(TOL.f16);
    });

    it('each input alone gives the same rows as inside the padded batch', async () => {
      const enc = g.inputs.map((r) => m.encode(input(r)));
      const batched = await m.hiddenStates(enc);
      let err = 0;
      for (const [i, e] of enc.entries()) err = Math.max(err, maxDiff((await m.hiddenStates([e]))[0]!, batched[i]!));
      observed.push(`${name} ${backend}: alone vs batched ${err.toExponential(2)}`);
      expect(err).toBeLessThanOrEqual(1e-5);
    });

    it('embed / classify / rerank follow the goldens; concurrent calls get their own results', async () => {
      if (m.kind === 'embed') {
        const texts = singles.map((r) => r.text!);
        // Concurrent requests of different sizes share batches; each gets its own vectors.
        const [all, firstTwo, last] = await Promise.all([m.embed(texts), m.embed(texts.slice(0, 2)), m.embed(texts.slice(-1))]);
        expect(all.dims).toBe(g.inputs[0]!.embedding!.length);
        let err = 0;
        all.vectors.forEach((v, i) => (err = Math.max(err, maxDiff(v, singles[i]!.embedding!))));
        firstTwo.vectors.forEach((v, i) => (err = Math.max(err, maxDiff(v, singles[i]!.embedding!))));
        err = Math.max(err, maxDiff(last.vectors[0]!, singles[singles.length - 1]!.embedding!));
        observed.push(`${name} ${backend}: embedding ${err.toExponential(2)}`);
        expect(err).toBeLessThanOrEqual(TOL.f32);
        for (const v of all.vectors) expect(Math.hypot(...v)).toBeCloseTo(1, 5);
        expect(all.tokens).toEqual(singles.map((r) => r.ids.length));
        // normalize: false skips the Normalize module.
        const raw = await m.embed(texts.slice(0, 1), { normalize: false });
        expect(Math.hypot(...raw.vectors[0]!)).not.toBeCloseTo(1, 2);
        // Bi-encoder rerank: cosine of the golden embeddings.
        const want = singles.slice(1).map((r) => cosine(Float32Array.from(singles[0]!.embedding!), Float32Array.from(r.embedding!)));
        const rr = await m.rerank(texts[0]!, texts.slice(1));
        expect(maxDiff(rr.scores, want)).toBeLessThanOrEqual(TOL.f32);
        expect(rr.ranking.map((x) => x.index)).toEqual(want.map((s, i) => [s, i] as const).sort((a, b) => b[0] - a[0]).map(([, i]) => i));
        await expect(m.classify(['x'])).rejects.toMatchObject({ code: 'not_a_classifier' });
        return;
      }
      const labels = Object.keys(g.id2label!).sort((a, b) => +a - +b).map((k) => g.id2label![k]!);
      expect(m.labels).toEqual(labels);
      const act = labels.length === 1 ? 'sigmoid' : 'softmax';
      const [got, again] = await Promise.all([m.classify(g.inputs.map(input)), m.classify([input(g.inputs[1]!)])]);
      let err = 0;
      got.forEach((c, i) => {
        const want = classScores(Float32Array.from(g.inputs[i]!.logits!), act);
        const best = want.indexOf(Math.max(...want));
        expect(c.label).toBe(labels[best]);
        err = Math.max(err, maxDiff(labels.map((l) => c.scores[l]!), want), Math.abs(c.score - want[best]!));
      });
      expect(again[0]).toEqual(got[1]);
      observed.push(`${name} ${backend}: class scores ${err.toExponential(2)}`);
      expect(err).toBeLessThanOrEqual(TOL.f32);
      if (labels.length === 1) {
        const [query] = pairs.map((r) => r.pair![0]);
        const rr = await m.rerank(query!, pairs.map((r) => r.pair![1]));
        const want = pairs.map((r) => sigmoid(r.logits![0]!));
        expect(maxDiff(rr.scores, want)).toBeLessThanOrEqual(TOL.f32);
        expect(rr.ranking.map((x) => x.index)).toEqual(want.map((s, i) => [s, i] as const).sort((a, b) => b[0] - a[0]).map(([, i]) => i));
      } else {
        await expect(m.rerank('q', ['d'])).rejects.toMatchObject({ code: 'not_a_reranker' });
      }
    });

    it('truncates an over-long input to the model limit and reports it', async () => {
      const long = singles.find((r) => r.truncated)!;
      const text = `${long.text!} ${long.text!}`;
      if (m.kind === 'embed') {
        const r = await m.embed([text, singles[0]!.text!]);
        expect(r.truncated).toEqual([true, false]);
        expect(r.tokens).toEqual([g.max_tokens, singles[0]!.ids.length]);
        expect(maxDiff(r.vectors[0]!, long.embedding!)).toBeLessThanOrEqual(TOL.f32); // same first max_tokens tokens
      } else {
        expect(m.encode(text)).toMatchObject({ truncated: true, ids: long.ids });
        const [c] = await m.classify([text]);
        expect(c!.label).toBe((await m.classify([long.text!]))[0]!.label);
      }
      expect(m.encode(singles[0]!.text!).truncated).toBe(false);
    });
  });
});
