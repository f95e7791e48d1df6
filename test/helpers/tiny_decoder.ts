/**
 * Helpers for the decoder golden tests: the tiny fixtures under
 * test/fixtures/decoders/<arch>/ (made by scripts/golden/make_decoders.py),
 * their HF weights as f32 host arrays, the plain-TypeScript reference run
 * over every position, and a probe that runs one prompt through a loaded
 * GPU model and reads back the logits of every position.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { DecoderConfig } from '../../core/formats/hf_config.ts';
import { openSafetensorsModel, toFloat32 } from '../../core/formats/safetensors.ts';
import type { ModelSource } from '../../core/formats/source.ts';
import type { LoadedDecoder } from '../../core/api/load_decoder.ts';
import { argmax, LlamaReference } from '../../core/models/llama/reference.ts';
import type { StepInputs } from '../../core/models/step.ts';
import { dirSource } from '../../server/fs_source.ts';

export const DECODER_FIXTURES = ['llama', 'mistral', 'qwen2', 'qwen3'] as const;
/** Gemma 2 / Gemma 3 / Phi-3 fixtures (the same generator; checked by architectures.test.ts). */
export const VARIANT_FIXTURES = ['gemma2', 'gemma3', 'phi3'] as const;
export type DecoderFixture = (typeof DECODER_FIXTURES)[number] | (typeof VARIANT_FIXTURES)[number];
/**
 * The context limit a fixture's golden assumes: Phi-3's longrope golden uses the short factors
 * (its prompt is within original_max_position_embeddings 64), which the model picks when run
 * with a context of at most 64 (core/models/llama/variant.ts).
 */
export const FIXTURE_CONTEXT: Partial<Record<DecoderFixture, number>> = { phi3: 64 };

export function fixtureDir(arch: DecoderFixture): string {
  return fileURLToPath(new URL(`../fixtures/decoders/${arch}`, import.meta.url));
}

export interface Golden {
  version: number;
  generator: string;
  architecture: string;
  prompt_ids: number[];
  logits_shape: [number, number];
  /** [T][V] */
  logits: number[][];
  greedy: number[];
  greedy_min_margin: number;
  logit_absmax: number;
  /** Phi-3: logits of the last prompt position with the long longrope factors. */
  logits_long_last?: number[];
}

export function readGolden(arch: DecoderFixture): Golden {
  return JSON.parse(readFileSync(`${fixtureDir(arch)}/golden.json`, 'utf8')) as Golden;
}

/** The golden logits flattened to [T * V]. */
export function goldenLogits(g: Golden): Float32Array {
  const [T, V] = g.logits_shape;
  const out = new Float32Array(T * V);
  g.logits.forEach((row, t) => out.set(row, t * V));
  return out;
}

/** Every tensor of an HF safetensors checkpoint as f32. */
export async function hfTensors(ms: ModelSource): Promise<Map<string, { shape: number[]; data: Float32Array }>> {
  const st = await openSafetensorsModel(ms);
  const out = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const [name, t] of st.tensors) out.set(name, { shape: [...t.info.shape], data: toFloat32(t.info.dtype, await st.read(name)) });
  return out;
}

export function fixtureSource(arch: DecoderFixture): ModelSource {
  return dirSource(fixtureDir(arch));
}

/** Getter over a name -> f32 map, throwing on absent names (as LlamaReference expects). */
export function getter(m: ReadonlyMap<string, { data: Float32Array }>): (n: string) => Float32Array {
  return (n) => {
    const t = m.get(n);
    if (!t) throw new Error(`missing tensor ${n}`);
    return t.data;
  };
}

/** Plain-TS reference: logits of every position [T * V], and the greedy continuation of `n` tokens. */
export function referenceRun(
  cfg: DecoderConfig,
  get: (n: string) => Float32Array,
  ids: readonly number[],
  n: number,
  maxContext?: number,
): { logits: Float32Array; greedy: number[]; lastLogits: Float32Array } {
  const ref = new LlamaReference(cfg, get, maxContext);
  const V = cfg.vocabSize;
  const logits = new Float32Array(ids.length * V);
  let last: Float32Array = new Float32Array(0);
  ids.forEach((t, i) => {
    last = ref.step(t);
    logits.set(last, i * V);
  });
  const lastLogits = last;
  const greedy: number[] = [];
  for (let i = 0; i < n; i++) {
    const next = argmax(last);
    greedy.push(next);
    if (i < n - 1) last = ref.step(next);
  }
  return { logits, greedy, lastLogits };
}

let probes = 0;

/**
 * Runs `ids` (one sequence, positions 0..T-1) through the loaded model in one
 * step, with every position a logit row, and reads back logits [T * V]. KV
 * blocks come from the engine's own KvCacheManager and are freed afterwards,
 * so the engine can keep running requests on the same model.
 */
export async function allPositionLogits(d: LoadedDecoder, ids: readonly number[]): Promise<Float32Array> {
  const model = d.model;
  const geo = model.geo;
  const T = ids.length;
  if (T > geo.maxSeqs || T > geo.maxTokens) throw new Error(`allPositionLogits: ${T} rows need maxSeqs and maxTokens >= ${T}`);
  const kv = d.engine.runner.kv;
  const seq = `all-position-logits-${++probes}`;
  if (!kv.allocate(seq, T)) throw new Error('allPositionLogits: KV pool exhausted');
  try {
    const table = kv.blockTable(seq);
    const blockTables = new Uint32Array(geo.maxBlocksPerSeq);
    blockTables.set(table);
    const inputs: StepInputs = {
      tokens: Uint32Array.from(ids),
      positions: Uint32Array.from(ids, (_, i) => i),
      tokenSeq: new Uint32Array(T),
      slots: Uint32Array.from(ids, (_, i) => table[Math.floor(i / geo.blockSize)]! * geo.blockSize + (i % geo.blockSize)),
      blockTables,
      numSeqs: 1,
      logitRows: Uint32Array.from(ids, (_, i) => i),
    };
    const rec = model.ctx.recorder();
    const logits = await model.record(rec, inputs);
    if (!logits) throw new Error('allPositionLogits: the model returned no logits');
    const read = rec.readback(logits);
    rec.submit();
    return new Float32Array(await read);
  } finally {
    kv.free(seq);
  }
}

export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} != ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    if (!(d <= m)) m = Number.isNaN(d) ? Infinity : d;
  }
  return m;
}

export function absMax(a: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]!));
  return m;
}

/** Argmax of every row of a [rows * V] array. */
export function rowArgmax(a: Float32Array, V: number): number[] {
  const out: number[] = [];
  for (let r = 0; r < a.length / V; r++) out.push(argmax(a.subarray(r * V, (r + 1) * V)));
  return out;
}
