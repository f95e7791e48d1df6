/**
 * The embedder the document pipeline depends on, and its implementation over
 * an EncoderModel (a sentence-transformers BERT-family checkpoint on a GPU
 * context).
 *
 * Why an interface: the server embeds through encoder readers in worker
 * threads (server/documents/reader_embedder.ts), never on the HTTP event
 * loop; tools and benchmarks may wrap a model in-process (encoderEmbedder);
 * tests plug in a cheap deterministic embedder. The pipeline sees one shape.
 */
import type { TokenCounter } from './chunker.ts';

export interface Embedder {
  /** Stable identity of the model (stored with the vectors; a store refuses another one). */
  readonly id: string;
  /** Width of the vectors. */
  readonly dims: number;
  /** Longest text in tokens that embeds without truncation (special tokens excluded). */
  readonly maxTokens: number;
  /** The tokenizer chunk sizes are measured with. */
  readonly tokenizer: TokenCounter;
  /** Where the model runs, for status and logs (e.g. `reader group embed`); absent = in this thread. */
  readonly runsOn?: string;
  /** Unit-length vectors, one per text, in order. */
  embed(texts: string[], opts?: { signal?: AbortSignal }): Promise<Float32Array[]>;
  close(): Promise<void>;
}

/**
 * What encoderEmbedder needs of a model: the surface EncoderModel (bert/encoder.ts) has,
 * and the other encoder backends copy (ONNX, USE-Lite), so any of them can be wrapped.
 */
export interface EmbeddingModel {
  readonly kind: 'embed' | 'classify';
  readonly dims: number;
  /** Input limit in tokens, special tokens included. */
  readonly maxTokens: number;
  readonly tokenizer: { encode(text: string, opts?: { addSpecialTokens?: boolean }): number[] };
  encode(text: string): { ids: readonly number[] };
  embed(texts: string[], opts?: { normalize?: boolean; signal?: AbortSignal }): Promise<{ vectors: Float32Array[] }>;
  destroy(): void;
}

/** An Embedder over a loaded encoder model (normalized vectors; the model's dynamic batcher merges concurrent calls). */
export function encoderEmbedder(model: EmbeddingModel, id: string): Embedder {
  if (model.kind !== 'embed') throw new TypeError(`${id} is a classifier, not an embedding model`);
  const specials = model.encode('').ids.length;
  return {
    id,
    dims: model.dims,
    maxTokens: model.maxTokens - specials,
    tokenizer: { count: (text) => model.tokenizer.encode(text, { addSpecialTokens: false }).length },
    async embed(texts, opts = {}) {
      const r = await model.embed(texts, { normalize: true, ...(opts.signal ? { signal: opts.signal } : {}) });
      return r.vectors;
    },
    async close() {
      model.destroy();
    },
  };
}

/** Scales `v` to unit length (zero vectors stay zero). */
export function normalize(v: Float32Array): Float32Array {
  let n = 0;
  for (const x of v) n += x * x;
  n = Math.sqrt(n);
  if (n > 0) for (let i = 0; i < v.length; i++) v[i] = v[i]! / n;
  return v;
}
