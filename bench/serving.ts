/**
 * Batched-serving benchmark: what concurrent requests buy over running the same
 * requests one after another, on stories260K and the random ~24M-parameter Llama.
 *
 * Per (model, backend) case, in its own child process (`node --import tsx bench/serving.ts
 * --child SPEC`, result as one RESULT_TAG line on stdout) so a Dawn crash or the peak RSS
 * is the case's own:
 * 1. Sequential baseline: the maxN requests (greedy, EOS ignored, T new tokens each,
 *    distinct 15-token prompts: generate.ts's prompt with the last id varied) run one after
 *    another, each awaited before the next. Sequential wall(N) = the sum of the first N
 *    requests' walls. Their ids are the reference.
 * 2. Concurrent: the first N requests started at once (Promise.all over engine.generate);
 *    wall = start to last `done`; aggregate tok/s = N·T / wall; ratio = sequential wall(N) /
 *    concurrent wall(N) (median of the per-round ratios); decode tok/s = N·(T−1) / (last token
 *    − earliest first token) (prefill and first tokens excluded, the later prefill chunks of
 *    large N included: conservative), against the same requests' sequential decode rate
 *    N·(T−1) / Σ(last − first token): the decode ratio (the issue asks for aggregate decode
 *    tokens/s and, apart from it, TTFT); TTFT under load: call to first token, p50 and max over
 *    the N requests, against the median solo (sequential) TTFT.
 *    A warm-up at every level first (largest N first: kernels may compile per batch shape),
 *    then `runs` interleaved rounds (sequential pass, then each N); medians over rounds.
 * 3. KV bytes per token for f32 and q8 (kvBytesPerToken), and one more concurrent level
 *    (N = 16 for stories260K when measured, else the largest) with a q8 KV cache.
 * 4. Prefix hits: a decoder with prefix caching, a long shared prefix (stories260K 200
 *    tokens, llama20m 128) + an 8-token suffix, 16 new tokens; a cold request (new prefix)
 *    then a warm one (same prefix, other suffix), `runs` pairs each with a fresh prefix;
 *    speedup = cold TTFT / warm TTFT (median of per-pair ratios). Both are checked against
 *    the same prompts run with prefix caching off.
 * 5. Continuous batching under arrivals (stories260K; bench/continuous.ts): 16 clients with
 *    requests of varied length back to back, prompt chunks through the megakernel's waves
 *    against the generic path.
 *
 * Run standalone: `npx tsx bench/serving.ts [run.ts flags]` (runs `bench/run.ts --only serving`).
 */
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseDecoderConfig } from '../core/formats/hf_config.ts';
import { GpuContext } from '../core/gpu/context.ts';
import { kvBytesPerToken } from '../core/models/load.ts';
import { loadDecoder, type LoadedDecoder } from '../core/api/load_decoder.ts';
import type { KvDtype } from '../core/ops/kv_write.ts';
import { loadTokenizerFromSource } from '../core/tokenizer/tokenizer.ts';
import { dirSource } from '../server/fs_source.ts';
import { runBenchChild, runStandalone } from './child.ts';
import { machineDescription, PROMPT_TEXT } from './generate.ts';
import { ensureModel, type BenchModel, type ModelId } from './models.ts';
import { continuousTable, measureContinuous, type ContinuousFigures } from './continuous.ts';
import { request, type Req } from './requests.ts';
import { f1, f2, median } from './stats.ts';
import { measureStepScaling, stepScalingTable, type StepScaling } from './step_scaling.ts';

const THIS_FILE = fileURLToPath(import.meta.url);
const RESULT_TAG = '@@SERVING_RESULT ';
const BLOCK = 16; // KV block size (tokens), passed to loadDecoder: pool sizes and the expected cached prefix use it

export interface ServingBenchOptions {
  models?: ModelId[];
  backends?: string[];
  /** Concurrency levels (default 1, 4, 16, 64). */
  levels?: number[];
  /** New tokens per request, per model (default stories260K 64, llama20m 16). */
  tokens?: Partial<Record<ModelId, number>>;
  /** Interleaved rounds per case, per model (default stories260K 5, llama20m 1). */
  runs?: Partial<Record<ModelId, number>>;
  /** Per-case child timeout, s (default 3600). */
  timeoutSec?: number;
  log?: (s: string) => void;
}

