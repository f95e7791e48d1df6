/**
 * End-to-end comparison of a narrowed KV cache (q8, f16) against the f32 cache, shared by the
 * kv8 and kv16 model tests: teacher-forced runs through both caches step by step as the engine
 * runs them, a CPU reference whose cache rows make the same round trip, and the greedy ids the
 * top-1/top-2 margins guarantee.
 */
import { expect } from 'vitest';
import type { LoadedDecoder } from '../../core/api/load_decoder.ts';
import type { DecoderConfig } from '../../core/formats/hf_config.ts';
import type { ModelSource } from '../../core/formats/source.ts';
import { argmax, LlamaReference } from '../../core/models/llama/reference.ts';
import type { StepInputs } from '../../core/models/step.ts';
import { getter, hfTensors, maxAbsDiff } from './tiny_decoder.ts';

/** One (token, kv head) row of headDim values through the cache's storage and back. */
export type RowRoundTrip = (row: Float32Array) => Float32Array;

/** Top-1 minus top-2 logit. */
export function margin(l: Float32Array): number {
  let a = -Infinity;
  let b = -Infinity;
  for (const x of l) {
    if (x > a) [a, b] = [x, a];
    else if (x > b) b = x;
  }
  return a - b;
}

/**
 * Runs `prompt` then `forced` (teacher-forced) through the model the way the
 * engine does for one sequence: one prefill step, then one decode step per
 * token. Returns the logits of every step: [forced.length + 1][V].
 */
export async function forcedRun(d: LoadedDecoder, prompt: readonly number[], forced: readonly number[]): Promise<Float32Array[]> {
  const { model } = d;
  const geo = model.geo;
  const kv = d.engine.runner.kv;
  const seq = 'kv-forced';
  const total = prompt.length + forced.length;
  if (!kv.allocate(seq, total)) throw new Error('KV pool exhausted');
  try {
    const table = kv.blockTable(seq);
    const blockTables = new Uint32Array(geo.maxBlocksPerSeq);
    blockTables.set(table);
    const slot = (pos: number) => table[Math.floor(pos / geo.blockSize)]! * geo.blockSize + (pos % geo.blockSize);
    const out: Float32Array[] = [];
    for (let i = 0; i <= forced.length; i++) {
      const ids = i === 0 ? prompt : [forced[i - 1]!];
      const p0 = i === 0 ? 0 : prompt.length + i - 1;
      const inputs: StepInputs = {
        tokens: Uint32Array.from(ids),
        positions: Uint32Array.from(ids, (_, j) => p0 + j),
        tokenSeq: new Uint32Array(ids.length),
        slots: Uint32Array.from(ids, (_, j) => slot(p0 + j)),
        blockTables,
        numSeqs: 1,
        logitRows: Uint32Array.of(ids.length - 1),
      };
      const rec = model.ctx.recorder();
      const logits = await model.record(rec, inputs);
      const read = rec.readback(logits!);
      rec.submit();
      out.push(new Float32Array(await read));
    }
    return out;
  } finally {
    kv.free(seq);
  }
}

/**
 * A LlamaReference whose KV cache holds every (token, kv head) row after `roundTrip`, as the
 * GPU cache does (it wraps the reference's per-layer cache arrays, failing loudly if their
 * names change).
 */
export function roundTripReference(cfg: DecoderConfig, get: (n: string) => Float32Array, roundTrip: RowRoundTrip): LlamaReference {
  const ref = new LlamaReference(cfg, get);
  const r = ref as unknown as { kCache: Float32Array[][]; vCache: Float32Array[][] };
  if (!Array.isArray(r.kCache) || !Array.isArray(r.vCache)) throw new Error('LlamaReference no longer has kCache / vCache arrays');
  const hd = cfg.headDim;
  const rows = (x: Float32Array): Float32Array => {
    const out = new Float32Array(x.length);
    for (let h = 0; h < x.length / hd; h++) out.set(roundTrip(x.subarray(h * hd, (h + 1) * hd)), h * hd);
    return out;
  };
  const wrap = (): Float32Array[] => {
    const a: Float32Array[] = [];
    a.push = (...xs: Float32Array[]) => Array.prototype.push.apply(a, xs.map(rows));
    return a;
  };
  r.kCache = r.kCache.map(wrap);
  r.vCache = r.vCache.map(wrap);
  return ref;
}

export interface Comparison {
  /** max over steps of max |Δlogit|, narrowed vs f32 cache. */
  vsF32: number;
  /** max |Δlogit|, GPU narrowed cache vs the CPU reference with the same round trip. */
  vsEmulated: number;
  /** Leading greedy ids the margins guarantee, and how many agree in the free-running narrowed run. */
  guaranteed: number;
  agree: number;
  positionwise: number;
}

/**
 * Teacher-forces `ids` (the f32 greedy continuation of `prompt`) through the f32 and the
 * narrowed models and the emulating reference, then runs the narrowed model greedy freely.
 */
export async function compareCaches(f32: LoadedDecoder, narrow: LoadedDecoder, ms: ModelSource, prompt: readonly number[], ids: readonly number[], roundTrip: RowRoundTrip): Promise<Comparison> {
  const forced = ids.slice(0, -1);
  const a = await forcedRun(f32, prompt, forced);
  const b = await forcedRun(narrow, prompt, forced);
  expect(a.map((l) => argmax(l))).toEqual(ids); // the f32 cache reproduces the run
  const ref = roundTripReference(narrow.cfg, getter(await hfTensors(ms)), roundTrip);
  let e: Float32Array = new Float32Array(0);
  for (const t of prompt) e = ref.step(t);
  let vsEmulated = maxAbsDiff(b[0]!, e);
  forced.forEach((t, i) => (vsEmulated = Math.max(vsEmulated, maxAbsDiff(b[i + 1]!, ref.step(t)))));
  const deltas = a.map((l, i) => maxAbsDiff(l, b[i]!));
  // Where 2 * |Δ|∞ < the f32 top-1/top-2 margin the argmax cannot flip.
  const unsafe = deltas.findIndex((d, i) => 2 * d >= margin(a[i]!));
  const run = await narrow.engine.complete(prompt, { maxNewTokens: ids.length, sampling: { temperature: 0 }, ignoreEos: true });
  let agree = 0;
  while (agree < ids.length && run.tokenIds[agree] === ids[agree]) agree++;
  return {
    vsF32: Math.max(...deltas),
    vsEmulated,
    guaranteed: unsafe < 0 ? ids.length : unsafe,
    agree,
    positionwise: run.tokenIds.filter((t, i) => t === ids[i]).length,
  };
}

/** One line for the test log. */
export function describeComparison(what: string, cache: string, c: Comparison, n: number): string {
  return (
    `${what}: ${cache} vs f32 cache ${c.vsF32.toExponential(2)}, GPU ${cache} vs emulated-${cache} reference ${c.vsEmulated.toExponential(2)}; ` +
    `greedy ids: first ${c.agree}/${n} agree (${c.positionwise}/${n} positionwise), margins guarantee ${c.guaranteed}`
  );
}
