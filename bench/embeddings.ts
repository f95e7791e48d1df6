/**
 * Embeddings throughput: Weft's native encoder kernels next to the same model through
 * onnxruntime-web, in one run.
 *
 *   npx tsx bench/embeddings.ts [--backends swiftshader,opengles] [--batches 1,8,32]
 *        [--runs 5] [--warmup 1] [--tokens 32] [--no-ort-webgpu] [--timeout 900]
 *        [--webgpu-timeout 1800] [--quick]
 *
 * What: a 6-layer, 384-wide BERT (all-MiniLM-L6-v2's shape) with random weights, made by
 * scripts/bench/export_encoder384.py into .cache/bench/encoder384/ (safetensors + the same
 * weights as onnx/model.onnx, the bert fixture's WordPiece tokenizer, mean pooling +
 * Normalize). Each case calls `embed()` of the common encoder API (loadEncoder) on batches
 * of distinct texts of `tokens` tokens (specials included) and reports embeddings/s =
 * batch / median wall time of `runs` calls after `warmup` calls. Tokenization, batching and
 * pooling are the same code for both engines, so the difference is the transformer body.
 * Cases: Weft native on each Dawn backend; onnxruntime-web's WASM EP (1 thread); its
 * WebGPU EP on Weft's Dawn device for each backend. ORT compiles WebGPU pipelines per
 * shape on first use, blocking the event loop (a minute or more per new shape on these CPU
 * adapters): the warm-up call of each batch size absorbs that, and "load s" shows it.
 * Why child processes: one Dawn device per process, and a case that blocks its event loop
 * can only be ended by a parent's timeout.
 *
 * `benchEmbeddings()` returns the figures; `embeddingsTable()` renders the markdown tables
 * (ratios are against onnxruntime-web WASM at the same batch size, then Weft native against
 * onnxruntime-web's WebGPU EP on the same adapter, the issue's goal of >= 1.0x). A case killed at its
 * timeout keeps what it measured before (load time, finished batch sizes). Run directly,
 * the report is also written to .cache/bench/embeddings-latest.json.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { GpuContext } from '../core/gpu/context.ts';
import { loadEncoder, type Encoder } from '../core/models/load_encoder.ts';
import type { OnnxExecutionProvider } from '../core/models/onnx_runtime.ts';
import { dirSource } from '../server/fs_source.ts';
import { BENCH_CACHE, PYTHON, REPO } from './models.ts';

export const ENCODER384_DIR = join(BENCH_CACHE, 'encoder384');
const EXPORTER = join(REPO, 'scripts', 'bench', 'export_encoder384.py');
const SELF = fileURLToPath(import.meta.url);

export interface EmbeddingsCase {
  engine: 'weft' | 'onnxruntime-web';
  /** Dawn backend the case runs on (ORT WASM: none). */
  backend: string | null;
  ep?: OnnxExecutionProvider;
}

export interface EmbeddingsResult extends EmbeddingsCase {
  label: string;
  adapter: string;
  loadMs: number;
  /** batch size -> { embeddings per second, median ms per call } */
  perBatch: Record<number, { embPerS: number; ms: number }>;
  error?: string;
}

export interface EmbeddingsOptions {
  backends?: string[];
  batches?: number[];
  runs?: number;
  warmup?: number;
  tokens?: number;
  ortWebgpu?: boolean;
  /** Per case, seconds (a hung case is killed after this). */
  timeoutS?: number;
  /** Per onnxruntime-web WebGPU EP case, seconds (its pipeline compiles are slow on CPU adapters). */
  webgpuTimeoutS?: number;
  log?: (s: string) => void;
}

export interface EmbeddingsReport {
  machine: string;
  loadavg: number[];
  date: string;
  options: Required<Omit<EmbeddingsOptions, 'log'>>;
  results: EmbeddingsResult[];
}

const DEFAULTS: Required<Omit<EmbeddingsOptions, 'log'>> = {
  backends: ['swiftshader', 'opengles'],
  batches: [1, 8, 32],
  runs: 5,
  warmup: 1,
  tokens: 32,
  ortWebgpu: true,
  timeoutS: 900,
  webgpuTimeoutS: 1800,
};

/** Makes .cache/bench/encoder384/ unless it is there. */
export async function ensureEncoder384(log: (s: string) => void = () => {}): Promise<string> {
  if (existsSync(join(ENCODER384_DIR, 'onnx', 'model.onnx')) && existsSync(join(ENCODER384_DIR, 'model.safetensors'))) return ENCODER384_DIR;
  log(`making ${ENCODER384_DIR} (${EXPORTER})`);
  await promisify(execFile)(PYTHON, [EXPORTER, ENCODER384_DIR], { maxBuffer: 1 << 24 });
  return ENCODER384_DIR;
}