export const SERVING_DEFAULTS = {
  levels: [1, 4, 16, 64],
  tokens: { stories260K: 64, llama20m: 16 } as Record<ModelId, number>,
  runs: { stories260K: 5, llama20m: 1 } as Record<ModelId, number>,
  /** Shared-prefix length of the prefix-hit test, per model (tokens, BOS included). */
  prefix: { stories260K: 200, llama20m: 128 } as Record<ModelId, number>,
  suffix: 8,
  prefixTokens: 16,
  promptTokens: 15,
  timeoutSec: 3600,
  /** Section 5 (stories260K): clients, requests per client, new tokens per request. */
  continuous: { clients: 16, perClient: 4, minTokens: 16, maxTokens: 64 },
};

interface CaseSpec {
  model: BenchModel;
  backend: string;
  levels: number[];
  tokens: number;
  runs: number;
}

export interface LevelFigures {
  n: number;
  /** Medians over rounds, ms. */
  seqWallMs: number;
  concWallMs: number;
  /** N·T / concurrent wall. */
  aggTokS: number;
  /** N·(T−1) / (last token − earliest first token). */
  decodeTokS: number;
  /** The same requests one after another: N·(T−1) / Σ (last token − first token). */
  seqDecodeTokS: number;
  /** Median over rounds of concurrent / sequential decode tok/s (prefill and first tokens excluded on both sides). */
  decodeRatio: number;
  /** Median over rounds of sequential wall / concurrent wall. */
  ratio: number;
  /** Smallest and largest per-round ratios (wall, decode): how far one round strays from the median. */
  ratioRange: [number, number];
  decodeRatioRange: [number, number];
  /** Medians over rounds of the per-round p50 and max TTFT over the N requests, ms. */
  ttftP50Ms: number;
  ttftMaxMs: number;
  /** Every request of every round produced its sequential reference ids. */
  idsEqual: boolean;
  /** Requests (over all rounds) whose ids differ from the reference. */
  mismatches: number;
}

export interface KvFigures {
  f32BytesPerToken: number;
  q8BytesPerToken: number;
  /** The concurrent level run with the q8 cache. */
  n: number;
  f32AggTokS: number;
  q8AggTokS: number;
  /** q8 ids at the same position as the f32 sequential reference, of N·T. */
  q8EqualIds: number;
  q8TotalIds: number;
  /** q8 requests whose ids equal the f32 reference entirely. */
  q8EqualRequests: number;
}

export interface PrefixFigures {
  prefixTokens: number;
  promptTokens: number;
  newTokens: number;
  pairs: number;
  coldTtftMs: number;
  warmTtftMs: number;
  /** Median over pairs of cold TTFT / warm TTFT. */
  speedup: number;
  coldWallMs: number;
  warmWallMs: number;
  /** usage.cachedTokens of the warm requests (min over pairs) and what block alignment allows. */
  cachedTokens: number;
  expectedCached: number;
  /** usage.cachedTokens of the cold requests (max over pairs; should be 0). */
  coldCached: number;
  /** KvCacheManager.stats().prefixHitTokens gained over the warm requests (sum). */
  hitTokens: number;
  /** Requests (cold and warm) whose ids equal the same prompt run with prefix caching off. */
  idsEqualNoCache: number;
  requests: number;
}

export interface ServingCase {
  model: ModelId;
  modelLabel: string;
  backend: string;
  runtime: string;
  tokens: number;
  runs: number;
  levels: number[];
  promptTokens: number;
  soloTtftMs: number;
  soloWallMs: number;
  rows: LevelFigures[];
  /** Decode-step anatomy at the concurrency levels (step_scaling.ts). */
  steps?: StepScaling;
  kv?: KvFigures;
  prefix?: PrefixFigures;
  continuous?: ContinuousFigures;
  peakRssMB: number;
  loadAvgStart: number[];
  loadAvgEnd: number[];
  wallSec: number;
  error?: string;
}

export interface ServingReport {
  cases: ServingCase[];
  machine: string;
  startedAt: string;
}

const logErr = (s: string): void => void process.stderr.write(`${s}\n`);

// ---------------------------------------------------------------------------------------
// Child side

const concurrent = (d: LoadedDecoder, prompts: number[][], T: number): Promise<Req[]> => Promise.all(prompts.map((p) => request(d, p, T)));

/** KV pool bytes for `n` sequences of `tokens` each, whole blocks plus one spare block per sequence. */
function poolBytes(n: number, tokens: number, perToken: number): number {
  return n * (Math.ceil(tokens / BLOCK) + 1) * BLOCK * perToken;
}

