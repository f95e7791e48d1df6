/**
 * GPU token sampling (core/ops/sample.ts) against the CPU reference
 * (sample.ref.ts): ids must match exactly unless the reference reports the
 * draw within 1e-5 of a decision boundary, where f32 vs f64 rounding may pick
 * a neighbour: then the id must be one the reference draws at u -/+ 1e-5. Also: greedy ties, masks and the no-token sentinel, penalties,
 * reproducibility and batch independence of seeded draws, chi-square checks
 * of the draw distribution, and parameter validation.
 */
import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../core/errors.ts';
import type { GpuContext } from '../../core/gpu/context.ts';
import { NO_TOKEN, sample, type SampleRow } from '../../core/ops/sample.ts';
import { NEAR, pcg2d, sampleRef, sampleRefDetailed, uniform01 } from '../../core/ops/sample.ref.ts';
import type { Variant } from '../../core/ops/variant.ts';
import { GREEDY, validateSampling, type SamplingParams } from '../../core/sampling/params.ts';
import { BACKEND_VARIANTS, gpuFor, randn, rng } from '../helpers/gpu.ts';

const AMBIGUOUS = NEAR;
/** Chi-square 0.999 quantiles by degrees of freedom (false-failure rate 1e-3 per check). */
const CHI2_999: Record<number, number> = { 2: 13.82, 4: 18.47 };

const PRESETS: Partial<SamplingParams>[] = [
  { temperature: 0 },
  { temperature: 1 },
  { temperature: 0.7, topK: 5 },
  { temperature: 1.3, topP: 0.9 },
  { temperature: 0.8, topK: 50, topP: 0.95, minP: 0.05 },
  { temperature: 0, repetitionPenalty: 1.3, frequencyPenalty: 0.2 },
  { temperature: 1, repetitionPenalty: 1.2, presencePenalty: 0.5, frequencyPenalty: 0.3 },
  { temperature: 0.5, minP: 0.1 },
];

/** B rows cycling through PRESETS with random seeds, steps and histories (some ids >= V). */
function mixedRows(B: number, V: number, seed: number): SampleRow[] {
  const r = rng(seed);
  return Array.from({ length: B }, (_, b) => ({
    params: validateSampling({ ...PRESETS[(b + seed) % PRESETS.length], seed: Math.floor(r() * 2 ** 32) }),
    step: Math.floor(r() * 1000),
    history: Uint32Array.from({ length: Math.floor(r() * 40) }, () => Math.floor(r() * (V + 3))),
  }));
}

const sampled = (p: Partial<SamplingParams>): SamplingParams => validateSampling({ temperature: 1, seed: 1, ...p });

async function run(ctx: GpuContext, logits: Float32Array, V: number, rows: SampleRow[], variant: Variant, mask?: Uint32Array): Promise<Uint32Array> {
  const B = rows.length;
  const tl = ctx.tensor(logits, [B, V], 'f32');
  const tm = mask ? ctx.tensor(mask, [B, Math.ceil(V / 32)], 'u32') : undefined;
  const out = ctx.scratch([B], 'u32');
  const rec = ctx.recorder();
  await sample(rec, tl, rows, out, { variant, ...(tm ? { mask: tm } : {}) });
  expect(rec.dispatches).toBe(1);
  const pending = rec.readback(out);
  rec.submit();
  const ids = new Uint32Array(await pending);
  ctx.free(out);
  tl.buffer.destroy();
  tm?.buffer.destroy();
  return ids;
}

/** Exact id match with the reference, or a neighbouring draw where its margin is below AMBIGUOUS. */
function expectRef(got: Uint32Array, logits: Float32Array, V: number, rows: SampleRow[], mask?: Uint32Array): void {
  sampleRefDetailed(logits, V, rows, mask).forEach((r, b) => {
    const what = `row ${b}: ${JSON.stringify(rows[b]!.params)} step ${rows[b]!.step}`;
    if (r.margin >= AMBIGUOUS) expect(got[b], what).toBe(r.id);
    else expect([r.id, ...r.near], what).toContain(got[b]);
  });
}

function chiSquare(counts: number[], probs: number[]): number {
  const n = counts.reduce((a, b) => a + b, 0);
  return counts.reduce((a, c, i) => a + (c - n * probs[i]!) ** 2 / (n * probs[i]!), 0);
}

function histogram(ids: ArrayLike<number>, V: number): number[] {
  const h = new Array<number>(V).fill(0);
  for (let i = 0; i < ids.length; i++) h[ids[i]!]!++;
  return h;
}

