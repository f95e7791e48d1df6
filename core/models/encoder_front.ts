/**
 * EncoderFront: the request-facing half shared by the encoder backends that serve HF
 * encoder checkpoints, EncoderModel (bert/encoder.ts: Weft's GPU kernels) and
 * OnnxEncoderModel (onnx_encoder.ts: onnxruntime-web). It tokenizes (encode: the
 * tokenizer's special-token template, truncated to maxTokens), checks request inputs,
 * queues jobs on one EncoderBatcher, runs a backend's passes one at a time (exclusive),
 * and finishes each job on the host: sentence-transformers modules (pooling / Dense /
 * Normalize) for embeddings, HF text-classification scores for classify, sigmoid of a
 * one-label cross-encoder or cosine of embeddings for rerank.
 *
 * A backend supplies only what differs: its forward passes (passes(), grouped by
 * passGroups()), whether a batch may read back only each input's first row
 * (firstRowsOnly()), where a job's classifier logits come from (logits(): a host head over
 * the first hidden row, or the graph's logits), its extra request checks (embedCheck()),
 * hiddenStates() and release(). loadDenseModules() loads the sentence-transformers Dense
 * weights both read at load. UseLiteModel (use/model.ts) has its own tokenizer (no pairs),
 * jobs (no logits), pooling (mean + tanh dense) and pass grouping, so it is not one.
 */
import { EncoderBatcher } from './encoder_batcher.ts';
import { InvalidRequestError, ModelFormatError } from '../errors.ts';
import type { ModelSource } from '../formats/source.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import { buildInput, type ClassifierSpec, type EncodedInput, type EncoderHeadSpec, type PoolingMode, type SpecialTemplate, type StModule } from './bert/config.ts';
import { classScores, cosine, runStModules, sigmoid } from './bert/pooling.ts';
import { loadHostLinear, moduleTensors, type HostLinear } from './bert/weights.ts';

export type EncoderInput = string | [string, string];

/** One input queued on the batcher: its embedding, or its classifier logits. */
export interface EncoderJob {
  input: EncodedInput;
  want: 'embed' | 'logits';
  normalize?: boolean;
}

/** The load options the front reads (EncoderLoadOptions and OnnxEncoderLoadOptions carry them). */
export interface EncoderFrontOptions {
  /** Inputs per batch (default 32). */
  maxBatchSize?: number;
  /** Longest wait before a partial batch runs, ms (default 5). */
  batchDurationMs?: number;
  /** Pooling for checkpoints without a sentence-transformers Pooling module (default: cls for classifiers, else mean). */
  pooling?: PoolingMode;
}

/** A classifier's label names (by index) and score function; null for embedding models. */
export type EncoderClasses = Pick<ClassifierSpec, 'labels' | 'activation'> | null;

export abstract class EncoderFront<S extends EncoderHeadSpec> {
  readonly kind: 'embed' | 'classify';
  /** Width of embed() vectors. */
  readonly dims: number;
  /** Largest input in tokens, specials included; longer inputs are truncated. */
  readonly maxTokens: number;
  /** Class names of a classifier, by index; empty for embedding models. */
  readonly labels: readonly string[];
  /** Modules after the transformer: the checkpoint's, else one Pooling module. */
  private readonly st: StModule[];
  private readonly activation: ClassifierSpec['activation'] | null;
  private readonly batcher: EncoderBatcher<EncoderJob, Float32Array>;
  private queue: Promise<unknown> = Promise.resolve();