async function runCase(spec: CaseSpec, out: Partial<ServingCase>): Promise<void> {
  const ms = dirSource(spec.model.weftDir);
  const cfg = parseDecoderConfig(await ms.readText('config.json'));
  const tok = await loadTokenizerFromSource(ms);
  const V = cfg.vocabSize;
  const T = spec.tokens;
  const base = tok.encode(PROMPT_TEXT, { addSpecialTokens: true }).slice(0, SERVING_DEFAULTS.promptTokens);
  // generate.ts's promptFor: the last prompt id varied, so no two requests are alike.
  const promptFor = (k: number): number[] => {
    const p = [...base];
    p[p.length - 1] = (p[p.length - 1]! + 7 * k) % V;
    return p;
  };
  const levels = spec.levels;
  const maxN = Math.max(...levels);
  const prompts = Array.from({ length: maxN }, (_, k) => promptFor(k));
  out.promptTokens = base.length;

  const ctx = await GpuContext.create({ backend: spec.backend });
  const info = ctx.gpu.info;
  out.runtime = `Dawn ${info.backend}: ${info.name} (${info.featureLevel}), variant ${ctx.variant}`;
  const load = (dtype: KvDtype, prefixCaching: boolean, maxSeqs: number, seqTokens: number, megakernelWaves = true): Promise<LoadedDecoder> =>
    loadDecoder(ctx, ms, { maxSeqs, prefixCaching, kvCacheDtype: dtype, blockSize: BLOCK, kvCacheBytes: poolBytes(maxSeqs, seqTokens, kvBytesPerToken(cfg, dtype)), megakernelWaves });

  try {
    // --- 1 + 2: sequential baseline and concurrent levels, f32 KV -------------------------
    let d = await load('f32', false, maxN, base.length + T);
    const warm0 = performance.now();
    for (const n of [maxN, ...levels.filter((l) => l !== maxN)]) await concurrent(d, prompts.slice(0, n), T);
    logErr(`  warm-up at N = ${[maxN, ...levels.filter((l) => l !== maxN)].join(', ')}: ${((performance.now() - warm0) / 1000).toFixed(1)} s`);
    let ref: number[][] | undefined;
    const soloTtft: number[] = [];
    const soloWall: number[] = [];
    const per = new Map(levels.map((n) => [n, { seq: [] as number[], conc: [] as number[], ratio: [] as number[], dec: [] as number[], seqDec: [] as number[], decRatio: [] as number[], p50: [] as number[], max: [] as number[], bad: 0 }]));
    for (let r = 0; r < spec.runs; r++) {
      const seq: Req[] = [];
      for (const p of prompts) seq.push(await request(d, p, T));
      ref ??= seq.map((q) => q.ids);
      soloTtft.push(...seq.map((q) => q.ttftMs));
      soloWall.push(...seq.map((q) => q.wallMs));
      const seqBad = seq.filter((q, k) => q.ids.join() !== ref![k]!.join()).length;
      if (seqBad) logErr(`  round ${r + 1}: ${seqBad} sequential requests differ from round 1`);
      for (const n of levels) {
        const f = per.get(n)!;
        const seqWall = seq.slice(0, n).reduce((a, q) => a + q.wallMs, 0);
        const start = performance.now();
        const res = await concurrent(d, prompts.slice(0, n), T);
        const wall = Math.max(...res.map((q) => q.t0 + q.wallMs)) - start;
        const ttfts = res.map((q) => q.ttftMs);
        f.seq.push(seqWall);
        f.conc.push(wall);
        f.ratio.push(seqWall / wall);
        const dec = T > 1 ? (n * (T - 1)) / ((Math.max(...res.map((q) => q.last)) - Math.min(...res.map((q) => q.first))) / 1000) : NaN;
        const seqDec = T > 1 ? (n * (T - 1)) / (seq.slice(0, n).reduce((a, q) => a + q.last - q.first, 0) / 1000) : NaN;
        f.dec.push(dec);
        f.seqDec.push(seqDec);
        f.decRatio.push(dec / seqDec);
        f.p50.push(median(ttfts));
        f.max.push(Math.max(...ttfts));
        const bad = res.filter((q, k) => q.ids.join() !== ref![k]!.join()).length;
        f.bad += bad;
        logErr(`  round ${r + 1}/${spec.runs} N=${n}: ${((n * T) / (wall / 1000)).toFixed(1)} tok/s, ${(seqWall / wall).toFixed(2)}x sequential (decode phase ${(dec / seqDec).toFixed(2)}x), TTFT p50 ${median(ttfts).toFixed(0)} ms${bad ? `, ${bad} requests differ from sequential` : ''}`);
      }
    }
    out.soloTtftMs = median(soloTtft);
    out.soloWallMs = median(soloWall);
    out.rows = levels.map((n) => {
      const f = per.get(n)!;
      const concWallMs = median(f.conc);
      return {
        n,
        seqWallMs: median(f.seq),
        concWallMs,
        aggTokS: (n * T) / (concWallMs / 1000),
        decodeTokS: median(f.dec),
        seqDecodeTokS: median(f.seqDec),
        decodeRatio: median(f.decRatio),
        ratio: median(f.ratio),
        ratioRange: [Math.min(...f.ratio), Math.max(...f.ratio)],
        decodeRatioRange: [Math.min(...f.decRatio), Math.max(...f.decRatio)],
        ttftP50Ms: median(f.p50),
        ttftMaxMs: median(f.max),
        idsEqual: f.bad === 0,
        mismatches: f.bad,
      };
    });

    // Decode-step anatomy at the same levels, on this (now idle) decoder, mid-decode position.
    out.steps = await measureStepScaling(ctx, d, levels, base.length + Math.floor(T / 2), 8, spec.model.id === 'stories260K' ? 30 : 4);
    logErr(`  step anatomy: ${out.steps.rows.map((r) => `S=${r.seqs} step p50 ${r.stepMs.p50.toFixed(2)} ms, compute p50 ${r.computeMs.p50.toFixed(2)} ms`).join('; ')}`);

    // Reference ids for the prefix test's prompts, with prefix caching off (this decoder).
    const P = SERVING_DEFAULTS.prefix[spec.model.id];
    const S = SERVING_DEFAULTS.suffix;
    const PT = SERVING_DEFAULTS.prefixTokens;
    const text = tok.encode(PROMPT_TEXT, { addSpecialTokens: false });
    const long = [base[0]!, ...Array.from({ length: P }, (_, i) => text[i % text.length]!)].slice(0, P);
    // Pair j's prefix: position 1 varied (every block key then misses: keys chain from block 0);
    // ids 0-2 (unk, BOS, EOS) avoided. Suffix s: generate.ts's prompt ids 1..S with the last varied.
    const prefixFor = (j: number): number[] => [long[0]!, 3 + ((long[1]! + 11 * (j + 1)) % (V - 3)), ...long.slice(2)];
    const suffixFor = (s: number): number[] => promptFor(s + 1).slice(1, 1 + S);
    const pairPrompts = (j: number): [number[], number[]] => [
      [...prefixFor(j), ...suffixFor(2 * j + 1)],
      [...prefixFor(j), ...suffixFor(2 * j + 2)],
    ];
    const prefixRef: number[][][] = [[]]; // pair 0 is the untimed warm-up
    for (let j = 1; j <= spec.runs; j++) prefixRef.push([(await request(d, pairPrompts(j)[0], PT)).ids, (await request(d, pairPrompts(j)[1], PT)).ids]);
    d.destroy();

    // --- 3: KV bytes per token, and one concurrent level with a q8 cache --------------------
    const qn = spec.model.id === 'stories260K' && levels.includes(16) ? 16 : maxN;
    d = await load('q8', false, qn, base.length + T);
    await concurrent(d, prompts.slice(0, qn), T); // compile the q8 kernels
    const qWalls: number[] = [];
    let qIds: number[][] = [];
    for (let r = 0; r < spec.runs; r++) {
      const start = performance.now();
      const res = await concurrent(d, prompts.slice(0, qn), T);
      qWalls.push(Math.max(...res.map((q) => q.t0 + q.wallMs)) - start);
      qIds = res.map((q) => q.ids);
    }
    d.destroy();
    let eq = 0;
    qIds.forEach((ids, k) => ids.forEach((t, i) => (eq += t === ref![k]![i] ? 1 : 0)));
    out.kv = {
      f32BytesPerToken: kvBytesPerToken(cfg, 'f32'),
      q8BytesPerToken: kvBytesPerToken(cfg, 'q8'),
      n: qn,
      f32AggTokS: out.rows.find((x) => x.n === qn)!.aggTokS,
      q8AggTokS: (qn * T) / (median(qWalls) / 1000),
      q8EqualIds: eq,
      q8TotalIds: qn * T,
      q8EqualRequests: qIds.filter((ids, k) => ids.join() === ref![k]!.join()).length,
    };
    logErr(`  q8 KV at N=${qn}: ${out.kv.q8AggTokS.toFixed(1)} tok/s (f32 ${out.kv.f32AggTokS.toFixed(1)}), ${eq}/${qn * T} ids equal to f32`);

    // --- 4: prefix hits ------------------------------------------------------------------
    // One sequence at a time; the pool holds a few prompts so cached blocks outlive a pair.
    d = await load('f32', true, 1, 4 * (P + S + PT));
    const kv = d.engine.runner.kv;
    const pair = async (j: number): Promise<[Req, Req, number]> => {
      const [a, b] = pairPrompts(j);
      const cold = await request(d, a, PT);
      const h0 = kv.stats().prefixHitTokens;
      const warm = await request(d, b, PT);
      return [cold, warm, kv.stats().prefixHitTokens - h0];
    };
    await pair(0); // warm-up: compiles the long-prefill and short-suffix shapes
    const cold: Req[] = [];
    const warm: Req[] = [];
    let hit = 0;
    let same = 0;
    for (let j = 1; j <= spec.runs; j++) {
      const [c, w, h] = await pair(j);
      cold.push(c);
      warm.push(w);
      hit += h;
      same += (c.ids.join() === prefixRef[j]![0]!.join() ? 1 : 0) + (w.ids.join() === prefixRef[j]![1]!.join() ? 1 : 0);
      logErr(`  prefix pair ${j}/${spec.runs}: TTFT cold ${c.ttftMs.toFixed(0)} ms, warm ${w.ttftMs.toFixed(0)} ms (${w.cachedTokens} cached)`);
    }
    d.destroy();
    out.prefix = {
      prefixTokens: P,
      promptTokens: P + S,
      newTokens: PT,
      pairs: spec.runs,
      coldTtftMs: median(cold.map((q) => q.ttftMs)),
      warmTtftMs: median(warm.map((q) => q.ttftMs)),
      speedup: median(cold.map((c, i) => c.ttftMs / warm[i]!.ttftMs)),
      coldWallMs: median(cold.map((q) => q.wallMs)),
      warmWallMs: median(warm.map((q) => q.wallMs)),
      cachedTokens: Math.min(...warm.map((q) => q.cachedTokens)),
      // attachPrefix leaves at least one prompt token to compute; the suffix breaks block P/B.
      expectedCached: Math.floor(Math.min(P, P + S - 1) / BLOCK) * BLOCK,
      coldCached: Math.max(...cold.map((q) => q.cachedTokens)),
      hitTokens: hit,
      idsEqualNoCache: same,
      requests: 2 * spec.runs,
    };

    // --- 5: continuous batching under arrivals (stories260K) -------------------------------
    if (spec.model.id === 'stories260K') {
      const o = SERVING_DEFAULTS.continuous;
      out.continuous = await measureContinuous((waves) => load('f32', false, o.clients, base.length + o.maxTokens, waves), promptFor, { ...o, runs: spec.runs }, logErr);
    }
  } finally {
    ctx.destroy();
  }
}