const PROBS = [0.1, 0.2, 0.3, 0.25, 0.15];
const LOG_PROBS = Float32Array.from(PROBS, Math.log);
/** PROBS after top-k = 3 (ids 2, 3, 1), renormalised; id 0 and 4 never drawn. */
const TOP3 = [0.3, 0.25, 0.2].map((x) => x / 0.75);

const SHAPES: [number, number][] = [
  [1, 1],
  [3, 5],
  [8, 5],
  [1, 512],
  [8, 512],
  [3, 1000],
  [8, 1000],
  [3, 32000],
];

describe.each(BACKEND_VARIANTS)('sample on %s, %s variant', (backend, variant) => {
  it.each(SHAPES)('B=%i V=%i: mixed rows match the reference', async (B, V) => {
    const ctx = await gpuFor(backend);
    const seed = B * 100_003 + V;
    const logits = randn(B * V, seed, 3);
    const rows = mixedRows(B, V, seed);
    expectRef(await run(ctx, logits, V, rows, variant), logits, V, rows);
  });

  it('greedy ties pick the lowest id (fast path and penalised path)', async () => {
    const ctx = await gpuFor(backend);
    const V = 1000;
    const logits = new Float32Array(4 * V).fill(-1);
    logits.fill(0, 0, V); // row 0: all equal
    logits[V + 700] = logits[V + 300] = 5; // row 1
    logits[2 * V + 999] = logits[2 * V + 998] = logits[2 * V + 5] = 5; // row 2
    logits[3 * V + 100] = logits[3 * V + 200] = 3; // row 3, penalty on another token
    logits[3 * V + 900] = 2;
    const pen: SamplingParams = { ...GREEDY, repetitionPenalty: 2 };
    const rows: SampleRow[] = [GREEDY, GREEDY, GREEDY, pen].map((params) => ({ params, step: 0, history: Uint32Array.of(900) }));
    const got = await run(ctx, logits, V, rows, variant);
    expect([...got]).toEqual([0, 300, 5, 100]);
    expect([...sampleRef(logits, V, rows)]).toEqual([0, 300, 5, 100]);
  });

  it('plain greedy rows (no mask, no history): ties, NaN, -inf, -FLT_MAX and an odd vocabulary', async () => {
    const ctx = await gpuFor(backend);
    const V = 1003; // 250 quads + a 3-id tail
    const logits = randn(6 * V, 17, 3);
    logits.fill(0, 0, V); // row 0: all equal -> 0
    logits[V + 1001] = logits[V + 1002] = 50; // row 1: tie in the tail -> 1001
    logits[2 * V + 7] = Number.NaN; // row 2: NaN never wins; a tie inside one quad
    logits[2 * V + 5] = logits[2 * V + 6] = 40;
    logits.fill(Number.NEGATIVE_INFINITY, 3 * V, 4 * V); // row 3: nothing finite -> NO_TOKEN
    logits.fill(-3.4028234663852886e38, 4 * V, 5 * V); // row 4: all -FLT_MAX (the kernel's NEG) -> NO_TOKEN
    logits[4 * V + 500] = -3.4e38; // ... except one id just above it
    logits[5 * V + 1002] = 60; // row 5: the last id
    const rows: SampleRow[] = Array.from({ length: 6 }, () => ({ params: GREEDY, step: 0 }));
    const got = await run(ctx, logits, V, rows, variant);
    expect([...got]).toEqual([0, 1001, 5, NO_TOKEN, 500, 1002]);
    expectRef(got, logits, V, rows);
  });

  it('masks: only allowed ids, a single allowed id, and the no-token sentinel', async () => {
    const ctx = await gpuFor(backend);
    const V = 1000;
    const W = Math.ceil(V / 32);
    const B = 6;
    const logits = randn(B * V, 99, 3);
    const mask = new Uint32Array(B * W);
    const r = rng(5);
    for (let i = 0; i < W; i++) mask[i] = mask[4 * W + i] = (r() * 2 ** 32) >>> 0; // rows 0, 4: random half
    mask[W + (777 >> 5)] = 1 << (777 & 31); // row 1: only 777
    mask.fill(0xffffffff, 5 * W, 6 * W); // row 5: all allowed ...
    let best = 0;
    for (let v = 0; v < V; v++) if (logits[5 * V + v]! > logits[5 * V + best]!) best = v;
    mask[5 * W + (best >> 5)]! &= ~(1 << (best & 31)); // ... except its argmax
    const rows: SampleRow[] = [sampled({ seed: 3 }), sampled({ topP: 0.9 }), sampled({}), GREEDY, GREEDY, GREEDY].map((params, b) => ({ params, step: b }));
    const got = await run(ctx, logits, V, rows, variant, mask);
    const allowed = (b: number, v: number): boolean => ((mask[b * W + (v >> 5)]! >>> (v & 31)) & 1) === 1;
    expect(allowed(0, got[0]!)).toBe(true);
    expect(got[1]).toBe(777);
    expect(got[2]).toBe(NO_TOKEN);
    expect(got[3]).toBe(NO_TOKEN);
    expect(allowed(4, got[4]!)).toBe(true);
    expect(got[5]).not.toBe(best);
    expectRef(got, logits, V, rows, mask);
  });

  it('repetition, presence and frequency penalties move the argmax as expected', async () => {
    const ctx = await gpuFor(backend);
    const V = 512;
    const B = 5;
    const logits = randn(B * V, 11, 0.1);
    for (let b = 0; b < B; b++) {
      logits[b * V + 10] = b === 2 ? -1 : 2;
      logits[b * V + 20] = b === 2 ? -1.1 : 1.9;
    }
    for (let v = 0; v < V; v++) if (v !== 10 && v !== 20) logits[2 * V + v] = -5; // row 2: all negative
    const h = (...ids: number[]): Uint32Array => Uint32Array.from(ids);
    const rows: SampleRow[] = [
      { params: GREEDY, step: 0, history: h(10) }, // no penalty: 10
      { params: { ...GREEDY, repetitionPenalty: 1.2 }, step: 0, history: h(10, 10) }, // 2 / 1.2 < 1.9: 20
      { params: { ...GREEDY, repetitionPenalty: 1.2 }, step: 0, history: h(10) }, // -1 * 1.2 < -1.1: 20
      { params: { ...GREEDY, presencePenalty: 0.05, frequencyPenalty: 0.05 }, step: 0, history: h(10, 10, 3) }, // 2 - 0.15: 20
      { params: { ...GREEDY, repetitionPenalty: 1.2 }, step: 0, history: h(20) }, // runner-up penalised: 10
    ];
    const got = await run(ctx, logits, V, rows, variant);
    expect([...got]).toEqual([10, 20, 20, 20, 10]);
    expect([...sampleRef(logits, V, rows)]).toEqual([10, 20, 20, 20, 10]);
  });

  it('seeded draws are reproducible and independent of the rest of the batch', async () => {
    const ctx = await gpuFor(backend);
    const V = 1000;
    const target: SampleRow = { params: sampled({ temperature: 0.9, topP: 0.95, seed: 42 }), step: 3, history: Uint32Array.of(1, 2, 3) };
    const row = randn(V, 4242, 2);
    const alone = await run(ctx, row, V, [target], variant);
    const rows = mixedRows(8, V, 77);
    rows[5] = target;
    const logits = randn(8 * V, 78, 2);
    logits.set(row, 5 * V);
    const batch = await run(ctx, logits, V, rows, variant);
    expect(batch[5]).toBe(alone[0]);
    expect([...(await run(ctx, logits, V, rows, variant))]).toEqual([...batch]);
    expect(alone[0]).toBe(sampleRef(row, V, [target])[0]);
  });

  it('top-k = 1, tiny top-p and min-p = 1 all reduce to greedy', async () => {
    const ctx = await gpuFor(backend);
    const V = 1000;
    const B = 8;
    const logits = randn(B * V, 1234, 2);
    const keep1 = [{ topK: 1 }, { topP: 1e-6 }, { minP: 1 }];
    const rows: SampleRow[] = Array.from({ length: B }, (_, b) => ({ params: sampled({ temperature: 1.5, seed: b, ...keep1[b % 3] }), step: b }));
    const greedy = sampleRef(logits, V, rows.map((r) => ({ ...r, params: GREEDY })));
    expect([...(await run(ctx, logits, V, rows, variant))]).toEqual([...greedy]);
  });

  it('large vocabularies: greedy at V=200000, plain sampling at V=32000 (per-invocation kernel within the loop cap)', async () => {
    const ctx = await gpuFor(backend);
    for (const [V, params] of [
      [200_000, GREEDY],
      [32_000, sampled({ temperature: 0.8, seed: 5 })],
    ] as const) {
      const logits = randn(2 * V, V, 3);
      const rows: SampleRow[] = [0, 1].map((step) => ({ params, step }));
      expectRef(await run(ctx, logits, V, rows, variant), logits, V, rows);
    }
  });

  it('draws follow the (top-k renormalised) distribution and equal the reference ids', async () => {
    const ctx = await gpuFor(backend);
    const V = 5;
    const N = variant === 'gpu' ? 100 : 300; // the workgroup kernel costs ~15 ms a row on CPU emulation
    const logits = new Float32Array(2 * N * V);
    for (let b = 0; b < 2 * N; b++) logits.set(LOG_PROBS, b * V);
    const rows: SampleRow[] = Array.from({ length: 2 * N }, (_, b) => ({ params: sampled({ seed: 7, topK: b < N ? 0 : 3 }), step: b % N }));
    const got = await run(ctx, logits, V, rows, variant);
    expectRef(got, logits, V, rows);
    expect(chiSquare(histogram(got.subarray(0, N), V), PROBS)).toBeLessThan(CHI2_999[4]!);
    const top = histogram(got.subarray(N), V);
    expect(top[0]! + top[4]!).toBe(0);
    expect(chiSquare([top[2]!, top[3]!, top[1]!], TOP3)).toBeLessThan(CHI2_999[2]!);
  });
});

