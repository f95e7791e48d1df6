/**
 * UseLiteModel: Universal Sentence Encoder Lite (converted by convert.ts) loaded onto a GPU
 * context and served with the same surface as EncoderModel (bert/encoder.ts): embed,
 * rerank (cosine of embeddings), classify (refused: no head), encode, hiddenStates,
 * destroy, plus `spec`, `tokenizer`, `dims`, `maxTokens`. `EncoderLike` names that surface,
 * so a reader can hold either model.
 *
 * A call tokenizes its texts (tokenizer.ts; inputs past the graph's 128 tokens are cut, as
 * the graph's ClipToMaxLength does, and reported as truncated) and queues them on an
 * EncoderBatcher, so concurrent calls share GPU batches. A batch is sorted by length and cut
 * into padded passes of at most `maxBatchTokens` token slots, mostly real ones (passes());
 * each pass reads back the hidden states and the host finishes: mean over the real tokens,
 * tanh dense, l2 normalization (`normalize: false` returns the tanh output). An empty text
 * (no tokens) skips the GPU: its mean is the zero vector, as in the graph.
 */
import { EncoderBatcher } from '../encoder_batcher.ts';
import { InvalidRequestError } from '../../errors.ts';
import { readJson, type ModelSource } from '../../formats/source.ts';
import type { GpuContext } from '../../gpu/context.ts';
import type { Tokenizer } from '../../tokenizer/tokenizer.ts';
import type { EncodedInput } from '../bert/config.ts';
import type { EncoderInput, EncoderModel } from '../bert/encoder.ts';
import { cosine, linear } from '../bert/pooling.ts';
import { modelTensors } from '../bert/weights.ts';
import type { WeightDType } from '../host_tensor.ts';
import { parseUseLiteConfig, type UseLiteConfig } from './config.ts';
import { UseEncoder, type UseBatch } from './forward.ts';
import { parseUseVocabulary, UseTokenizer } from './tokenizer.ts';
import { destroyUseWeights, loadUseWeights, type UseWeights } from './weights.ts';

/** What serving an encoder needs from a model; EncoderModel and UseLiteModel both provide it. */
export type EncoderLike = Pick<EncoderModel, 'kind' | 'dims' | 'maxTokens' | 'labels' | 'encode' | 'embed' | 'rerank' | 'classify' | 'hiddenStates' | 'destroy'> & {
  readonly spec: { readonly architecture: string; readonly cfg: { readonly vocabSize: number } };
  readonly tokenizer: Tokenizer;
};

export interface UseLiteLoadOptions {
  /** GPU weight dtype (default `auto`: f32). */
  dtype?: WeightDType;
  /** Inputs per batch (default 32). */
  maxBatchSize?: number;
  /** Longest wait before a partial batch runs, ms (default 5). */
  batchDurationMs?: number;
  /** Token slots (B * S) per GPU pass; sizes the activation buffers (default 4096). */
  maxBatchTokens?: number;
  /** Lower the input limit (tokens; the graph's own is 128). */
  maxTokens?: number;
}

interface Job {
  input: EncodedInput;
  normalize: boolean;
}

export class UseLiteModel implements EncoderLike {
  readonly kind = 'embed' as const;
  readonly dims: number;
  readonly maxTokens: number;
  readonly labels: readonly string[] = [];
  readonly spec: { architecture: string; cfg: UseLiteConfig };
  private readonly batcher: EncoderBatcher<Job, Float32Array>;
  private gpuQueue: Promise<unknown> = Promise.resolve();

  private constructor(
    readonly ctx: GpuContext,
    cfg: UseLiteConfig,
    readonly tokenizer: UseTokenizer,
    private readonly weights: UseWeights,
    private readonly forward: UseEncoder,
    opts: UseLiteLoadOptions,
  ) {
    this.spec = { architecture: cfg.architecture, cfg };
    this.dims = cfg.outputSize;
    this.maxTokens = Math.min(cfg.maxTokens, opts.maxTokens && opts.maxTokens >= 1 ? Math.floor(opts.maxTokens) : cfg.maxTokens);
    this.batcher = new EncoderBatcher((jobs) => this.runJobs(jobs), {
      ...(opts.maxBatchSize !== undefined ? { maxBatchSize: opts.maxBatchSize } : {}),
      ...(opts.batchDurationMs !== undefined ? { batchDurationMs: opts.batchDurationMs } : {}),
    });
  }

