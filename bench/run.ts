/**
 * `npm run bench`: runs every benchmark module and prints markdown tables.
 *
 *   npm run bench [-- --only generate,matvec,structured,load] [--models stories260K,llama20m]
 *                 [--backends swiftshader,opengles] [--peers cpu,cpu-1t,wasm,webgpu-opengles]
 *                 [--runs 5] [--warmup 1] [--tokens 200] [--tokens-large 16]
 *                 [--slow-tokens 24] [--slow-tokens-large 4] [--slow-runs 3]
 *                 [--batch 1,4,16] [--batch-tokens 64] [--batch-runs 3] [--no-ts-cpu]
 *                 [--serving-concurrency 1,4,16,64] [--serving-tokens 64] [--serving-runs 3]
 *                 [--timeout 1500] [--quick] [--out FILE.md]
 *
 * Modules (all by default, in this order):
 * - `generate` (bench/generate.ts): end-to-end generation against the TS CPU reference
 *   and transformers.js, plus Weft's batched throughput;
 * - `matvec` (bench/matvec.ts): one matrix-vector product per dtype and kernel variant;
 * - `structured` (bench/structured.ts): compile and per-token mask times with the Llama 3
 *   vocabulary (once), constraint compile times and constrained decode per `--backends` entry;
 * - `load` (bench/load.ts): loopback HTTP load on /generate_stream, default settings;
 * - `embeddings` (bench/embeddings.ts): embeddings/s at batch 1, 8, 32 of a 6-layer,
 *   384-wide encoder, Weft native next to onnxruntime-web (WASM, WebGPU EP) (`--quick`: 2 runs,
 *   600 s per WebGPU EP case);
 * - `documents` (bench/documents.ts): document ingest through POST /api/v1/documents, 1,000
 *   small and 20 large documents with the default USE-Lite embedder: documents/s, chunks/s,
 *   peak RSS, the embedder's share of the time (`--quick`: 50 small, 2 large of 4 KiB);
 * - `speculative` (bench/speculative.ts): decode tokens/s of stories260K without a draft,
 *   with itself and with its Q8_0 GGUF as the draft, per `--backends` entry;
 * - `serving` (bench/serving.ts): batched serving per `--models` × `--backends` case:
 *   aggregate tok/s at `--serving-concurrency` (default 1,4,16,64) against the same requests
 *   run one after another, TTFT under load, KV bytes/token f32 vs q8, prefix-hit speedup.
 *   `--serving-tokens` (default 64 on stories260K, 16 on llama20m) and `--serving-runs`
 *   (default 5 / 1) apply to every model; `--timeout` per case (default 3600 s here);
 * - `host` (bench/host.ts; only with `--only host`: it builds ~1.7 GB of random f16 weights): host
 *   time to record and submit one decode step of the Llama-3.2-1B and Qwen2.5-0.5B shapes at
 *   `--host-batch` (default 1,16,64), µs per step and per dispatch, device time excluded
 *   (`--host-steps`, default 30; `--host-layers 2,24`: layers built of the 1B and 0.5B shapes;
 *   `--quick`: 10 steps, batch 1 and 16; `--host-variant gpu|cpu`, default gpu: the fused kernels
 *   a GPU host records);
 * - `memory` (bench/memory.ts; only with `--only memory`: it writes ~1 GB checkpoints):
 *   real-shape models per format (bf16 safetensors; GGUF Q8_0, and every GGUF kernel type at the
 *   Llama-3.2-1B / Gemma-2-2B shapes: bench/memory.ts REALSHAPE_GGUF), device weight bytes vs
 *   file bytes, KV bytes/token, peak RSS while loading vs the largest file, load time (first
 *   `--backends` entry).
 * - `cluster` (bench/cluster.ts): the same reader in-process and as a `weft reader --nats`
 *   process behind one front end: requests/s, TTFT p50 and tok/s at concurrency 1 and 32,
 *   NATS / in-process as ratios (needs `nats-server`; `--quick`: concurrency 1, 8).
 * All but `generate` and `serving` are other engineers' modules, imported by URL and called through their
 * exported functions when present (skipped with a note otherwise). A module that throws
 * becomes a "failed" line in the report. `--peers none`, `--batch none` skip parts of
 * `generate`.
 * `--quick`: 3 runs, 64 / 8 new tokens, batch N = 1, 4 with 32 tokens; serving N = 1, 4 with
 * 16 tokens, 1 round: a smoke run.
 * The report (with machine, date and load average) is printed and also written to
 * `.cache/bench/latest.md` (and `latest.json` with every raw figure).
 */
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { benchGenerate, DEFAULTS, machineDescription, type GenerateBenchOptions, type GenerateBenchReport } from './generate.ts';
import { markdownGenerate } from './generate_report.ts';
import { BENCH_CACHE, MODEL_IDS, type ModelId } from './models.ts';
import { benchHost, HOST_DEFAULTS, hostTable } from './host.ts';
import { VARIANTS, type Variant } from '../core/ops/variant.ts';
import { benchServing, servingTable, type ServingReport } from './serving.ts';
import type { TjsDevice } from './peers/transformers_js.ts';

