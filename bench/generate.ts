/**
 * End-to-end generation benchmark: Weft (WebGPU on each Dawn backend) against the plain
 * TypeScript CPU reference (LlamaReference) and transformers.js (cpu / wasm / WebGPU),
 * single stream and greedy, on stories260K and a random ~24M-parameter Llama; plus Weft's
 * batched throughput (N concurrent requests through engine.generate).
 *
 * Every case runs in its own child process (`node --import tsx bench/generate.ts --child
 * SPEC`) so its peak RSS is its own and transformers.js can pick its ONNX runtime per case.
 * Per case: load, `warmup` untimed runs, then `runs` timed runs; figures are medians.
 *
 * Measured per run:
 * - prefill: the forward pass over the prompt (Weft: the first engine step, incl. sampling
 *   and the id readback; TS CPU: LlamaReference.prefill; transformers.js: the first
 *   model.forward of generate()); prefill tok/s = prompt tokens / prefill time.
 * - TTFT: from the generate call to the first token (Weft: first `token` event).
 * - decode tok/s: (new tokens - 1) / (time of last token - time of first token).
 * - peak RSS: the child's max resident set (process.resourceUsage().maxRSS); for the
 *   software GPU backends GPU memory lives in the process and is included.
 * - Weft GPU bytes: weights (LlamaWeights.bytes) + KV pool (LlamaModel.kvBytes).
 * All engines generate exactly `newTokens` tokens (EOS ignored) from the same prompt ids.
 *
 * Run standalone: `npx tsx bench/generate.ts` (same flags as bench/run.ts).
 */
import { cpus, loadavg, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseDecoderConfig } from '../core/formats/hf_config.ts';
import { openSafetensorsModel, toFloat32 } from '../core/formats/safetensors.ts';
import { GpuContext } from '../core/gpu/context.ts';
import { argmax, LlamaReference } from '../core/models/llama/reference.ts';
import { loadDecoder } from '../core/api/load_decoder.ts';
import type { StepInputs } from '../core/models/step.ts';
import { loadTokenizerFromSource } from '../core/tokenizer/tokenizer.ts';
import { dirSource } from '../server/fs_source.ts';
import { runBenchChild, runStandalone } from './child.ts';
import { ensureModel, type BenchModel, type ModelId } from './models.ts';
import type { TjsDevice } from './peers/transformers_js.ts';
import { mean, median } from './stats.ts';

const THIS_FILE = fileURLToPath(import.meta.url);
const RESULT_TAG = '@@BENCH_RESULT ';

/** The prompt: encoded with BOS by the stories tokenizer, first `promptTokens` ids. */
export const PROMPT_TEXT =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends.';

// ---------------------------------------------------------------------------------------
// Case specs and results

type CaseKind = 'weft' | 'ts-cpu' | 'tjs' | 'weft-batch';

export interface CaseSpec {
  kind: CaseKind;
  model: BenchModel;
  /** Weft: Dawn backend; tjs: device; ts-cpu: 'cpu'. */
  device: string;
  promptIds: number[];
  newTokens: number;
  runs: number;
  warmup: number;
  /** weft-batch: concurrency levels. */
  batch?: number[];
}

export interface RunFigures {
  prefillMs: number;
  ttftMs: number;
  decodeTokS: number;
  totalMs: number;
  tokenIds: number[];
}

export interface BatchFigures {
  n: number;
  /** Median wall time from launching the N requests to the last one finishing. */
  wallMs: number;
  /** N * newTokens / wall. */
  aggTokS: number;
  /** Mean engine step time over steps with no prompt tokens, ms. */
  decodeStepMs: number;
  /** Request 0 (same prompt as N=1) produced the same ids as N=1. */
  matchesN1: boolean;
  runs: number;
}

export interface CaseResult {
  kind: CaseKind;
  model: ModelId;
  modelLabel: string;
  device: string;
  /** Human description of what actually ran (adapter, runtime). */
  runtime: string;
  promptTokens: number;
  newTokens: number;
  runs: RunFigures[];
  loadMs: number;
  warmupMs: number;
  peakRssMB: number;
  gpuWeightBytes?: number;
  gpuKvBytes?: number;
  /** Weft: mean decode step ms and the part spent recording commands on the CPU. */
  stepMs?: number;
  recordMs?: number;
  /** Weft: median round trip of an empty step (submit + 16-byte readback), ms. */
  syncMs?: number;
  /** Weft: mean dispatches per decode step (forward + sampling). */
  dispatches?: number;
  /** Weft: how decode steps ran, e.g. "megakernel 63/63", or why the megakernel is off. */
  decodePath?: string;
  batch?: BatchFigures[];
  loadAvg: [number, number];
  wallSec: number;
  error?: string;
}