  /** Loads a converted directory (config.json, model.safetensors, vocab.json). */
  static async load(ctx: GpuContext, ms: ModelSource, opts: UseLiteLoadOptions = {}): Promise<UseLiteModel> {
    const cfg = parseUseLiteConfig(await readJson(ms, 'config.json'));
    const tokenizer = new UseTokenizer(parseUseVocabulary(await readJson(ms, 'vocab.json')));
    const weights = await loadUseWeights(ctx, cfg, await modelTensors(ms), opts.dtype ?? 'auto');
    try {
      const forward = new UseEncoder(ctx, cfg, weights, Math.max(cfg.maxTokens, opts.maxBatchTokens ?? 4096));
      return new UseLiteModel(ctx, cfg, tokenizer, weights, forward, opts);
    } catch (e) {
      destroyUseWeights(weights);
      throw e;
    }
  }

  /** Token ids of a text, cut to maxTokens (USE takes single texts: no pairs, no token types). */
  encode(input: EncoderInput): EncodedInput {
    if (typeof input !== 'string') throw new InvalidRequestError('invalid_input', 'Universal Sentence Encoder Lite encodes single texts, not pairs');
    const ids = this.tokenizer.encode(input);
    const truncated = ids.length > this.maxTokens;
    const kept = truncated ? ids.slice(0, this.maxTokens) : ids;
    return { ids: kept, typeIds: new Array<number>(kept.length).fill(0), truncated };
  }

  async embed(texts: string[], opts: { normalize?: boolean; signal?: AbortSignal } = {}): Promise<{ vectors: Float32Array[]; dims: number; truncated: boolean[]; tokens: number[] }> {
    const inputs = this.strings(texts).map((t) => this.encode(t));
    const jobs = inputs.map((input): Job => ({ input, normalize: opts.normalize !== false }));
    const vectors = await this.batcher.submit(jobs, opts.signal ? { signal: opts.signal } : {});
    return { vectors, dims: this.dims, truncated: inputs.map((i) => i.truncated), tokens: inputs.map((i) => i.ids.length) };
  }

  /** Documents ranked by the cosine similarity of their embedding to the query's (ties: lower index first). */
  async rerank(query: string, documents: string[], opts: { signal?: AbortSignal } = {}): Promise<{ scores: number[]; ranking: { index: number; score: number }[] }> {
    const [q] = this.strings([query]);
    const docs = this.strings(documents);
    const all = [q!, ...docs].map((t): Job => ({ input: this.encode(t), normalize: true }));
    const [qv, ...dv] = await this.batcher.submit(all, opts.signal ? { signal: opts.signal } : {});
    const scores = dv.map((v) => cosine(qv!, v));
    const ranking = scores.map((score, index) => ({ index, score })).sort((a, b) => b.score - a.score || a.index - b.index);
    return { scores, ranking };
  }

  async classify(_inputs: EncoderInput[], _opts: { signal?: AbortSignal } = {}): Promise<{ label: string; score: number; scores: Record<string, number> }[]> {
    throw new InvalidRequestError('not_a_classifier', 'classify needs a *ForSequenceClassification model; this is an embedding model');
  }

  /** Last hidden states of each input, [ids.length, D] f32 (before pooling). */
  async hiddenStates(inputs: readonly EncodedInput[]): Promise<Float32Array[]> {
    return this.exclusive(() => this.passes(inputs));
  }

  destroy(): void {
    this.batcher.close();
    this.forward.destroy();
    destroyUseWeights(this.weights);
  }