async function childMain(specJson: string): Promise<void> {
  const spec = JSON.parse(specJson) as CaseSpec;
  const t0 = performance.now();
  const out: Partial<ServingCase> = { loadAvgStart: loadavg() };
  let error: string | undefined;
  try {
    await runCase(spec, out);
  } catch (e) {
    error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    logErr(`  error: ${e instanceof Error ? e.stack : e}`);
  }
  const result: ServingCase = {
    ...baseCase(spec, t0),
    ...out,
    peakRssMB: process.resourceUsage().maxRSS / 1024,
    loadAvgEnd: loadavg(),
    wallSec: (performance.now() - t0) / 1000,
    ...(error ? { error } : {}),
  };
  process.stdout.write(`\n${RESULT_TAG}${JSON.stringify(result)}\n`);
  process.exit(0);
}

/** A case before any figures. */
function baseCase(spec: CaseSpec, t0: number): ServingCase {
  return {
    model: spec.model.id,
    modelLabel: spec.model.label,
    backend: spec.backend,
    runtime: '',
    tokens: spec.tokens,
    runs: spec.runs,
    levels: spec.levels,
    promptTokens: SERVING_DEFAULTS.promptTokens,
    soloTtftMs: NaN,
    soloWallMs: NaN,
    rows: [],
    peakRssMB: NaN,
    loadAvgStart: loadavg(),
    loadAvgEnd: loadavg(),
    wallSec: (performance.now() - t0) / 1000,
  };
}