/** `--host-variant`: the kernel family the host bench records. */
function hostVariant(v: string): Variant {
  if (!(VARIANTS as readonly string[]).includes(v)) throw new Error(`--host-variant: ${v} is not one of ${VARIANTS.join(', ')}`);
  return v as Variant;
}

const MODULES = ['generate', 'matvec', 'structured', 'load', 'embeddings', 'documents', 'speculative', 'serving', 'cluster', 'memory', 'host'] as const;
type ModuleName = (typeof MODULES)[number];

const list = (v: string | undefined): string[] | undefined =>
  v === undefined ? undefined : v === 'none' || v === '' ? [] : v.split(',').map((s) => s.trim()).filter(Boolean);

const int = (v: string | undefined, name: string): number | undefined => {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a non-negative integer, got "${v}"`);
  return n;
};

type Fn = (...a: unknown[]) => unknown;

/**
 * Imports a sibling bench module other engineers own (matvec.ts, structured.ts,
 * load.ts) by URL, so this file neither breaks nor fails to type-check when one of
 * them changes shape or is absent; returns its named exports that are functions.
 */
async function sibling(file: string, names: string[]): Promise<Record<string, Fn> | string> {
  const url = new URL(`./${file}`, import.meta.url);
  if (!existsSync(fileURLToPath(url))) return `_bench/${file} not found; skipped._`;
  const mod = (await import(url.href)) as Record<string, unknown>;
  const out: Record<string, Fn> = {};
  for (const n of names) if (typeof mod[n] === 'function') out[n] = mod[n] as Fn;
  return out;
}

async function runMatvec(backends: string[], log: (s: string) => void): Promise<string> {
  const m = await sibling('matvec.ts', ['benchMatvec', 'markdownTable']);
  if (typeof m === 'string') return m;
  if (!m.benchMatvec) return '_bench/matvec.ts exports no benchMatvec(); skipped._';
  log('matvec: bench/matvec.ts benchMatvec()');
  const rows = (await m.benchMatvec({ backends })) as unknown[];
  return m.markdownTable ? (m.markdownTable(rows) as string) : `\`\`\`json\n${JSON.stringify(rows, null, 1)}\n\`\`\``;
}

async function runStructured(backends: string[], log: (s: string) => void): Promise<string> {
  const m = await sibling('structured.ts', ['benchStructured']);
  if (typeof m === 'string') return m;
  if (!m.benchStructured) return '_bench/structured.ts exports no benchStructured(); skipped._';
  const parts: string[] = [];
  for (const [i, backend] of backends.entries()) {
    // Compile and mask figures do not depend on the GPU backend: measured once, with the first.
    log(`structured: bench/structured.ts benchStructured({ backend: ${backend}, masks: ${i === 0} })`);
    parts.push(String(await m.benchStructured({ backend, masks: i === 0 })));
  }
  return parts.join('\n\n');
}