  /**
   * `width`: D of the hidden states passes() returns; `dims`, when given, replaces the
   * embedding width the modules give D (OnnxEncoderModel: 0 for logits-only graphs).
   */
  protected constructor(
    readonly spec: S,
    readonly tokenizer: Tokenizer,
    private readonly template: SpecialTemplate,
    classes: EncoderClasses,
    private readonly width: number,
    private readonly dense: Map<string, HostLinear>,
    opts: EncoderFrontOptions,
    dims?: number,
  ) {
    this.kind = classes ? 'classify' : 'embed';
    this.maxTokens = spec.maxTokens;
    this.labels = classes?.labels ?? [];
    this.activation = classes?.activation ?? null;
    this.st = spec.st ?? [{ kind: 'pooling', modes: [opts.pooling ?? (spec.wantsClassifier ? 'cls' : 'mean')] }];
    let d = width;
    for (const m of this.st) d = m.kind === 'pooling' ? m.modes.length * width : m.kind === 'dense' ? m.outFeatures : d;
    this.dims = dims ?? d;
    this.batcher = new EncoderBatcher((jobs) => this.runJobs(jobs), {
      ...(opts.maxBatchSize !== undefined ? { maxBatchSize: opts.maxBatchSize } : {}),
      ...(opts.batchDurationMs !== undefined ? { batchDurationMs: opts.batchDurationMs } : {}),
    });
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
    this.embedCheck();
    const inputs = strings(texts).map((t) => this.encode(t));
    const jobs = inputs.map((input): EncoderJob => ({ input, want: 'embed', ...(opts.normalize !== undefined ? { normalize: opts.normalize } : {}) }));
    const vectors = await this.batcher.submit(jobs, opts.signal ? { signal: opts.signal } : {});
    return { vectors, dims: this.dims, truncated: inputs.map((i) => i.truncated), tokens: inputs.map((i) => i.ids.length) };
  }

  async classify(inputs: EncoderInput[], opts: { signal?: AbortSignal } = {}): Promise<{ label: string; score: number; scores: Record<string, number> }[]> {
    const activation = this.activation;
    if (!activation) throw new InvalidRequestError('not_a_classifier', 'classify needs a *ForSequenceClassification model; this is an embedding model');
    if (!Array.isArray(inputs)) throw new InvalidRequestError('invalid_input', 'inputs must be an array');
    const jobs = inputs.map((i): EncoderJob => ({ input: this.encode(i), want: 'logits' }));
    const logits = await this.batcher.submit(jobs, opts.signal ? { signal: opts.signal } : {});
    return logits.map((l) => {
      const s = classScores(l, activation);
      const best = s.reduce((bi, v, i) => (v > s[bi]! ? i : bi), 0);
      return { label: this.labels[best]!, score: s[best]!, scores: Object.fromEntries(this.labels.map((n, i) => [n, s[i]!])) };
    });
  }

  /**
   * Relevance of each document to the query, and the documents ranked by it (ties: lower
   * index first): sigmoid(logit) of a one-label cross-encoder per (query, document) pair,
   * else the cosine similarity of embeddings.
   */
  async rerank(query: string, documents: string[], opts: { signal?: AbortSignal } = {}): Promise<{ scores: number[]; ranking: { index: number; score: number }[] }> {
    const [q] = strings([query]);
    const docs = strings(documents);
    const sig = opts.signal ? { signal: opts.signal } : {};
    let scores: number[];
    if (this.kind === 'classify') {
      if (this.labels.length !== 1) throw new InvalidRequestError('not_a_reranker', `rerank needs a one-label cross-encoder; this classifier has ${this.labels.length} labels`);
      const logits = await this.batcher.submit(docs.map((d): EncoderJob => ({ input: this.encode([q!, d]), want: 'logits' })), sig);
      scores = logits.map((l) => sigmoid(l[0]!));
    } else {
      const [qv, ...dv] = await this.batcher.submit([q!, ...docs].map((t): EncoderJob => ({ input: this.encode(t), want: 'embed' })), sig);
      scores = dv.map((v) => cosine(qv!, v));
    }
    const ranking = scores.map((score, index) => ({ index, score })).sort((a, b) => b.score - a.score || a.index - b.index);
    return { scores, ranking };
  }

  /** Last hidden states of each input, [ids.length, D] f32. */
  abstract hiddenStates(inputs: readonly EncodedInput[]): Promise<Float32Array[]>;