// ---------------------------------------------------------------------------------------
// Parent side

async function runChild(spec: CaseSpec, timeoutSec: number, log: (s: string) => void): Promise<ServingCase> {
  const t0 = performance.now();
  const la0 = loadavg();
  const r = await runBenchChild<ServingCase>(THIS_FILE, spec, RESULT_TAG, timeoutSec, log);
  return r.ok ? r.result : { ...baseCase(spec, t0), loadAvgStart: la0, error: r.error };
}

export async function benchServing(o: ServingBenchOptions = {}): Promise<ServingReport> {
  const log = o.log ?? logErr;
  const models = o.models ?? (['stories260K', 'llama20m'] as ModelId[]);
  const backends = o.backends ?? ['opengles', 'swiftshader'];
  const levels = o.levels ?? SERVING_DEFAULTS.levels;
  if (!levels.length || levels.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`serving: concurrency levels must be positive integers, got ${levels.join(',')}`);
  const startedAt = new Date().toISOString();
  const cases: ServingCase[] = [];
  for (const id of models) {
    const model = await ensureModel(id, { onnx: false, log });
    for (const backend of backends) {
      const spec: CaseSpec = { model, backend, levels, tokens: o.tokens?.[id] ?? SERVING_DEFAULTS.tokens[id], runs: o.runs?.[id] ?? SERVING_DEFAULTS.runs[id] };
      log(`serving: ${model.label} on ${backend}: N = ${levels.join(', ')}, ${spec.tokens} new tokens, ${spec.runs} rounds (load avg ${loadavg()[0]!.toFixed(1)})`);
      const r = await runChild(spec, o.timeoutSec ?? SERVING_DEFAULTS.timeoutSec, log);
      if (r.error) log(`  FAILED: ${r.error}`);
      log(`  done in ${r.wallSec.toFixed(0)} s`);
      cases.push(r);
    }
  }
  return { cases, machine: machineDescription(), startedAt };
}