function logErr(s: string): void {
  process.stderr.write(`${s}\n`);
}

// ---------------------------------------------------------------------------------------
// Child-side runners

interface StepRecord {
  ms: number;
  recordMs: number;
  dispatches: number;
  megakernel: boolean;
  promptTokens: number;
  tokens: number;
}

async function runWeft(spec: CaseSpec): Promise<Partial<CaseResult>> {
  const ctx = await GpuContext.create({ backend: spec.device });
  const batch = spec.kind === 'weft-batch';
  const t0 = performance.now();
  const loaded = await loadDecoder(ctx, dirSource(spec.model.weftDir), { maxSeqs: batch ? 16 : 1, prefixCaching: false });
  const loadMs = performance.now() - t0;
  const info = ctx.gpu.info;
  const runtime = `Dawn ${info.backend}: ${info.name} (${info.featureLevel}), variant ${ctx.variant}`;

  // Instrument: each engine step, and the CPU-side recording inside it.
  let steps: StepRecord[] = [];
  let recordMs = 0;
  let lastRec: { dispatches: number } | null = null;
  let lastMega = false;
  const model = loaded.model;
  const record = model.record.bind(model);
  model.record = async (rec, s: StepInputs, opts) => {
    lastRec = rec;
    lastMega = model.decodePath(s) === 'megakernel';
    const a = performance.now();
    const r = await record(rec, s, opts);
    recordMs += performance.now() - a;
    return r;
  };
  const runner = loaded.engine.runner;
  const step = runner.step.bind(runner);
  runner.step = async (plan, rows) => {
    recordMs = 0;
    const a = performance.now();
    const r = await step(plan, rows);
    const promptTokens = plan.scheduled.reduce((n, s) => n + (s.sample ? s.count - 1 : s.count), 0);
    steps.push({ ms: performance.now() - a, recordMs, dispatches: lastRec?.dispatches ?? NaN, megakernel: lastMega, promptTokens, tokens: r.tokens });
    return r;
  };

  const one = async (ids: number[]): Promise<RunFigures & { events: number[] }> => {
    const start = performance.now();
    const stamps: number[] = [];
    let tokenIds: number[] = [];
    for await (const ev of loaded.engine.generate(ids, { maxNewTokens: spec.newTokens, ignoreEos: true, sampling: { temperature: 0 } })) {
      if (ev.type === 'token') stamps.push(performance.now());
      else tokenIds = ev.tokenIds;
    }
    const end = performance.now();
    const first = stamps[0] ?? end;
    const last = stamps[stamps.length - 1] ?? end;
    return {
      prefillMs: NaN,
      ttftMs: first - start,
      decodeTokS: stamps.length > 1 ? (stamps.length - 1) / ((last - first) / 1000) : NaN,
      totalMs: end - start,
      tokenIds,
      events: stamps,
    };
  };

  const out: Partial<CaseResult> = {
    runtime,
    loadMs,
    gpuWeightBytes: loaded.weights.bytes,
    gpuKvBytes: model.kvBytes,
  };
  if (!batch) {
    let warmupMs = 0;
    for (let i = 0; i < spec.warmup; i++) warmupMs += (await one(spec.promptIds)).totalMs;
    const runs: RunFigures[] = [];
    const decodeSteps: StepRecord[] = [];
    for (let i = 0; i < spec.runs; i++) {
      steps = [];
      const r = await one(spec.promptIds);
      r.prefillMs = steps[0]?.ms ?? NaN;
      decodeSteps.push(...steps.filter((s) => s.promptTokens === 0));
      runs.push({ prefillMs: r.prefillMs, ttftMs: r.ttftMs, decodeTokS: r.decodeTokS, totalMs: r.totalMs, tokenIds: r.tokenIds });
      logErr(`  run ${i + 1}/${spec.runs}: prefill ${r.prefillMs.toFixed(1)} ms, ttft ${r.ttftMs.toFixed(1)} ms, decode ${r.decodeTokS.toFixed(2)} tok/s`);
    }
    // The fixed cost of one GPU round trip: record nothing but a 16-byte readback.
    const tiny = ctx.tensor(new Float32Array(4), [4], 'f32');
    const trips: number[] = [];
    for (let i = 0; i < 20; i++) {
      const a = performance.now();
      await ctx.read(tiny);
      trips.push(performance.now() - a);
    }
    tiny.buffer.destroy();
    Object.assign(out, {
      warmupMs,
      runs,
      stepMs: mean(decodeSteps.map((s) => s.ms)),
      recordMs: mean(decodeSteps.map((s) => s.recordMs)),
      syncMs: median(trips),
      dispatches: mean(decodeSteps.map((s) => s.dispatches)),
      decodePath:
        model.megakernelOff === null
          ? `megakernel ${decodeSteps.filter((s) => s.megakernel).length}/${decodeSteps.length}`
          : `generic (megakernel off: ${model.megakernelOff})`,
    });
  } else {
    // Distinct prompts per request (last prompt token varied) so no two requests are alike.
    const V = loaded.cfg.vocabSize;
    const promptFor = (k: number): number[] => {
      const p = [...spec.promptIds];
      p[p.length - 1] = (p[p.length - 1]! + 7 * k) % V;
      return p;
    };
    const levels = spec.batch ?? [1, 4, 16];
    const maxN = Math.max(...levels);
    const t = performance.now();
    // Warm up at every level: each batch size may take its own kernels (the decode megakernel
    // compiles one variant per rows-per-workgroup), which must not land in a timed run.
    for (let i = 0; i < spec.warmup; i++) for (const n of [maxN, ...levels.filter((l) => l !== maxN)]) await Promise.all(Array.from({ length: n }, (_, k) => one(promptFor(k))));
    out.warmupMs = performance.now() - t;
    const figures: BatchFigures[] = [];
    let ref1: number[] | undefined;
    const runs: RunFigures[] = [];
    for (const n of levels) {
      const walls: number[] = [];
      const stepMs: number[] = [];
      let matches = true;
      for (let i = 0; i < spec.runs; i++) {
        steps = [];
        const a = performance.now();
        const res = await Promise.all(Array.from({ length: n }, (_, k) => one(promptFor(k))));
        walls.push(performance.now() - a);
        stepMs.push(...steps.filter((s) => s.promptTokens === 0).map((s) => s.ms));
        if (n === 1) {
          ref1 ??= res[0]!.tokenIds;
          if (i === 0) runs.push({ ...res[0]!, prefillMs: steps[0]?.ms ?? NaN });
        }
        if (ref1 && res[0]!.tokenIds.join() !== ref1.join()) matches = false;
      }
      const wallMs = median(walls);
      figures.push({ n, wallMs, aggTokS: (n * spec.newTokens) / (wallMs / 1000), decodeStepMs: mean(stepMs), matchesN1: matches, runs: spec.runs });
      logErr(`  N=${n}: ${((n * spec.newTokens) / (wallMs / 1000)).toFixed(1)} tok/s aggregate, wall ${(wallMs / 1000).toFixed(2)} s`);
    }
    out.batch = figures;
    out.runs = runs;
  }
  loaded.destroy();
  ctx.destroy();
  return out;
}

