/**
 * Speculative decoding benchmark, stories260K as the target: decode tokens/s
 * without a draft, with itself as the draft (every token accepted: the upper
 * bound of acceptance, and the cost of the draft passes laid bare) and with
 * stories260K quantized to Q8_0 GGUF (the same model at lower precision, the
 * usual "small draft" shape), in the same run, greedy, `ignoreEos` so every
 * run makes exactly `tokens` tokens.
 *
 * Rate = concurrency · (tokens − 1) / (wall time from the first token of any
 * request to the last token of all): aggregate decode speed, prefill and
 * first tokens excluded.
 * Runs are interleaved (each round runs every variant once, order rotated per
 * round) because the machine is shared; figures are medians over rounds, and
 * the ratio is the median of per-round (speculative / plain) ratios.
 *
 *   npx tsx bench/speculative.ts [--backend swiftshader] [--tokens 96] [--rounds 5] [--k 4] [--concurrency 1,4]
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Engine } from '../core/engine/engine.ts';
import { Speculator } from '../core/engine/speculative.ts';
import { hfToGguf } from '../core/formats/gguf_write.ts';
import { parseDecoderConfig } from '../core/formats/hf_config.ts';
import { openSafetensorsModel, toFloat32 } from '../core/formats/safetensors.ts';
import { GpuContext } from '../core/gpu/context.ts';
import { loadDecoder, type LoadedDecoder } from '../core/api/load_decoder.ts';
import { dirSource, openModelPath } from '../server/fs_source.ts';
import { DEFAULT_MODEL_DIR } from '../server/paths.ts';

export interface SpeculativeBenchOptions {
  backend?: string;
  /** New tokens per request (default 96). */
  tokens?: number;
  rounds?: number;
  /** Draft tokens per step (default 4). */
  k?: number;
  /** Concurrent requests per run (default [1, 4]). */
  concurrency?: number[];
  log?: (s: string) => void;
}

export interface SpeculativeRow {
  variant: string;
  concurrency: number;
  tokensPerSecond: number;
  /** Median over rounds of this variant's rate / the plain rate of the same round. */
  ratio: number;
  /** Accepted / proposed draft tokens over all rounds (null without a draft). */
  acceptance: number | null;
}

export interface SpeculativeReport {
  backend: string;
  tokens: number;
  rounds: number;
  k: number;
  rows: SpeculativeRow[];
}

const PROMPTS = ['Once upon a time', 'The little dog', 'Lily and Tom went to the park. They', 'One day'];
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

/** stories260K as a Q8_0 GGUF file (weights quantized by the project's GGUF writer). */
async function writeQ8(path: string): Promise<void> {
  const ms = dirSource(DEFAULT_MODEL_DIR);
  const config = parseDecoderConfig(await ms.readText('config.json'));
  const st = await openSafetensorsModel(ms);
  const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const [name, t] of st.tensors) tensors.set(name, { shape: [...t.info.shape], data: toFloat32(t.info.dtype, await st.read(name)) });
  writeFileSync(path, hfToGguf({ config, tensors, tokenizer: await ms.readText('tokenizer.json'), tokenizerConfig: JSON.parse(await ms.readText('tokenizer_config.json')), type: 'Q8_0', name: 'stories260K-q8_0' }));
}

/**
 * Aggregate decode tokens/s of `n` concurrent greedy requests: tokens after
 * each request's first, over the wall time from the first request's first
 * token to the last request's last token.
 */
async function run(engine: Engine, n: number, tokens: number): Promise<number> {
  const spans = await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      let first = 0;
      let last = 0;
      let count = 0;
      for await (const ev of engine.generate(PROMPTS[i % PROMPTS.length]!, { maxNewTokens: tokens, sampling: { temperature: 0 }, ignoreEos: true })) {
        if (ev.type !== 'token') continue;
        last = performance.now();
        if (count++ === 0) first = last;
      }
      if (count !== tokens) throw new Error(`speculative bench: a run made ${count} tokens, expected ${tokens}`);
      return [first, last] as const;
    }),
  );
  const t0 = Math.min(...spans.map((s) => s[0]));
  const t1 = Math.max(...spans.map((s) => s[1]));
  return (n * (tokens - 1)) / ((t1 - t0) / 1000);
}