// ---------------------------------------------------------------------------------------
// Report

const ms0 = (x: number): string => (Number.isFinite(x) ? x.toFixed(0) : '—');
const span = ([lo, hi]: [number, number]): string => `${f2(lo)}–${f2(hi)}x`;
const la = (x: number[]): string => x.slice(0, 3).map((v) => v.toFixed(2)).join(', ');

/** The goal lines for a stories260K case: computed from the N = 16 row. */
function goals(c: ServingCase): string {
  const r = c.rows.find((x) => x.n === 16);
  if (!r) return '_Goals (stories260K, 16 concurrent): not measured (N = 16 not among the levels)._';
  const met = (ok: boolean): string => (ok ? 'met' : 'not met');
  return (
    `Goals (stories260K, ${c.backend}): 16 concurrent: ${r.aggTokS.toFixed(0)} tok/s (goal ≥ 1,500): ${met(r.aggTokS >= 1500)}; ` +
    `≥ 6x the sequential run: wall clock (prefill included) ${r.ratio.toFixed(2)}x: ${met(r.ratio >= 6)}; decode phase ${r.decodeRatio.toFixed(2)}x: ${met(r.decodeRatio >= 6)} ` +
    `(medians of ${c.runs} rounds; single rounds ${span(r.ratioRange)} and ${span(r.decodeRatioRange)}).`
  );
}

