/**
 * Mask times with the Llama 3 vocabulary, steadier than benchMasks' single
 * pass: the same simulated decodings (per corpus schema, 3 seeds of up to 64
 * tokens drawn uniformly among the allowed ones), each trajectory on its own
 * fresh compile, repeated `--repeats` times (default 7); per mask the median
 * over the repeats, then p50 / p99 / p99.9 over those medians, and the
 * slowest masks by schema, seed and step. A median of repeats leaves out the
 * GC pauses and scheduler hiccups that decide benchMasks' p99.9 (9 masks of
 * 9,246) on a shared machine; per-vocabulary tables built by the first
 * repeat are reused by the others, as in a serving process.
 *
 *   npx tsx bench/structured_replay.ts [--repeats 7] [--top 10]
 */
import { readdirSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { compileConstraint } from '../core/structured/index.ts';
import { llama3Vocab } from './byte_level_vocab.ts';
import { pct, simulateDecoding } from './structured.ts';

export interface ReplayFigures {
  masks: number;
  p50: number;
  p99: number;
  p999: number;
  /** The slowest masks: median ms, schema file, seed, step. */
  slowest: Array<{ ms: number; schema: string; seed: number; step: number }>;
}

export function replayMasks(opts: { repeats?: number; top?: number } = {}): ReplayFigures | null {
  const vocab = llama3Vocab();
  if (!vocab) return null;
  const dir = new URL('../test/structured/schemas/', import.meta.url).pathname;
  const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
  const repeats = opts.repeats ?? 7;
  /** Mask ms per step of one trajectory on a fresh compile. */
  const trajectory = (schema: unknown, seed: number): number[] => {
    const c = compileConstraint({ kind: 'json_schema', schema }, vocab, { uncached: true });
    const out: number[] = [];
    simulateDecoding(c.start(), vocab.eosIds, seed, 64, (ms) => out.push(ms));
    return out;
  };
  const all: ReplayFigures['slowest'] = [];
  for (const f of files) {
    const schema = JSON.parse(readFileSync(dir + f, 'utf8')) as unknown;
    for (let seed = 1; seed <= 3; seed++) {
      const runs = Array.from({ length: repeats }, () => trajectory(schema, seed));
      const steps = Math.min(...runs.map((x) => x.length));
      for (let step = 0; step < steps; step++) all.push({ ms: pct(runs.map((x) => x[step]!), 50), schema: f, seed, step });
    }
  }
  const ms = all.map((x) => x.ms);
  return { masks: all.length, p50: pct(ms, 50), p99: pct(ms, 99), p999: pct(ms, 99.9), slowest: all.sort((a, b) => b.ms - a.ms).slice(0, opts.top ?? 10) };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { repeats: { type: 'string' }, top: { type: 'string' } } });
  const f = replayMasks({ repeats: values.repeats ? Number(values.repeats) : undefined, top: values.top ? Number(values.top) : undefined });
  if (!f) {
    console.log('no Llama 3 vocabulary');
    process.exit(0);
  }
  console.log(`${f.masks} masks, median of repeats: p50 ${f.p50.toFixed(3)} ms, p99 ${f.p99.toFixed(3)} ms, p99.9 ${f.p999.toFixed(3)} ms`);
  for (const s of f.slowest) console.log(`  ${s.ms.toFixed(2)} ms  ${s.schema} seed ${s.seed} step ${s.step}`);
  process.exit(0);
}