async function runTsCpu(spec: CaseSpec): Promise<Partial<CaseResult>> {
  const t0 = performance.now();
  const ms = dirSource(spec.model.weftDir);
  const cfg = parseDecoderConfig(await ms.readText('config.json'));
  const st = await openSafetensorsModel(ms);
  const weights = new Map<string, Float32Array>();
  for (const [name, t] of st.tensors) weights.set(name, toFloat32(t.info.dtype, await st.read(name)));
  const ref = new LlamaReference(cfg, (n) => {
    const w = weights.get(n);
    if (!w) throw new Error(`missing tensor ${n}`);
    return w;
  });
  const loadMs = performance.now() - t0;
  const one = (): RunFigures => {
    ref.reset();
    const start = performance.now();
    const logits = ref.prefill(spec.promptIds);
    const prefillMs = performance.now() - start;
    const ids = [argmax(logits)];
    const first = performance.now();
    for (let i = 1; i < spec.newTokens; i++) ids.push(argmax(ref.step(ids[i - 1]!)));
    const end = performance.now();
    return {
      prefillMs,
      ttftMs: first - start,
      decodeTokS: spec.newTokens > 1 ? (spec.newTokens - 1) / ((end - first) / 1000) : NaN,
      totalMs: end - start,
      tokenIds: ids,
    };
  };
  let warmupMs = 0;
  for (let i = 0; i < spec.warmup; i++) warmupMs += one().totalMs;
  const runs: RunFigures[] = [];
  for (let i = 0; i < spec.runs; i++) {
    const r = one();
    runs.push(r);
    logErr(`  run ${i + 1}/${spec.runs}: prefill ${r.prefillMs.toFixed(1)} ms, decode ${r.decodeTokS.toFixed(2)} tok/s`);
  }
  return { runtime: `plain TypeScript on V8 (${process.version}), one thread`, loadMs, warmupMs, runs };
}