  destroy(): void {
    this.batcher.close();
    this.release();
  }

  /** Refuses embed() where the backend cannot embed (the default: every model can). */
  protected embedCheck(): void {}

  /**
   * Forward passes over `inputs`. Returns per input its hidden states [len, D] ('all'),
   * its first row [1, D] ('first'), or what logits() takes.
   */
  protected abstract passes(inputs: readonly EncodedInput[], rows: 'all' | 'first'): Promise<Float32Array[]>;

  /** Whether a batch of `jobs` needs only each input's first hidden row (passes 'first'). */
  protected abstract firstRowsOnly(jobs: readonly EncoderJob[]): boolean;

  /** Classifier logits of one input, from what passes() returned for it. */
  protected abstract logits(rows: Float32Array): Float32Array;

  /** Frees the backend (GPU buffers, ORT session); runs after the batcher is closed. */
  protected abstract release(): void;

  /** Runs backend work one call at a time (its activation buffers / session are shared). */
  protected exclusive<T>(f: () => Promise<T>): Promise<T> {
    const run = this.queue.then(f, f);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /**
   * `inputs` (by index) grouped for padded passes: sorted by length (longest first) and cut
   * greedily, each group padded to its first (longest) input, S tokens, while rows * S fits
   * `capacity` token slots and at least half the slots are real tokens (a long input does
   * not drag many short ones through its padding).
   */
  protected passGroups(inputs: readonly EncodedInput[], capacity: number): { group: number[]; S: number }[] {
    const len = (i: number): number => inputs[i]!.ids.length;
    const order = inputs.map((_, i) => i).sort((a, b) => len(b) - len(a) || a - b);
    const groups: { group: number[]; S: number }[] = [];
    for (let start = 0; start < order.length; ) {
      const S = Math.max(1, len(order[start]!));
      let real = S;
      let B = 1;
      for (; start + B < order.length && (B + 1) * S <= capacity; B++) {
        const next = len(order[start + B]!);
        if (2 * (real + next) < (B + 1) * S) break;
        real += next;
      }
      groups.push({ group: order.slice(start, start + B), S });
      start += B;
    }
    return groups;
  }

  /** Pooling reads only the first token (CLS) of each input. */
  protected clsOnly(): boolean {
    return this.st.every((m) => m.kind !== 'pooling' || m.modes.every((x) => x === 'cls'));
  }

  /** The batcher's runner: one exclusive run of passes, then the host tail each job wants. */
  private async runJobs(jobs: EncoderJob[]): Promise<Float32Array[]> {
    const D = this.width;
    const firstOnly = this.firstRowsOnly(jobs);
    const out = await this.exclusive(() => this.passes(jobs.map((j) => j.input), firstOnly ? 'first' : 'all'));
    return jobs.map((j, k) => {
      const h = out[k]!;
      if (j.want === 'logits') return this.logits(h);
      const n = firstOnly ? 1 : j.input.ids.length;
      return runStModules(h, n, D, this.st, this.dense, j.normalize);
    });
  }
}

/** The weights of the sentence-transformers Dense modules in `st` (host linears), by module path. */
export async function loadDenseModules(ms: ModelSource, st: readonly StModule[] | null): Promise<Map<string, HostLinear>> {
  const dense = new Map<string, HostLinear>();
  for (const m of st ?? []) {
    if (m.kind !== 'dense') continue;
    const l = await loadHostLinear(await moduleTensors(ms, `${m.path}/model.safetensors`), 'linear', m.bias);
    if (l.inFeatures !== m.inFeatures || l.outFeatures !== m.outFeatures) throw new ModelFormatError(`${m.path}: weight shape does not match its config`);
    dense.set(m.path, l);
  }
  return dense;
}

function strings(v: unknown): string[] {
  if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) throw new InvalidRequestError('invalid_input', 'expected an array of strings');
  return v as string[];
}