async function runLoad(log: (s: string) => void): Promise<string> {
  const m = await sibling('load.ts', ['benchLoad', 'loadTable']);
  if (typeof m === 'string') return m;
  if (!m.benchLoad) return '_bench/load.ts exports no benchLoad(); skipped._';
  log('load: bench/load.ts benchLoad() (loopback HTTP service, default settings)');
  const r = await m.benchLoad({});
  return m.loadTable ? (m.loadTable(r) as string) : `\`\`\`json\n${JSON.stringify(r, null, 1)}\n\`\`\``;
}

async function runEmbeddings(backends: string[], quick: boolean, log: (s: string) => void): Promise<string> {
  const m = await sibling('embeddings.ts', ['benchEmbeddings', 'embeddingsTable']);
  if (typeof m === 'string') return m;
  if (!m.benchEmbeddings || !m.embeddingsTable) return '_bench/embeddings.ts exports no benchEmbeddings() / embeddingsTable(); skipped._';
  return m.embeddingsTable(await m.benchEmbeddings({ backends, log, ...(quick ? { runs: 2, webgpuTimeoutS: 600 } : {}) })) as string;
}

async function runCluster(quick: boolean, log: (s: string) => void): Promise<string> {
  const m = await sibling('cluster.ts', ['benchCluster', 'clusterTable']);
  if (typeof m === 'string') return m;
  if (!m.benchCluster || !m.clusterTable) return '_bench/cluster.ts exports no benchCluster() / clusterTable(); skipped._';
  return m.clusterTable(await m.benchCluster({ log, ...(quick ? { concurrency: [1, 8], tokens: 16 } : {}) })) as string;
}

async function runDocuments(quick: boolean, log: (s: string) => void): Promise<string> {
  const m = await sibling('documents.ts', ['benchDocuments', 'documentsTable']);
  if (typeof m === 'string') return m;
  if (!m.benchDocuments || !m.documentsTable) return '_bench/documents.ts exports no benchDocuments() / documentsTable(); skipped._';
  return m.documentsTable(await m.benchDocuments({ log, ...(quick ? { small: 50, large: 2, largeKb: 4 } : {}) })) as string;
}

async function runSpeculative(backends: string[], quick: boolean, log: (s: string) => void): Promise<string> {
  const m = await sibling('speculative.ts', ['benchSpeculative', 'speculativeTable']);
  if (typeof m === 'string') return m;
  if (!m.benchSpeculative || !m.speculativeTable) return '_bench/speculative.ts exports no benchSpeculative() / speculativeTable(); skipped._';
  const parts: string[] = [];
  for (const backend of backends) parts.push(m.speculativeTable(await m.benchSpeculative({ backend, log, ...(quick ? { tokens: 48, rounds: 2, concurrency: [1] } : {}) })) as string);
  return parts.join('\n\n');
}

async function runMemory(backends: string[], log: (s: string) => void): Promise<string> {
  const m = await sibling('memory.ts', ['benchMemory', 'memoryTable']);
  if (typeof m === 'string') return m;
  if (!m.benchMemory || !m.memoryTable) return '_bench/memory.ts exports no benchMemory() / memoryTable(); skipped._';
  return m.memoryTable(await m.benchMemory({ backend: backends[0], log })) as string;
}

/** Runs one module; a failure becomes a line in the report instead of ending the run. */
async function section(title: string, fn: () => Promise<string>, log: (s: string) => void): Promise<string> {
  try {
    return `### ${title}\n\n${await fn()}\n`;
  } catch (e) {
    log(`${title}: failed: ${e instanceof Error ? e.stack : e}`);
    return `### ${title}\n\n_failed: ${e instanceof Error ? e.message : String(e)}_\n`;
  }
}

