/**
 * Log-probabilities on the GPU, recorded right after sampling in the same
 * step: for each logit row [B, V] f32 and its sampled id, the log-softmax of
 * the raw logits at that id and the K most likely ids with theirs (K <= 20),
 * so a step reads back B * (2 + 2K) words instead of B * V logits. Raw means
 * the model's output before temperature, penalties, top-k/p and constraint
 * masks (vLLM's default, `raw_logprobs`). Shader: shaders/logprobs.wgsl;
 * reference: logprobs.ref.ts.
 */
import type { Recorder } from '../gpu/recorder.ts';
import { numel, type Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { grid1d } from './grid.ts';

export const MAX_TOP_LOGPROBS = 20;

const layout = uniformLayout([
  ['rows', 'u32'],
  ['vocab', 'u32'],
  ['k', 'u32'],
] as const);

/** u32 words per output row for `k` alternatives. */
export const logprobWords = (k: number): number => 2 + 2 * k;

/** One row's result. `top`: best first (ties: lower id first). */
export interface RowLogprobs {
  id: number;
  logprob: number;
  top: { id: number; logprob: number }[];
}

/** Records the kernel: logits [B, V] f32, ids [>= B] u32 -> out [B * (2 + 2k)] u32. */
export async function logprobs(rec: Recorder, logits: Tensor, ids: Tensor, k: number, out: Tensor): Promise<void> {
  const [B, V] = logits.shape;
  if (logits.dtype !== 'f32' || logits.shape.length !== 2 || !B || !V) throw new Error(`logprobs: logits must be [B, V] f32, got [${logits.shape.join(', ')}] ${logits.dtype}`);
  if (!Number.isInteger(k) || k < 0 || k > MAX_TOP_LOGPROBS) throw new Error(`logprobs: k must be an integer in [0, ${MAX_TOP_LOGPROBS}]`);
  if (ids.dtype !== 'u32' || numel(ids.shape) < B) throw new Error(`logprobs: ids must be u32 with >= ${B} elements`);
  if (out.dtype !== 'u32' || numel(out.shape) < B * logprobWords(k)) throw new Error(`logprobs: out must be u32 with >= ${B * logprobWords(k)} elements`);
  const WG = rec.ctx.variant === 'gpu' ? 256 : 64;
  const kernel = await rec.ctx.pipelines.get({ shader: 'logprobs', defines: { WG }, layout });
  rec.dispatch(kernel, { rows: B, vocab: V, k: Math.min(k, V) }, [logits, ids, out], grid1d(B));
}

/** Unpacks the kernel's words (k alternatives per row). */
export function unpackLogprobs(words: Uint32Array, rows: number, k: number): RowLogprobs[] {
  const f = new Float32Array(words.buffer, words.byteOffset, words.length);
  const w = logprobWords(k);
  return Array.from({ length: rows }, (_, r) => ({
    logprob: f[r * w]!,
    id: words[r * w + 1]!,
    top: Array.from({ length: k }, (_, j) => ({ id: words[r * w + 2 + 2 * j]!, logprob: f[r * w + 3 + 2 * j]! })),
  }));
}