describe('sampling reference and RNG (CPU)', () => {
  const draw = (rows: SampleRow[]): Uint32Array => {
    const logits = new Float32Array(rows.length * 5);
    for (let b = 0; b < rows.length; b++) logits.set(LOG_PROBS, b * 5);
    return sampleRef(logits, 5, rows);
  };

  it('2000 draws over steps, and over seeds, match the distribution', () => {
    const bySteps = draw(Array.from({ length: 2000 }, (_, s) => ({ params: sampled({ seed: 12345 }), step: s })));
    expect(chiSquare(histogram(bySteps, 5), PROBS)).toBeLessThan(CHI2_999[4]!);
    const bySeeds = draw(Array.from({ length: 2000 }, (_, s) => ({ params: sampled({ seed: s }), step: 0 })));
    expect(chiSquare(histogram(bySeeds, 5), PROBS)).toBeLessThan(CHI2_999[4]!);
    const topP = histogram(draw(Array.from({ length: 2000 }, (_, s) => ({ params: sampled({ seed: 9, topP: 0.7 }), step: s }))), 5);
    expect(topP[0]! + topP[4]!).toBe(0); // nucleus 0.3 + 0.25 + 0.2 >= 0.7
    expect(chiSquare([topP[2]!, topP[3]!, topP[1]!], TOP3)).toBeLessThan(CHI2_999[2]!);
  });

  it('uniform01 is the pinned pcg2d hash: 24-bit, in [0, 1), mean 1/2', () => {
    expect([pcg2d(0, 0), pcg2d(42, 7)]).toEqual([[417608103, 90043601], [247809911, 4202694454]]);
    expect([uniform01(0, 0), uniform01(42, 7), uniform01(0xffffffff, 0xffffffff)].map((u) => u * 2 ** 24)).toEqual([1631281, 968007, 1975946]);
    let sum = 0;
    let bad = 0;
    for (let s = 0; s < 10000; s++) {
      const u = uniform01(s * 2654435761, s);
      if (!(u >= 0 && u < 1 && Number.isInteger(u * 2 ** 24))) bad++;
      sum += u;
    }
    expect(bad).toBe(0);
    expect(Math.abs(sum / 10000 - 0.5)).toBeLessThan(0.01);
  });

  it('validateSampling fills defaults and rejects out-of-range values', () => {
    const d = validateSampling({});
    expect({ ...d, seed: 0 }).toEqual({ temperature: 1, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1, presencePenalty: 0, frequencyPenalty: 0, seed: 0 });
    expect(Number.isInteger(d.seed) && d.seed >= 0 && d.seed < 2 ** 32).toBe(true);
    expect(validateSampling({ ...GREEDY })).toEqual(GREEDY);
    expect(validateSampling({ topP: null as unknown as number, seed: 5 }).topP).toBe(1);
    expect(validateSampling({ temperature: 1e-6 }).temperature).toBe(0);
    const bad: [keyof SamplingParams, unknown][] = [
      ['temperature', -0.1],
      ['temperature', Number.NaN],
      ['topK', -1],
      ['topK', 2.5],
      ['topP', 0],
      ['topP', 1.5],
      ['minP', 2],
      ['repetitionPenalty', 0],
      ['presencePenalty', 3],
      ['frequencyPenalty', -2.5],
      ['seed', -1],
      ['seed', 2 ** 32],
      ['temperature', '1'],
      ['topP', Number.POSITIVE_INFINITY],
    ];
    for (const [field, value] of bad) {
      let err: unknown;
      try {
        validateSampling({ [field]: value } as Partial<SamplingParams>);
      } catch (e) {
        err = e;
      }
      expect(err, `${field}=${String(value)}`).toBeInstanceOf(InvalidRequestError);
      expect((err as InvalidRequestError).code).toBe('invalid_sampling');
      expect((err as InvalidRequestError).details?.field).toBe(field);
    }
  });
});