async function runTjs(spec: CaseSpec): Promise<Partial<CaseResult>> {
  const { runTransformersJs } = await import('./peers/transformers_js.ts');
  const r = await runTransformersJs({
    device: spec.device as TjsDevice,
    root: spec.model.onnxRoot,
    name: spec.model.onnxName,
    promptIds: spec.promptIds,
    newTokens: spec.newTokens,
    runs: spec.runs,
    warmup: spec.warmup,
    log: logErr,
  });
  return { runtime: r.runtime, loadMs: r.loadMs, warmupMs: r.warmupMs, runs: r.runs };
}

/**
 * A case's result before any figures: identity, no runs, NaN times and memory; `la0` is the
 * 1-minute load and `t0` the performance.now() at the case's start.
 */
function baseResult(spec: CaseSpec, la0: number, t0: number): CaseResult {
  return {
    kind: spec.kind,
    model: spec.model.id,
    modelLabel: spec.model.label,
    device: spec.device,
    runtime: '',
    promptTokens: spec.promptIds.length,
    newTokens: spec.newTokens,
    runs: [],
    loadMs: NaN,
    warmupMs: NaN,
    peakRssMB: NaN,
    loadAvg: [la0, loadavg()[0]!],
    wallSec: (performance.now() - t0) / 1000,
  };
}

async function childMain(specJson: string): Promise<void> {
  const spec = JSON.parse(specJson) as CaseSpec;
  const la0 = loadavg()[0]!;
  const t0 = performance.now();
  let part: Partial<CaseResult> = {};
  let error: string | undefined;
  try {
    if (spec.kind === 'weft' || spec.kind === 'weft-batch') part = await runWeft(spec);
    else if (spec.kind === 'ts-cpu') part = await runTsCpu(spec);
    else part = await runTjs(spec);
  } catch (e) {
    error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    logErr(`  error: ${e instanceof Error ? e.stack : e}`);
  }
  const result: CaseResult = {
    ...baseResult(spec, la0, t0),
    ...part,
    peakRssMB: process.resourceUsage().maxRSS / 1024,
    ...(error ? { error } : {}),
  };
  process.stdout.write(`\n${RESULT_TAG}${JSON.stringify(result)}\n`);
  process.exit(0);
}

// ---------------------------------------------------------------------------------------
// Parent side

export interface GenerateBenchOptions {
  models?: ModelId[];
  /** Dawn backends for Weft (default swiftshader, opengles). */
  backends?: string[];
  /** transformers.js devices (default cpu, cpu-1t, wasm, webgpu-opengles). */
  peers?: TjsDevice[];
  tsCpu?: boolean;
  runs?: number;
  warmup?: number;
  promptTokens?: number;
  /** New tokens per model (default stories260K 200, llama20m 16). */
  tokens?: Partial<Record<ModelId, number>>;
  /** transformers.js WebGPU (very slow on software GL): tokens per model and runs. */
  slowTokens?: Partial<Record<ModelId, number>>;
  slowRuns?: number;
  /** Batched Weft throughput on stories260K (empty: skip). */
  batch?: number[];
  batchTokens?: number;
  batchRuns?: number;
  /** Per-case child timeout. */
  timeoutSec?: number;
  log?: (s: string) => void;
}

export const DEFAULTS = {
  models: ['stories260K', 'llama20m'] as ModelId[],
  backends: ['swiftshader', 'opengles'],
  peers: ['cpu', 'cpu-1t', 'wasm', 'webgpu-opengles'] as TjsDevice[],
  runs: 5,
  warmup: 1,
  promptTokens: 15,
  tokens: { stories260K: 200, llama20m: 16 } as Record<ModelId, number>,
  slowTokens: { stories260K: 24, llama20m: 4 } as Record<ModelId, number>,
  slowRuns: 3,
  batch: [1, 4, 16],
  batchTokens: 64,
  batchRuns: 3,
  timeoutSec: 1500,
};

