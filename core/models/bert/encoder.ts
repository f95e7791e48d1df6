/**
 * EncoderModel: a BERT / RoBERTa / XLM-R checkpoint (plain, sentence-transformers or
 * *ForSequenceClassification) loaded onto a GPU context, serving embed, rerank and
 * classify. Every call tokenizes its inputs (pairs through the tokenizer's special-token
 * template, truncated to the model's limit; see config.ts), then queues them on a shared
 * EncoderBatcher so concurrent calls run in common batches. A batch is sorted by length
 * and cut into padded GPU passes of at most `maxBatchTokens` token slots (B * S), at least
 * half of them real tokens; each pass reads back either all hidden states (token pooling)
 * or only each row's first token (CLS pooling, classifier heads), and the host finishes
 * pooling / heads (pooling.ts).
 *
 * Scores: classify applies HF text-classification's function (softmax, or sigmoid for one
 * label / multi-label); rerank with a one-label cross-encoder scores sigmoid(logit) per
 * (query, document) pair, and with an embedding model the cosine similarity of embeddings.
 */
import { EncoderBatcher } from '../../engine/encoder_batcher.ts';
import { InvalidRequestError, ModelFormatError } from '../../errors.ts';
import type { ModelSource } from '../../formats/source.ts';
import type { GpuContext } from '../../gpu/context.ts';
import { loadTokenizerFromSource, type Tokenizer } from '../../tokenizer/tokenizer.ts';
import type { WeightDType } from '../host_tensor.ts';
import { buildInput, classifierActivation, readEncoderSpec, specialTemplate, type EncodedInput, type EncoderSpec, type PoolingMode, type SpecialTemplate, type StModule } from './config.ts';
import { BertEncoder, type PaddedBatch } from './forward.ts';
import { classifierLogits, classScores, cosine, runStModules, sigmoid, type ClassifierHead } from './pooling.ts';
import { destroyBertWeights, encoderPrefix, loadBertWeights, loadHostLinear, modelTensors, moduleTensors, type BertWeights, type HostLinear } from './weights.ts';

export type { EncodedInput } from './config.ts';

export interface EncoderLoadOptions {
  /** GPU weight dtype (default `auto`: f32). */
  dtype?: WeightDType;
  /** Inputs per batch (WEFT_MAX_BATCH_SIZE; default 32). */
  maxBatchSize?: number;
  /** Longest wait before a partial batch runs, ms (WEFT_BATCH_DURATION_MILLIS; default 5). */
  batchDurationMs?: number;
  /** Token slots (B * S) per GPU pass; sizes the activation buffers (default 4096). */
  maxBatchTokens?: number;
  /** Lower the model's input limit (tokens, specials included). */
  maxTokens?: number;
  /** Pooling for checkpoints without a sentence-transformers Pooling module (default: cls for classifiers, else mean). */
  pooling?: PoolingMode;
}

export type EncoderInput = string | [string, string];

interface Job {
  input: EncodedInput;
  want: 'embed' | 'logits';
  normalize?: boolean;
}

export class EncoderModel {
  readonly kind: 'embed' | 'classify';
  /** Width of embed() vectors. */
  readonly dims: number;
  /** Largest input in tokens, specials included; longer inputs are truncated. */
  readonly maxTokens: number;
  /** Class names of a classifier, by index; empty for embedding models. */
  readonly labels: readonly string[];
  private readonly batcher: EncoderBatcher<Job, Float32Array>;
  private readonly st: StModule[];
  private gpuQueue: Promise<unknown> = Promise.resolve();