function caseTable(c: ServingCase): string {
  const lines = [
    `#### ${c.modelLabel} on ${c.backend}`,
    '',
    `${c.runtime || 'runtime unknown'}. Greedy, ${c.tokens} new tokens per request, distinct ${c.promptTokens}-token prompts, median of ${c.runs} interleaved round(s) after a warm-up at every N; peak RSS ${f1(c.peakRssMB)} MB; case wall ${c.wallSec.toFixed(0)} s; load average at start ${la(c.loadAvgStart)}, at end ${la(c.loadAvgEnd)}.`,
  ];
  if (c.error) lines.push('', `_failed: ${c.error}_`);
  if (c.rows.length) {
    lines.push(
      '',
      `Solo (sequential) request: TTFT ${ms0(c.soloTtftMs)} ms, wall ${ms0(c.soloWallMs)} ms (medians).`,
      '',
      `| N | sequential wall s | concurrent wall s | aggregate tok/s | ratio vs sequential (rounds) | decode tok/s: sequential / concurrent | decode ratio (rounds) | TTFT p50 / max ms (solo ${ms0(c.soloTtftMs)}) | TTFT p50 vs solo | ids equal |`,
      '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
    );
    for (const r of c.rows) {
      lines.push(
        `| ${r.n} | ${f2(r.seqWallMs / 1000)} | ${f2(r.concWallMs / 1000)} | ${f1(r.aggTokS)} | ${f2(r.ratio)}x (${span(r.ratioRange)}) | ${f1(r.seqDecodeTokS)} / ${f1(r.decodeTokS)} | ${f2(r.decodeRatio)}x (${span(r.decodeRatioRange)}) | ${ms0(r.ttftP50Ms)} / ${ms0(r.ttftMaxMs)} | ${f2(r.ttftP50Ms / c.soloTtftMs)}x | ${r.idsEqual ? 'yes' : `**no** (${r.mismatches} of ${r.n * c.runs} requests differ)`} |`,
      );
    }
  }
  if (c.steps) lines.push('', stepScalingTable(c.steps));
  if (c.kv) {
    const k = c.kv;
    lines.push(
      '',
      '| KV dtype | bytes / token | vs f32 | aggregate tok/s at N = ' + k.n + ' | ids vs f32 sequential |',
      '| --- | ---: | ---: | ---: | --- |',
      `| f32 | ${k.f32BytesPerToken} | 1.00x | ${f1(k.f32AggTokS)} | reference |`,
      `| q8 | ${k.q8BytesPerToken} | ${f2(k.q8BytesPerToken / k.f32BytesPerToken)}x | ${f1(k.q8AggTokS)} | ${k.q8EqualIds}/${k.q8TotalIds} ids at the same position; ${k.q8EqualRequests}/${k.n} requests identical |`,
    );
  }
  if (c.prefix) {
    const p = c.prefix;
    lines.push(
      '',
      `Prefix hits: ${p.prefixTokens}-token shared prefix + ${p.promptTokens - p.prefixTokens}-token suffix, ${p.newTokens} new tokens, prefix caching on, ${p.pairs} cold/warm pair(s) each with a fresh prefix (medians).`,
      '',
      '| cold TTFT ms | warm TTFT ms | speedup | cold / warm wall ms | warm cached tokens / prompt tokens | cold cached | KV prefixHitTokens (warm) | ids = prefix caching off |',
      '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
      `| ${ms0(p.coldTtftMs)} | ${ms0(p.warmTtftMs)} | ${f2(p.speedup)}x | ${ms0(p.coldWallMs)} / ${ms0(p.warmWallMs)} | ${p.cachedTokens} / ${p.promptTokens}${p.cachedTokens === p.expectedCached ? '' : ` (**expected ${p.expectedCached}**)`} | ${p.coldCached} | ${p.hitTokens} | ${p.idsEqualNoCache}/${p.requests} |`,
    );
  }
  if (c.continuous) lines.push('', continuousTable(c.continuous));
  if (c.model === 'stories260K' && c.rows.length) lines.push('', goals(c));
  return lines.join('\n');
}

export function servingTable(rep: ServingReport): string {
  const head =
    'Sequential = the same requests one after another in the same run (wall(N) = sum of the first N solo walls); ' +
    'aggregate tok/s = N·T / concurrent wall; ratio = sequential wall / concurrent wall (median of per-round ratios); ' +
    'decode tok/s = N·(T−1) / (last token − earliest first token) concurrently, N·(T−1) / Σ(last − first token) sequentially, decode ratio = their quotient (prefill and first tokens excluded on both sides; median of per-round ratios); ' +
    'TTFT = call to first token under load; ' +
    '"ids equal" compares every concurrent request with its sequential ids.';
  return [head, ...rep.cases.map(caseTable)].join('\n\n');
}

// ---------------------------------------------------------------------------------------
if (process.argv[1] === THIS_FILE) {
  const i = process.argv.indexOf('--child');
  if (i >= 0) {
    await childMain(process.argv[i + 1]!);
  } else {
    runStandalone('serving', process.argv.slice(2));
  }
}