/** `n` distinct texts of `tokens` tokens each ([CLS] + words + [SEP]; every word is one vocabulary entry). */
function texts(enc: Encoder, n: number, tokens: number): string[] {
  const words: string[] = [];
  for (let id = 0; id < 400; id++) {
    const t = enc.tokenizer.idToToken(id);
    if (t && /^[a-z]{2,}$/.test(t)) words.push(t);
  }
  let seed = 12345;
  const next = (): number => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 8) % words.length;
  return Array.from({ length: n }, () => Array.from({ length: tokens - 2 }, () => words[next()]).join(' '));
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** One case, in this process (the child side); `progress` gets the figures so far. */
async function runCase(c: EmbeddingsCase, o: Required<Omit<EmbeddingsOptions, 'log'>>, progress: (r: EmbeddingsResult) => void = () => {}): Promise<EmbeddingsResult> {
  const ctx = c.backend ? await GpuContext.create({ backend: c.backend }) : null;
  const t0 = performance.now();
  const opts = { maxBatchSize: Math.max(...o.batches), batchDurationMs: 0 };
  const enc: Encoder =
    c.engine === 'weft'
      ? await loadEncoder(ctx!, dirSource(ENCODER384_DIR), { ...opts, backend: 'native' })
      : await loadEncoder(ctx, dirSource(ENCODER384_DIR), { ...opts, backend: 'onnx', executionProviders: [c.ep!] });
  const loadMs = performance.now() - t0;
  const adapter = ctx ? ctx.gpu.info.name : 'CPU (WASM SIMD, 1 thread)';
  const perBatch: EmbeddingsResult['perBatch'] = {};
  const now = (): EmbeddingsResult => ({ ...c, label: caseLabel(c), adapter, loadMs, perBatch });
  progress(now());
  const all = texts(enc, Math.max(...o.batches) * (o.runs + o.warmup), o.tokens);
  const check = (await enc.embed(all.slice(0, 1))).tokens[0];
  if (check !== o.tokens) throw new Error(`texts encode to ${check} tokens, expected ${o.tokens}`);
  for (const b of o.batches) {
    const times: number[] = [];
    for (let r = 0; r < o.warmup + o.runs; r++) {
      const batch = all.slice(r * b, (r + 1) * b);
      const s = performance.now();
      await enc.embed(batch);
      if (r >= o.warmup) times.push(performance.now() - s);
    }
    const ms = median(times);
    perBatch[b] = { embPerS: (b * 1000) / ms, ms };
    progress(now());
  }
  enc.destroy();
  return now();
}

function caseLabel(c: EmbeddingsCase): string {
  return c.engine === 'weft' ? `Weft native (${c.backend})` : c.ep === 'wasm' ? 'onnxruntime-web WASM' : `onnxruntime-web WebGPU EP (${c.backend})`;
}

/** Runs one case in a child process, killed after `timeoutS`. */
function childCase(c: EmbeddingsCase, o: Required<Omit<EmbeddingsOptions, 'log'>>, log: (s: string) => void): Promise<EmbeddingsResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', SELF, '--child', JSON.stringify({ c, o })], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.stderr.on('data', (d: Buffer) => (err += d));
    const limitS = c.ep === 'webgpu' ? Math.min(o.timeoutS, o.webgpuTimeoutS) : o.timeoutS;
    const timer = setTimeout(() => child.kill('SIGKILL'), limitS * 1000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const lines = out.split('\n');
      const line = lines.find((l) => l.startsWith('RESULT '));
      if (line) return resolve(JSON.parse(line.slice(7)) as EmbeddingsResult);
      const partial = lines.filter((l) => l.startsWith('PARTIAL ')).pop();
      const why = signal === 'SIGKILL' ? `killed after ${limitS} s` : `exit ${code ?? signal}: ${err.trim().split('\n').filter((l) => !/^var |Warning|^\s*$/.test(l)).slice(-1)[0]?.slice(0, 200) ?? ''}`;
      log(`  ${caseLabel(c)}: ${why}`);
      const base = partial ? (JSON.parse(partial.slice(8)) as EmbeddingsResult) : { ...c, label: caseLabel(c), adapter: '', loadMs: NaN, perBatch: {} };
      resolve({ ...base, error: why });
    });
  });
}

export async function benchEmbeddings(opts: EmbeddingsOptions = {}): Promise<EmbeddingsReport> {
  const log = opts.log ?? ((s: string) => void process.stderr.write(`${s}\n`));
  const o = { ...DEFAULTS, ...Object.fromEntries(Object.entries(opts).filter(([k, v]) => k !== 'log' && v !== undefined)) } as Required<Omit<EmbeddingsOptions, 'log'>>;
  await ensureEncoder384(log);
  const cases: EmbeddingsCase[] = [
    ...o.backends.map((backend): EmbeddingsCase => ({ engine: 'weft', backend })),
    { engine: 'onnxruntime-web', backend: null, ep: 'wasm' },
    ...(o.ortWebgpu ? o.backends.map((backend): EmbeddingsCase => ({ engine: 'onnxruntime-web', backend, ep: 'webgpu' })) : []),
  ];
  const results: EmbeddingsResult[] = [];
  for (const c of cases) {
    log(`embeddings: ${caseLabel(c)}`);
    const r = await childCase(c, o, log);
    for (const [b, v] of Object.entries(r.perBatch)) log(`  batch ${b}: ${v.embPerS.toFixed(1)} emb/s (${v.ms.toFixed(0)} ms)`);
    results.push(r);
  }
  return { machine: machineLine(), loadavg: loadavg(), date: new Date().toISOString(), options: o, results };
}