  private constructor(
    readonly ctx: GpuContext,
    readonly spec: EncoderSpec,
    readonly tokenizer: Tokenizer,
    private readonly template: SpecialTemplate,
    private readonly weights: BertWeights,
    private readonly forward: BertEncoder,
    private readonly head: ClassifierHead | null,
    private readonly dense: Map<string, HostLinear>,
    opts: EncoderLoadOptions,
  ) {
    this.kind = head ? 'classify' : 'embed';
    this.maxTokens = spec.maxTokens;
    this.labels = head?.spec.labels ?? [];
    this.st = spec.st ?? [{ kind: 'pooling', modes: [opts.pooling ?? (spec.wantsClassifier ? 'cls' : 'mean')] }];
    const D = spec.cfg.hiddenSize;
    let dims = D;
    for (const m of this.st) dims = m.kind === 'pooling' ? m.modes.length * D : m.kind === 'dense' ? m.outFeatures : dims;
    this.dims = dims;
    this.batcher = new EncoderBatcher((jobs) => this.runJobs(jobs), {
      ...(opts.maxBatchSize !== undefined ? { maxBatchSize: opts.maxBatchSize } : {}),
      ...(opts.batchDurationMs !== undefined ? { batchDurationMs: opts.batchDurationMs } : {}),
    });
  }

  static async load(ctx: GpuContext, ms: ModelSource, opts: EncoderLoadOptions = {}): Promise<EncoderModel> {
    const spec = await readEncoderSpec(ms, opts.maxTokens !== undefined ? { maxTokens: opts.maxTokens } : {});
    const tokenizer = await loadTokenizerFromSource(ms);
    const template = specialTemplate(JSON.parse(await ms.readText('tokenizer.json')), tokenizer, spec.cfg.architecture === 'BertModel' ? 'bert' : 'roberta');
    if (spec.cfg.typeVocabSize < 2) template.zeroTypes = true; // one token-type row: every type is 0
    const src = await modelTensors(ms);
    const prefix = encoderPrefix(src);
    let head: ClassifierHead | null = null;
    if (spec.wantsClassifier) {
      const roberta = src.has('classifier.out_proj.weight');
      if (!roberta && !src.has('classifier.weight')) throw new ModelFormatError(`${spec.architecture}: no classifier weights in ${ms.name}`);
      if (!roberta && !src.has(`${prefix}pooler.dense.weight`)) throw new ModelFormatError(`${spec.architecture}: classifier without pooler weights`);
      const dense = await loadHostLinear(src, roberta ? 'classifier.dense' : `${prefix}pooler.dense`);
      const out = await loadHostLinear(src, roberta ? 'classifier.out_proj' : 'classifier');
      const n = out.outFeatures;
      const labels = spec.labels.length === n ? spec.labels : Array.from({ length: n }, (_, i) => `LABEL_${i}`);
      head = { spec: { style: roberta ? 'roberta' : 'bert', labels, activation: classifierActivation(spec.problemType, n) }, dense, out };
    }
    const dense = new Map<string, HostLinear>();
    for (const m of spec.st ?? []) {
      if (m.kind !== 'dense') continue;
      const l = await loadHostLinear(await moduleTensors(ms, `${m.path}/model.safetensors`), 'linear', m.bias);
      if (l.inFeatures !== m.inFeatures || l.outFeatures !== m.outFeatures) throw new ModelFormatError(`${m.path}: weight shape does not match its config`);
      dense.set(m.path, l);
    }
    const weights = await loadBertWeights(ctx, spec.cfg, src, prefix, opts.dtype ?? 'auto');
    const forward = new BertEncoder(ctx, spec.cfg, weights, Math.max(spec.maxTokens, opts.maxBatchTokens ?? 4096));
    return new EncoderModel(ctx, spec, tokenizer, template, weights, forward, head, dense, opts);
  }

  /** Token ids / types of a text or a (text, text) pair, truncated to maxTokens. */
  encode(input: EncoderInput): EncodedInput {
    const seg = (s: unknown): number[] => {
      if (typeof s !== 'string') throw new InvalidRequestError('invalid_input', 'encoder inputs must be strings or [string, string] pairs');
      return this.tokenizer.encode(s, { addSpecialTokens: false });
    };
    if (Array.isArray(input)) {
      if (input.length !== 2) throw new InvalidRequestError('invalid_input', 'a pair input must have exactly two strings');
      return buildInput(this.template, seg(input[0]), seg(input[1]), this.maxTokens);
    }
    return buildInput(this.template, seg(input), null, this.maxTokens);
  }