export async function benchSpeculative(o: SpeculativeBenchOptions = {}): Promise<SpeculativeReport> {
  const backend = o.backend ?? 'swiftshader';
  const tokens = o.tokens ?? 96;
  const rounds = o.rounds ?? 5;
  const k = o.k ?? 4;
  const conc = o.concurrency ?? [1, 4];
  const log = o.log ?? ((s: string) => void process.stderr.write(`${s}\n`));
  const dir = mkdtempSync(join(tmpdir(), 'weft-bench-spec-'));
  const loaded: LoadedDecoder[] = [];
  try {
    const q8 = join(dir, 'stories260K-q8_0.gguf');
    await writeQ8(q8);
    const ctx = await GpuContext.create({ backend });
    const maxSeqs = Math.max(...conc);
    const geo = { maxSeqs, maxTokensPerStep: 256 };
    const target = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { ...geo, maxLogitRows: maxSeqs * (k + 1) });
    loaded.push(target);
    const drafts: [string, Speculator | null][] = [['plain', null]];
    for (const [label, path] of [
      ['draft = stories260K (itself)', DEFAULT_MODEL_DIR],
      ['draft = stories260K Q8_0', q8],
    ] as const) {
      const d = await loadDecoder(ctx, await openModelPath(path), { ...geo, prefixCaching: false });
      loaded.push(d);
      // dtype auto may dequantize a GGUF draft for the decode megakernel (core/models/load.ts): say what runs.
      drafts.push([d.format === 'gguf' ? `${label} (${d.weights.layers[0]!.qkv.w.dtype} on the GPU)` : label, new Speculator(d.engine.runner, k)]);
    }
    const rows: SpeculativeRow[] = [];
    for (const n of conc) {
      // Warm-up: compile every pipeline each variant uses.
      for (const [, spec] of drafts) {
        target.engine.setSpeculator(spec);
        await run(target.engine, n, 8);
      }
      const rates = drafts.map(() => [] as number[]);
      const ratios = drafts.map(() => [] as number[]);
      const base = drafts.map(([, s]) => (s ? { ...s.stats } : null));
      for (let r = 0; r < rounds; r++) {
        const got: number[] = [];
        for (let j = 0; j < drafts.length; j++) {
          const v = (j + r) % drafts.length;
          target.engine.setSpeculator(drafts[v]![1]);
          got[v] = await run(target.engine, n, tokens);
        }
        got.forEach((x, v) => {
          rates[v]!.push(x);
          ratios[v]!.push(x / got[0]!);
        });
        log(`speculative: concurrency ${n}, round ${r + 1}/${rounds}: ${got.map((x) => x.toFixed(1)).join(' / ')} tokens/s`);
      }
      drafts.forEach(([variant, s], v) => {
        const b = base[v];
        const proposed = s && b ? s.stats.proposed - b.proposed : 0;
        rows.push({ variant, concurrency: n, tokensPerSecond: median(rates[v]!), ratio: median(ratios[v]!), acceptance: s && b && proposed ? (s.stats.accepted - b.accepted) / proposed : null });
      });
    }
    target.engine.setSpeculator(null);
    return { backend, tokens, rounds, k, rows };
  } finally {
    for (const d of loaded) d.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}

export function speculativeTable(r: SpeculativeReport): string {
  const lines = [
    `stories260K target on ${r.backend}, greedy, ${r.tokens} new tokens per request, k = ${r.k} draft tokens per step, median of ${r.rounds} interleaved rounds.`,
    '',
    '| variant | concurrent requests | decode tokens/s (aggregate) | vs plain | draft tokens accepted |',
    '| --- | ---: | ---: | ---: | ---: |',
  ];
  for (const x of r.rows) {
    lines.push(`| ${x.variant} | ${x.concurrency} | ${x.tokensPerSecond.toFixed(1)} | ${x.ratio.toFixed(2)}x | ${x.acceptance === null ? '—' : `${(100 * x.acceptance).toFixed(0)}%`} |`);
  }
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { backend: { type: 'string' }, tokens: { type: 'string' }, rounds: { type: 'string' }, k: { type: 'string' }, concurrency: { type: 'string' } } });
  const rep = await benchSpeculative({
    ...(values.backend ? { backend: values.backend } : {}),
    ...(values.tokens ? { tokens: Number(values.tokens) } : {}),
    ...(values.rounds ? { rounds: Number(values.rounds) } : {}),
    ...(values.k ? { k: Number(values.k) } : {}),
    ...(values.concurrency ? { concurrency: values.concurrency.split(',').map(Number) } : {}),
  });
  process.stdout.write(`${speculativeTable(rep)}\n`);
  process.exit(0);
}
