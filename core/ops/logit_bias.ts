/**
 * OpenAI's `logit_bias` on the GPU: adds each row's (token -> bias) entries to
 * its logits [B, V] f32 in place, recorded before sampling in the same step.
 * Shader: shaders/logit_bias.wgsl; reference: logitBiasRef below.
 */
import type { Recorder } from '../gpu/recorder.ts';
import type { Tensor } from '../gpu/tensor.ts';
import { uniformLayout } from '../gpu/uniforms.ts';
import { ceilDiv, grid1d } from './grid.ts';

const layout = uniformLayout([
  ['count', 'u32'],
  ['vocab', 'u32'],
] as const);

/** Per row: token id -> bias (absent or empty = none). */
export type RowBias = ReadonlyMap<number, number> | undefined;

/** Records the biases of `rows` (one per logit row) into logits [B, V]; no dispatch when none. */
export async function logitBias(rec: Recorder, logits: Tensor, rows: readonly RowBias[]): Promise<void> {
  const V = logits.shape[1]!;
  const entries: number[] = [];
  rows.forEach((m, r) => m?.forEach((b, t) => entries.push(r, t, b)));
  const count = entries.length / 3;
  if (count === 0) return;
  const words = new Uint32Array(entries.length);
  const f = new Float32Array(words.buffer);
  for (let i = 0; i < count; i++) {
    words[3 * i] = entries[3 * i]!;
    words[3 * i + 1] = entries[3 * i + 1]!;
    f[3 * i + 2] = entries[3 * i + 2]!;
  }
  const kernel = await rec.ctx.pipelines.get({ shader: 'logit_bias', defines: {}, layout });
  rec.dispatch(kernel, { count, vocab: V }, [logits, rec.upload(words)], grid1d(ceilDiv(count, 64)));
}

/** CPU reference: logits with the biases added (a copy). */
export function logitBiasRef(logits: Float32Array, V: number, rows: readonly RowBias[]): Float32Array {
  const out = logits.slice();
  rows.forEach((m, r) => m?.forEach((b, t) => {
    if (t < V) out[r * V + t] = Math.fround(out[r * V + t]! + b);
  }));
  return out;
}
