/**
 * Warm-up: runs a few tiny requests through a freshly loaded engine so every
 * pipeline the common request shapes use is compiled before the reader calls
 * itself ready, and the first real request pays no shader compilation (a
 * first 40-token request otherwise took 7 s against 0.5 s for the next).
 *
 * Which pipelines a step uses depends on its shape: on software adapters the
 * decode megakernel is specialised by the rows of a prompt wave (1..4,
 * MEGAKERNEL_MAX_CHUNK) and by greedy vs sampled (ARGMAX); a prompt past the
 * megakernel's waves runs the generic path (embedding, matmul, attention,
 * norm kernels); sampling adds the sample kernel. So the warm-up runs prompts
 * of 1..4 tokens and one longer than the waves hold, each greedy and
 * sampled, two new tokens each (a prefill step and a decode step). Token-id
 * prompts keep lengths exact whatever the tokenizer.
 */
import type { PipelineCache } from '../gpu/pipelines.ts';
import { MEGAKERNEL_MAX_CHUNK, MEGAKERNEL_MAX_WAVES } from '../models/llama/megakernel_waves.ts';
import type { Engine } from './engine.ts';
import type { ProgressCallback } from '../progress.ts';

export interface WarmUpResult {
  /** Pipelines compiled by the warm-up. */
  compiled: number;
  /** Warm-up requests run. */
  requests: number;
  ms: number;
}

/** Prompt lengths (tokens) the warm-up runs: every wave size, then one past the waves. */
export function warmUpLengths(maxContext: number): number[] {
  const lens = Array.from({ length: MEGAKERNEL_MAX_CHUNK }, (_, i) => i + 1);
  lens.push(MEGAKERNEL_MAX_CHUNK * MEGAKERNEL_MAX_WAVES + 1);
  return lens.filter((n) => n + 2 <= maxContext);
}

/**
 * Runs the warm-up requests one at a time. `tokenId` fills the prompts (any
 * ordinary vocabulary id; default 1). Progress: phase 'pipelines', done =
 * requests finished of `total`, label = the last pipeline compiled.
 */
export async function warmUp(
  engine: Engine,
  pipelines: PipelineCache,
  opts: { maxContext: number; tokenId?: number; onProgress?: ProgressCallback; startedAt?: number } = { maxContext: 64 },
): Promise<WarmUpResult> {
  const t0 = performance.now();
  const since = opts.startedAt ?? t0;
  const before = pipelines.compiled;
  const lens = warmUpLengths(opts.maxContext);
  const total = lens.length * 2;
  let done = 0;
  let last = '';
  const prev = pipelines.onCompile;
  pipelines.onCompile = (label, n) => {
    last = label;
    prev?.(label, n);
    opts.onProgress?.({ phase: 'pipelines', done, total, label, ms: performance.now() - since });
  };
  try {
    for (const len of lens) {
      const prompt = new Array<number>(len).fill(opts.tokenId ?? 1);
      for (const sampling of [{ temperature: 0 }, { temperature: 1, topK: 40, topP: 0.9, seed: 0 }]) {
        for await (const ev of engine.generate(prompt, { maxNewTokens: 2, sampling, addSpecialTokens: false, ignoreEos: true })) void ev;
        done++;
        opts.onProgress?.({ phase: 'pipelines', done, total, ...(last ? { label: last } : {}), ms: performance.now() - since });
      }
    }
  } finally {
    pipelines.onCompile = prev;
  }
  return { compiled: pipelines.compiled - before, requests: done, ms: performance.now() - t0 };
}