function machineLine(): string {
  const c = cpus();
  return `${c[0]?.model.trim() ?? 'unknown CPU'}, ${c.length} logical CPUs, no hardware GPU, Node ${process.version}`;
}

/** Markdown table: embeddings/s per batch size, with the ratio to onnxruntime-web WASM. */
export function embeddingsTable(r: EmbeddingsReport): string {
  const base = r.results.find((x) => x.ep === 'wasm' && !x.error);
  const cell = (x: EmbeddingsResult, b: number): string => {
    const v = x.perBatch[b];
    if (!v) return 'n/a';
    const ratio = base?.perBatch[b] ? ` (${(v.embPerS / base.perBatch[b]!.embPerS).toFixed(2)}×)` : '';
    return `${v.embPerS < 10 ? v.embPerS.toFixed(2) : v.embPerS.toFixed(1)}${ratio}`;
  };
  const o = r.options;
  const lines = [
    `6-layer, 384-wide BERT (random weights, ${o.tokens} tokens per text), \`embed()\` of batches of distinct texts; embeddings/s = batch / median of ${o.runs} calls after ${o.warmup} warm-up; ratio vs onnxruntime-web WASM.`,
    `${r.machine}; load average ${r.loadavg.map((x) => x.toFixed(2)).join(' / ')} (1 / 5 / 15 min) at the end of the run; ${r.date.slice(0, 16).replace('T', ' ')} UTC.`,
    '',
    `| engine | adapter | load s | ${o.batches.map((b) => `batch ${b}`).join(' | ')} |`,
    `|---|---|---|${o.batches.map(() => '---').join('|')}|`,
    ...r.results.map((x) => {
      const load = Number.isFinite(x.loadMs) ? (x.loadMs / 1000).toFixed(1) : '—';
      const cells = o.batches.map((b) => (x.perBatch[b] ? cell(x, b) : x.error ? `— (${x.error})` : 'n/a'));
      return `| ${x.label} | ${x.adapter || '—'} | ${load} | ${cells.join(' | ')} |`;
    }),
  ];
  // The issue's goal: Weft native against onnxruntime-web's WebGPU EP on the same adapter.
  const same = r.results.filter((x) => x.engine === 'weft').map((w) => [w, r.results.find((x) => x.ep === 'webgpu' && x.backend === w.backend)] as const);
  if (same.some(([, o]) => o)) {
    lines.push('', `| Weft native / onnxruntime-web WebGPU EP, same adapter | ${o.batches.map((b) => `batch ${b}`).join(' | ')} |`, `|---|${o.batches.map(() => '---').join('|')}|`);
    for (const [w, x] of same) {
      const ratio = (b: number): string => (w.perBatch[b] && x?.perBatch[b] ? `${(w.perBatch[b]!.embPerS / x.perBatch[b]!.embPerS).toFixed(2)}×` : 'n/a');
      lines.push(`| ${w.backend} | ${o.batches.map(ratio).join(' | ')} |`);
    }
  }
  return lines.join('\n');
}

async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      child: { type: 'string' },
      backends: { type: 'string' },
      batches: { type: 'string' },
      runs: { type: 'string' },
      warmup: { type: 'string' },
      tokens: { type: 'string' },
      timeout: { type: 'string' },
      'webgpu-timeout': { type: 'string' },
      'no-ort-webgpu': { type: 'boolean' },
      quick: { type: 'boolean' },
    },
  });
  if (values.child) {
    const { c, o } = JSON.parse(values.child) as { c: EmbeddingsCase; o: Required<Omit<EmbeddingsOptions, 'log'>> };
    const r = await runCase(c, o, (p) => void process.stdout.write(`PARTIAL ${JSON.stringify(p)}\n`));
    process.stdout.write(`RESULT ${JSON.stringify(r)}\n`);
    process.exit(0); // dawn.node can keep the loop alive
  }
  const nums = (v: string | undefined): number[] | undefined => v?.split(',').map(Number);
  const report = await benchEmbeddings({
    ...(values.backends ? { backends: values.backends.split(',') } : {}),
    ...(values.batches ? { batches: nums(values.batches)! } : {}),
    ...(values.runs ? { runs: Number(values.runs) } : values.quick ? { runs: 2 } : {}),
    ...(values.warmup ? { warmup: Number(values.warmup) } : {}),
    ...(values.tokens ? { tokens: Number(values.tokens) } : {}),
    ...(values.timeout ? { timeoutS: Number(values.timeout) } : values.quick ? { timeoutS: 120 } : {}),
    ...(values['webgpu-timeout'] ? { webgpuTimeoutS: Number(values['webgpu-timeout']) } : {}),
    ...(values['no-ort-webgpu'] ? { ortWebgpu: false } : {}),
  });
  await writeFile(join(BENCH_CACHE, 'embeddings-latest.json'), JSON.stringify(report, null, 1));
  process.stdout.write(`${embeddingsTable(report)}\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).catch((e: unknown) => {
    process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
    process.exit(1);
  });
}