  private strings(v: unknown): string[] {
    if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) throw new InvalidRequestError('invalid_input', 'expected an array of strings');
    return v as string[];
  }

  /** Runs GPU work one call at a time (the activation buffers are shared). */
  private exclusive<T>(f: () => Promise<T>): Promise<T> {
    const run = this.gpuQueue.then(f, f);
    this.gpuQueue = run.catch(() => undefined);
    return run;
  }

  private async runJobs(jobs: Job[]): Promise<Float32Array[]> {
    const hidden = await this.exclusive(() => this.passes(jobs.map((j) => j.input)));
    return jobs.map((j, k) => this.pool(hidden[k]!, j.input.ids.length, j.normalize));
  }

  /** Mean over the n real rows, tanh dense, then v * rsqrt(max(|v|^2, eps)) as the graph does. */
  private pool(h: Float32Array, n: number, normalize: boolean): Float32Array {
    const D = this.spec.cfg.hiddenSize;
    const mean = new Float32Array(D);
    for (let d = 0; d < D; d++) {
      let s = 0;
      for (let t = 0; t < n; t++) s += h[t * D + d]!;
      mean[d] = s / Math.max(n, 1);
    }
    const v = linear(this.weights.head, mean, 'tanh');
    if (!normalize) return v;
    let ss = 0;
    for (const x of v) ss += x * x;
    const inv = 1 / Math.sqrt(Math.max(ss, this.spec.cfg.l2Eps));
    return v.map((x) => x * inv);
  }

  /**
   * Forward passes over `inputs`: sorted by length (longest first) and grouped greedily,
   * each group padded to its longest input, while rows * longest fits the capacity and the
   * real tokens fill at least MIN_FILL of the slots. On a real GPU a pass has a fixed cost
   * worth many token slots, so half-empty passes are fine (as in EncoderModel); on a CPU
   * emulator (SwiftShader, llvmpipe) every padded slot costs as much as a real token and a
   * pass almost nothing, so passes are packed tight. Returns per input its hidden states
   * [len, D] (empty inputs skip the GPU).
   */
  private async passes(inputs: readonly EncodedInput[]): Promise<Float32Array[]> {
    const D = this.spec.cfg.hiddenSize;
    const minFill = this.ctx.gpu.info.isCpu ? 0.9 : 0.5;
    const len = (i: number): number => inputs[i]!.ids.length;
    const order = inputs.map((_, i) => i).filter((i) => len(i) > 0).sort((a, b) => len(b) - len(a) || a - b);
    const out: Float32Array[] = inputs.map(() => new Float32Array(0));
    for (let start = 0; start < order.length; ) {
      const S = len(order[start]!);
      let real = S;
      let B = 1;
      for (; start + B < order.length && (B + 1) * S <= this.forward.maxTokens; B++) {
        const next = len(order[start + B]!);
        if (real + next < minFill * (B + 1) * S) break;
        real += next;
      }
      const group = order.slice(start, start + B);
      start += B;
      const batch = this.padded(group.map((i) => inputs[i]!.ids), S);
      const rec = this.ctx.recorder();
      const t = await this.forward.record(rec, batch);
      const pending = rec.readback(t, B * S * D * 4);
      rec.submit();
      const data = new Float32Array(await pending);
      group.forEach((i, b) => (out[i] = data.slice(b * S * D, (b * S + len(i)) * D)));
    }
    return out;
  }

  private padded(rows: readonly number[][], S: number): UseBatch {
    const B = rows.length;
    const b: UseBatch = { B, S, ids: new Uint32Array(B * S), positions: new Uint32Array(B * S), lengths: new Uint32Array(B) };
    rows.forEach((ids, r) => {
      if (ids.length > this.spec.cfg.maxTokens) throw new InvalidRequestError('invalid_input', `an input has ${ids.length} tokens; the model takes ${this.spec.cfg.maxTokens}`);
      b.lengths[r] = ids.length;
      ids.forEach((id, i) => (b.ids[r * S + i] = id));
      for (let i = 0; i < S; i++) b.positions[r * S + i] = i;
    });
    return b;
  }
}
