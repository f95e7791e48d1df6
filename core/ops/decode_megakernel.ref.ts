/**
 * CPU reference for decode_megakernel.ts: a decode-only step over S sequences
 * is, per sequence, the plain-TypeScript Llama forward (core/models/llama/
 * reference.ts, independent of every GPU kernel) of that sequence's tokens;
 * the step's logits row s is the logits after sequence s's last token.
 */
import type { DecoderConfig } from '../formats/hf_config.ts';
import { LlamaReference, type WeightGetter } from '../models/llama/reference.ts';

/** Logits [S, V] of the last token of each sequence (each sequence is its full token history). */
export function decodeStepRef(cfg: DecoderConfig, get: WeightGetter, sequences: readonly (readonly number[])[]): Float32Array {
  const V = cfg.vocabSize;
  const out = new Float32Array(sequences.length * V);
  sequences.forEach((ids, s) => {
    const ref = new LlamaReference(cfg, get);
    let last: Float32Array | null = null;
    for (const t of ids) last = ref.step(t);
    if (last) out.set(last, s * V);
  });
  return out;
}
