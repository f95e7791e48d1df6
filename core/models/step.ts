import type { Tensor } from '../gpu/tensor.ts';

/**
 * What one engine step asks of a decoder model: a ragged batch of T tokens
 * from S sequences, as plain typed arrays (the only data that crosses from the
 * scheduler to the runner). Prompt chunks and single decode tokens mix freely.
 */
export interface StepInputs {
  /** [T] input token ids. */
  tokens: Uint32Array;
  /** [T] absolute position of each token in its sequence. */
  positions: Uint32Array;
  /** [T] index (0..S-1) of each token's sequence in this batch. */
  tokenSeq: Uint32Array;
  /** [T] KV-cache slot each token's key/value is written to (block * blockSize + offset). */
  slots: Uint32Array;
  /** [S * maxBlocksPerSeq] block ids per sequence, row-major; unused entries 0. */
  blockTables: Uint32Array;
  numSeqs: number;
  /** [R] indices into the T tokens whose next-token logits are needed. */
  logitRows: Uint32Array;
  /** Image-to-text: [E, hidden] f32 rows that replace the token embeddings of tokens embedAt (image features). */
  embedRows?: Float32Array;
  /** [E] distinct indices into the T tokens. */
  embedAt?: Uint32Array;
}

/** Options of a decoder's record(). */
export interface RecordOptions {
  /**
   * A u32 tensor of at least R elements: when the model fuses the argmax for this step
   * (fusesArgmax), it writes each logit row's greedy id there (sample.wgsl argmax_plain's rules)
   * and no logits. Only for steps whose rows are all plain greedy (ops/sample.ts isPlainGreedy).
   */
  argmaxInto?: Tensor;
}

/** Static sizes a model's step buffers and KV cache are allocated for. */
export interface StepGeometry {
  /** Most tokens in one step (the scheduler's token budget). */
  maxTokens: number;
  /** Most sequences in one step. */
  maxSeqs: number;
  /**
   * Most logit rows in one step (default maxSeqs). Speculative decoding
   * verifies k+1 positions of a sequence in one step: maxSeqs * (k + 1).
   */
  maxLogitRows?: number;
  /** KV blocks in the pool, and tokens per block. */
  numBlocks: number;
  blockSize: number;
  /** Columns of the block table: ceil(max context / blockSize). */
  maxBlocksPerSeq: number;
}

/** Steps a model recorded through the decode megakernel (and its dispatches: one per wave) and through the generic path. */
export interface DecodePathCounts {
  megakernelSteps: number;
  megakernelDispatches: number;
  genericSteps: number;
}