  async embed(texts: string[], opts: { normalize?: boolean; signal?: AbortSignal } = {}): Promise<{ vectors: Float32Array[]; dims: number; truncated: boolean[]; tokens: number[] }> {
    const inputs = this.strings(texts).map((t) => this.encode(t));
    const jobs = inputs.map((input): Job => ({ input, want: 'embed', ...(opts.normalize !== undefined ? { normalize: opts.normalize } : {}) }));
    const vectors = await this.batcher.submit(jobs, opts.signal ? { signal: opts.signal } : {});
    return { vectors, dims: this.dims, truncated: inputs.map((i) => i.truncated), tokens: inputs.map((i) => i.ids.length) };
  }

  async classify(inputs: EncoderInput[], opts: { signal?: AbortSignal } = {}): Promise<{ label: string; score: number; scores: Record<string, number> }[]> {
    const head = this.requireHead('classify');
    if (!Array.isArray(inputs)) throw new InvalidRequestError('invalid_input', 'inputs must be an array');
    const jobs = inputs.map((i): Job => ({ input: this.encode(i), want: 'logits' }));
    const logits = await this.batcher.submit(jobs, opts.signal ? { signal: opts.signal } : {});
    return logits.map((l) => {
      const s = classScores(l, head.spec.activation);
      const best = s.reduce((bi, v, i) => (v > s[bi]! ? i : bi), 0);
      return { label: head.spec.labels[best]!, score: s[best]!, scores: Object.fromEntries(head.spec.labels.map((n, i) => [n, s[i]!])) };
    });
  }

  /** Relevance of each document to the query, and the documents ranked by it (ties: lower index first). */
  async rerank(query: string, documents: string[], opts: { signal?: AbortSignal } = {}): Promise<{ scores: number[]; ranking: { index: number; score: number }[] }> {
    const [q] = this.strings([query]);
    const docs = this.strings(documents);
    const sig = opts.signal ? { signal: opts.signal } : {};
    let scores: number[];
    if (this.head) {
      if (this.head.out.outFeatures !== 1) {
        throw new InvalidRequestError('not_a_reranker', `rerank needs a one-label cross-encoder; this classifier has ${this.head.out.outFeatures} labels`);
      }
      const logits = await this.batcher.submit(docs.map((d): Job => ({ input: this.encode([q!, d]), want: 'logits' })), sig);
      scores = logits.map((l) => sigmoid(l[0]!));
    } else {
      const [qv, ...dv] = await this.batcher.submit([q!, ...docs].map((t): Job => ({ input: this.encode(t), want: 'embed' })), sig);
      scores = dv.map((v) => cosine(qv!, v));
    }
    const ranking = scores.map((score, index) => ({ index, score })).sort((a, b) => b.score - a.score || a.index - b.index);
    return { scores, ranking };
  }

  /** Last hidden states of each input, [ids.length, D] f32 (one GPU pass per length-sorted group). */
  async hiddenStates(inputs: readonly EncodedInput[]): Promise<Float32Array[]> {
    return this.exclusive(() => this.passes(inputs, 'all'));
  }

  destroy(): void {
    this.batcher.close();
    this.forward.destroy();
    destroyBertWeights(this.weights);
  }