async function runChild(spec: CaseSpec, timeoutSec: number, log: (s: string) => void): Promise<CaseResult> {
  const t0 = performance.now();
  const la0 = loadavg()[0]!;
  const r = await runBenchChild<CaseResult>(THIS_FILE, spec, RESULT_TAG, timeoutSec, log);
  return r.ok ? r.result : { ...baseResult(spec, la0, t0), error: r.error };
}

export interface GenerateBenchReport {
  cases: CaseResult[];
  promptIds: number[];
  startedAt: string;
  wallSec: number;
  loadAvgStart: number[];
  loadAvgEnd: number[];
  machine: string;
}

export function machineDescription(): string {
  const c = cpus();
  return `${c[0]?.model.trim() ?? 'unknown CPU'}, ${c.length} logical CPUs, ${(totalmem() / 2 ** 30).toFixed(0)} GiB RAM, no hardware GPU (Dawn SwiftShader / llvmpipe), Node ${process.version}, ${process.platform} ${process.arch}`;
}

export async function benchGenerate(o: GenerateBenchOptions = {}): Promise<GenerateBenchReport> {
  const log = o.log ?? logErr;
  const models = o.models ?? DEFAULTS.models;
  const backends = o.backends ?? DEFAULTS.backends;
  const peers = o.peers ?? DEFAULTS.peers;
  const runs = o.runs ?? DEFAULTS.runs;
  const warmup = o.warmup ?? DEFAULTS.warmup;
  const tokens = { ...DEFAULTS.tokens, ...o.tokens };
  const slowTokens = { ...DEFAULTS.slowTokens, ...o.slowTokens };
  const batch = o.batch ?? DEFAULTS.batch;
  const started = performance.now();
  const startedAt = new Date().toISOString();
  const loadAvgStart = loadavg();

  const tok = await loadTokenizerFromSource(dirSource((await ensureModel('stories260K', { onnx: false, log })).weftDir));
  const promptIds = tok.encode(PROMPT_TEXT, { addSpecialTokens: true }).slice(0, o.promptTokens ?? DEFAULTS.promptTokens);

  const specs: CaseSpec[] = [];
  for (const id of models) {
    const model = await ensureModel(id, { onnx: peers.length > 0, log });
    const base = { model, promptIds, newTokens: tokens[id], runs, warmup };
    for (const b of backends) specs.push({ ...base, kind: 'weft', device: b });
    if (o.tsCpu ?? true) specs.push({ ...base, kind: 'ts-cpu', device: 'cpu' });
    for (const p of peers) {
      const slow = p.startsWith('webgpu');
      specs.push({ ...base, kind: 'tjs', device: p, ...(slow ? { newTokens: Math.min(tokens[id], slowTokens[id]), runs: Math.min(runs, o.slowRuns ?? DEFAULTS.slowRuns) } : {}) });
    }
  }
  if (batch.length && models.includes('stories260K')) {
    const model = await ensureModel('stories260K', { onnx: false, log });
    for (const b of backends) {
      specs.push({ kind: 'weft-batch', model, device: b, promptIds, newTokens: o.batchTokens ?? DEFAULTS.batchTokens, runs: o.batchRuns ?? DEFAULTS.batchRuns, warmup: 1, batch });
    }
  }

  const cases: CaseResult[] = [];
  for (const [i, s] of specs.entries()) {
    log(`[${i + 1}/${specs.length}] ${s.kind} ${s.device} on ${s.model.label}: ${s.newTokens} new tokens, ${s.warmup} warm-up + ${s.runs} runs${s.batch ? `, N = ${s.batch.join(', ')}` : ''} (load avg ${loadavg()[0]!.toFixed(1)})`);
    const r = await runChild(s, o.timeoutSec ?? DEFAULTS.timeoutSec, log);
    if (r.error) log(`  FAILED: ${r.error}`);
    log(`  done in ${r.wallSec.toFixed(0)} s`);
    cases.push(r);
  }
  return {
    cases,
    promptIds,
    startedAt,
    wallSec: (performance.now() - started) / 1000,
    loadAvgStart,
    loadAvgEnd: loadavg(),
    machine: machineDescription(),
  };
}

// ---------------------------------------------------------------------------------------
if (process.argv[1] === THIS_FILE) {
  const i = process.argv.indexOf('--child');
  if (i >= 0) {
    await childMain(process.argv[i + 1]!);
  } else {
    runStandalone('generate', process.argv.slice(2));
  }
}
