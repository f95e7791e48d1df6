/**
 * EncoderReaderApi served in-process by a loaded encoder (embedding model,
 * classifier or cross-encoder: EncoderModel on Weft's kernels, OnnxEncoderModel
 * on onnxruntime-web, UseLiteModel; the EncoderLike surface): the encoder
 * counterpart of LocalReader, run wherever the core runs (a Node worker
 * thread, a Web Worker, tests).
 *
 * Why a wrapper: results cross worker boundaries as plain data, so vectors
 * become number[] here (exact: every f32 is a double), and the reader keeps
 * the counters `stats()` reports. Concurrent calls share the model's dynamic
 * batcher (core/models/encoder_batcher.ts), so requests from many clients run
 * in common GPU batches and each still gets its own outputs.
 */
import { InvalidRequestError } from '../errors.ts';
import type { EncoderLike } from '../models/use/model.ts';
import type { ClassifyResult, EmbedResult, EncoderCallOptions, EncoderInput, EncoderReaderApi, ReaderInfo, ReaderStats, RerankResult } from './reader_api.ts';

export class LocalEncoderReader implements EncoderReaderApi {
  /** Calls in flight (the batcher queues their inputs). */
  private running = 0;
  /** Tokens of the texts embedded so far (rerank / classify do not report theirs). */
  private tokens = 0;

  constructor(
    readonly model: EncoderLike,
    private readonly meta: { readerId: string; model: string; device: string; backend: string },
    /** Reported type: the model's own kind unless the spec forced `embed` on a classifier. */
    private readonly type: 'embed' | 'classify' = model.kind,
    private readonly rawConfig: unknown = null,
  ) {}

  info(): ReaderInfo {
    const m = this.model;
    return {
      ...this.meta,
      type: this.type,
      architecture: m.spec.architecture,
      contextLength: m.maxTokens,
      vocabSize: m.spec.cfg.vocabSize,
      hasChatTemplate: false,
      dims: m.dims,
      ...(m.labels.length ? { labels: [...m.labels] } : {}),
    };
  }

  private async track<T>(f: () => Promise<T>): Promise<T> {
    this.running++;
    try {
      return await f();
    } finally {
      this.running--;
    }
  }

  embed(texts: string[], opts: EncoderCallOptions & { normalize?: boolean } = {}): Promise<EmbedResult> {
    return this.track(async () => {
      const r = await this.model.embed(texts, opts);
      this.tokens += r.tokens.reduce((a, b) => a + b, 0);
      return { vectors: r.vectors.map((v) => Array.from(v)), dims: r.dims, truncated: r.truncated, tokens: r.tokens };
    });
  }

  rerank(query: string, documents: string[], opts: EncoderCallOptions = {}): Promise<RerankResult> {
    return this.track(() => this.model.rerank(query, documents, opts));
  }

  classify(inputs: EncoderInput[], opts: EncoderCallOptions = {}): Promise<ClassifyResult[]> {
    return this.track(() => this.model.classify(inputs, opts));
  }

  async cancel(): Promise<boolean> {
    return false; // encoder calls are cancelled through their signal, not by request id
  }

  async tokenize(text: string, opts: { addSpecialTokens?: boolean } = {}): Promise<{ ids: number[]; tokens: string[] }> {
    const tok = this.model.tokenizer;
    const ids = tok.encode(text, { addSpecialTokens: opts.addSpecialTokens ?? true });
    return { ids, tokens: ids.map((i) => tok.idToToken(i) ?? '') };
  }

  async detokenize(ids: number[], opts: { skipSpecialTokens?: boolean } = {}): Promise<string> {
    const V = this.model.spec.cfg.vocabSize;
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || id >= V) throw new InvalidRequestError('invalid_token', `token id ${id} is outside the vocabulary (0..${V - 1})`, { field: 'tokens' });
    }
    return this.model.tokenizer.decode(ids, { skipSpecialTokens: opts.skipSpecialTokens ?? false });
  }

  async chatTemplate(): Promise<string> {
    throw new InvalidRequestError('wrong_reader_type', `reader ${this.meta.readerId} (type ${this.type}) has no chat template`, { reader_type: this.type });
  }

  async modelConfig(): Promise<unknown> {
    return this.rawConfig;
  }

  async stats(): Promise<ReaderStats> {
    return { running: this.running, waiting: 0, kvBlocksTotal: 0, kvBlocksFree: 0, prefixHitTokens: 0, computedTokens: this.tokens, gpuBusyMs: null };
  }
}