  private strings(v: unknown): string[] {
    if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) throw new InvalidRequestError('invalid_input', 'expected an array of strings');
    return v as string[];
  }

  private requireHead(what: string): ClassifierHead {
    if (!this.head) throw new InvalidRequestError('not_a_classifier', `${what} needs a *ForSequenceClassification model; this is an embedding model`);
    return this.head;
  }

  /** Runs GPU work one call at a time (the encoder's activation buffers are shared). */
  private exclusive<T>(f: () => Promise<T>): Promise<T> {
    const run = this.gpuQueue.then(f, f);
    this.gpuQueue = run.catch(() => undefined);
    return run;
  }

  /** The batcher's runner: hidden states, then the host tail each job wants. */
  private async runJobs(jobs: Job[]): Promise<Float32Array[]> {
    const D = this.spec.cfg.hiddenSize;
    const firstOnly = jobs.every((j) => j.want === 'logits' || this.clsOnly());
    const hidden = await this.exclusive(() => this.passes(jobs.map((j) => j.input), firstOnly ? 'first' : 'all'));
    return jobs.map((j, k) => {
      const h = hidden[k]!;
      if (j.want === 'logits') return classifierLogits(this.head!, h.subarray(0, D));
      const n = firstOnly ? 1 : j.input.ids.length;
      return runStModules(h, n, D, this.st, this.dense, j.normalize);
    });
  }

  /** Pooling reads only the first token (CLS) of each input. */
  private clsOnly(): boolean {
    return this.st.every((m) => m.kind !== 'pooling' || m.modes.every((x) => x === 'cls'));
  }

  /**
   * Forward passes over `inputs`: sorted by length (longest first) and grouped greedily,
   * each group padded to its first (longest) input, while rows * longest fits the encoder's
   * capacity and at least half the token slots are real (a long input does not drag many
   * short ones through its padding). Returns per input its hidden states [len, D] ('all')
   * or its first row [1, D] ('first').
   */
  private async passes(inputs: readonly EncodedInput[], rows: 'all' | 'first'): Promise<Float32Array[]> {
    const D = this.spec.cfg.hiddenSize;
    const len = (i: number): number => inputs[i]!.ids.length;
    const order = inputs.map((_, i) => i).sort((a, b) => len(b) - len(a) || a - b);
    const out: Float32Array[] = new Array(inputs.length);
    for (let start = 0; start < order.length; ) {
      const S = Math.max(1, len(order[start]!));
      let real = S;
      let B = 1;
      for (; start + B < order.length && (B + 1) * S <= this.forward.maxTokens; B++) {
        const next = len(order[start + B]!);
        if (2 * (real + next) < (B + 1) * S) break;
        real += next;
      }
      const group = order.slice(start, start + B);
      start += B;
      const batch = this.padded(group.map((i) => inputs[i]!), S);
      const rec = this.ctx.recorder();
      const first = rows === 'first' ? Uint32Array.from(group, (_, b) => b * S) : undefined;
      const t = await this.forward.record(rec, batch, first);
      const pending = rec.readback(t);
      rec.submit();
      const data = new Float32Array(await pending);
      group.forEach((i, b) => {
        out[i] = first ? data.slice(b * D, (b + 1) * D) : data.slice(b * S * D, (b * S + len(i)) * D);
      });
    }
    return out;
  }

  /** Host arrays of one padded batch; positions per model family (RoBERTa: from padding_idx + 1). */
  private padded(rows: EncodedInput[], S: number): PaddedBatch {
    const { positionOffset, padTokenId } = this.spec.cfg;
    const B = rows.length;
    const pad = padTokenId ?? 0;
    const b: PaddedBatch = { B, S, ids: new Uint32Array(B * S).fill(pad), positions: new Uint32Array(B * S), typeIds: new Uint32Array(B * S), lengths: new Uint32Array(B) };
    rows.forEach((r, row) => {
      b.lengths[row] = r.ids.length;
      let count = 0; // create_position_ids_from_input_ids: pad tokens sit at padding_idx and are not counted
      for (let i = 0; i < S; i++) {
        const t = row * S + i;
        if (i < r.ids.length) {
          b.ids[t] = r.ids[i]!;
          b.typeIds[t] = r.typeIds[i]!;
          b.positions[t] = positionOffset === 0 ? i : r.ids[i] === pad ? pad : positionOffset + count++;
        } else b.positions[t] = positionOffset === 0 ? i : pad;
      }
    });
    return b;
  }
}