export async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      only: { type: 'string' },
      models: { type: 'string' },
      backends: { type: 'string' },
      peers: { type: 'string' },
      runs: { type: 'string' },
      warmup: { type: 'string' },
      tokens: { type: 'string' },
      'tokens-large': { type: 'string' },
      'slow-tokens': { type: 'string' },
      'slow-tokens-large': { type: 'string' },
      'slow-runs': { type: 'string' },
      batch: { type: 'string' },
      'batch-tokens': { type: 'string' },
      'batch-runs': { type: 'string' },
      'serving-concurrency': { type: 'string' },
      'serving-tokens': { type: 'string' },
      'serving-runs': { type: 'string' },
      'no-ts-cpu': { type: 'boolean' },
      'host-batch': { type: 'string' },
      'host-steps': { type: 'string' },
      'host-layers': { type: 'string' },
      'host-variant': { type: 'string' },
      timeout: { type: 'string' },
      quick: { type: 'boolean' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    const src = await import('node:fs').then((fs) => fs.readFileSync(fileURLToPath(import.meta.url), 'utf8'));
    process.stdout.write(`${src.split('*/')[0]!.replace(/^\/\*\*|^ \* ?/gm, '')}\n`);
    return 0;
  }
  const log = (s: string): void => void process.stderr.write(`${s}\n`);
  const only = (list(values.only) ?? MODULES.filter((m) => m !== 'memory' && m !== 'host')) as ModuleName[];
  for (const m of only) if (!MODULES.includes(m)) throw new Error(`--only: unknown module ${m} (have ${MODULES.join(', ')})`);
  const models = (list(values.models) ?? DEFAULTS.models) as ModelId[];
  for (const m of models) if (!MODEL_IDS.includes(m)) throw new Error(`--models: unknown model ${m} (have ${MODEL_IDS.join(', ')})`);
  const backends = list(values.backends) ?? DEFAULTS.backends;
  const quick = values.quick ?? false;

  const opts: GenerateBenchOptions = {
    models,
    backends,
    peers: (list(values.peers) ?? DEFAULTS.peers) as TjsDevice[],
    tsCpu: !values['no-ts-cpu'],
    runs: int(values.runs, 'runs') ?? (quick ? 3 : DEFAULTS.runs),
    warmup: int(values.warmup, 'warmup') ?? DEFAULTS.warmup,
    tokens: {
      stories260K: int(values.tokens, 'tokens') ?? (quick ? 64 : DEFAULTS.tokens.stories260K),
      llama20m: int(values['tokens-large'], 'tokens-large') ?? (quick ? 8 : DEFAULTS.tokens.llama20m),
    },
    slowTokens: {
      stories260K: int(values['slow-tokens'], 'slow-tokens') ?? (quick ? 8 : DEFAULTS.slowTokens.stories260K),
      llama20m: int(values['slow-tokens-large'], 'slow-tokens-large') ?? (quick ? 2 : DEFAULTS.slowTokens.llama20m),
    },
    slowRuns: int(values['slow-runs'], 'slow-runs') ?? DEFAULTS.slowRuns,
    batch: (list(values.batch) ?? (quick ? ['1', '4'] : DEFAULTS.batch.map(String))).map((s) => int(s, 'batch')!),
    batchTokens: int(values['batch-tokens'], 'batch-tokens') ?? (quick ? 32 : DEFAULTS.batchTokens),
    batchRuns: int(values['batch-runs'], 'batch-runs') ?? (quick ? 1 : DEFAULTS.batchRuns),
    timeoutSec: int(values.timeout, 'timeout') ?? DEFAULTS.timeoutSec,
    log,
  };

  const started = new Date();
  const la0 = loadavg();
  const sections: string[] = [];
  const raw: { generate?: GenerateBenchReport; serving?: ServingReport } = {};
  sections.push(`## Weft benchmarks — ${started.toISOString()}`);
  sections.push('');
  sections.push(`Machine: ${machineDescription()}. Load average at start: ${la0.map((x) => x.toFixed(2)).join(', ')} (1/5/15 min).`);
  sections.push('');
  if (only.includes('generate')) {
    sections.push(
      await section(
        'Generation',
        async () => {
          const rep = await benchGenerate(opts);
          raw.generate = rep;
          return markdownGenerate(rep);
        },
        log,
      ),
    );
  }
  if (only.includes('matvec')) {
    sections.push(await section('matvec (M=1, K=N=2048; bench/matvec.ts)', () => runMatvec(backends, log), log));
  }
  if (only.includes('structured')) {
    sections.push(await section('Structured output (bench/structured.ts)', () => runStructured(backends, log), log));
  }
  if (only.includes('load')) {
    sections.push(await section('HTTP load (bench/load.ts)', () => runLoad(log), log));
  }
  if (only.includes('embeddings')) {
    sections.push(await section('Embeddings (bench/embeddings.ts)', () => runEmbeddings(backends, quick, log), log));
  }
  if (only.includes('documents')) {
    sections.push(await section('Document ingest (bench/documents.ts)', () => runDocuments(quick, log), log));
  }
  if (only.includes('speculative')) {
    sections.push(await section('Speculative decoding (bench/speculative.ts)', () => runSpeculative(backends, quick, log), log));
  }
  if (only.includes('cluster')) {
    sections.push(await section('Readers over NATS vs in-process (bench/cluster.ts)', () => runCluster(quick, log), log));
  }
  if (only.includes('host')) {
    const layers = list(values['host-layers'])?.map((s) => int(s, 'host-layers')!);
    sections.push(
      await section(
        'Host overhead per decode step (bench/host.ts)',
        async () =>
          hostTable(
            await benchHost({
              backend: backends[0],
              log,
              batches: list(values['host-batch'])?.map((s) => int(s, 'host-batch')!) ?? (quick ? [1, 16] : HOST_DEFAULTS.batches),
              steps: int(values['host-steps'], 'host-steps') ?? (quick ? 10 : HOST_DEFAULTS.steps),
              ...(layers ? { layers: { 'llama-3.2-1b': layers[0], 'qwen2.5-0.5b': layers[1] ?? layers[0] } } : {}),
              ...(values['host-variant'] ? { variant: hostVariant(values['host-variant']) } : {}),
            }),
          ),
        log,
      ),
    );
  }
  if (only.includes('memory')) {
    sections.push(await section('Real-shape model memory (bench/memory.ts)', () => runMemory(backends, log), log));
  }
  if (only.includes('serving')) {
    const each = <T,>(v: T | undefined): Partial<Record<ModelId, T>> | undefined => (v === undefined ? undefined : { stories260K: v, llama20m: v });
    const levels = list(values['serving-concurrency'])?.map((s) => int(s, 'serving-concurrency')!);
    const tokens = each(int(values['serving-tokens'], 'serving-tokens') ?? (quick ? 16 : undefined));
    const runs = each(int(values['serving-runs'], 'serving-runs') ?? (quick ? 1 : undefined));
    const timeoutSec = int(values.timeout, 'timeout');
    sections.push(
      await section(
        'Batched serving (bench/serving.ts)',
        async () => {
          const rep = await benchServing({
            models,
            backends,
            log,
            ...(levels ? { levels } : quick ? { levels: [1, 4] } : {}),
            ...(tokens ? { tokens } : {}),
            ...(runs ? { runs } : {}),
            ...(timeoutSec !== undefined ? { timeoutSec } : {}),
          });
          raw.serving = rep;
          return servingTable(rep);
        },
        log,
      ),
    );
  }
  const la1 = loadavg();
  sections.push(`Finished ${new Date().toISOString()} (${((Date.now() - started.getTime()) / 60000).toFixed(1)} min); load average at end: ${la1.map((x) => x.toFixed(2)).join(', ')}.`);
  const md = sections.join('\n');
  process.stdout.write(`${md}\n`);
  await mkdir(BENCH_CACHE, { recursive: true });
  const outFile = values.out ?? join(BENCH_CACHE, 'latest.md');
  await writeFile(outFile, `${md}\n`);
  await writeFile(outFile.replace(/\.md$/, '') + '.json', JSON.stringify({ startedAt: started.toISOString(), loadAvgStart: la0, loadAvgEnd: la1, ...raw }, null, 1));
  log(`bench: report written to ${outFile}`);
  return 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const code = await main(process.argv.slice(2));
  // Dawn can keep the event loop alive after its devices are destroyed.
  process.exit(code);
}
