/**
 * Continuous batching under arrivals (serving bench, section 5): C clients each send R greedy
 * requests back to back, with new-token counts spread over [minTokens, maxTokens] so requests
 * finish at different steps and every new prompt joins a running batch — the traffic where
 * steps mix prompt chunks with decodes. Run twice per round, interleaved: with prompt chunks
 * through the decode megakernel in waves (the default) and with them on the generic path
 * (LoadOptions.megakernelWaves = false: the engine before waves). Figures per configuration:
 * aggregate tok/s = all new tokens / round wall (median over rounds); TTFT (call to first
 * token) and mean inter-token latency per request (last − first token) / (T − 1), p50 / p95
 * pooled over every round's requests. Both configurations must give every request the same
 * ids (the two paths are bit-identical).
 */
import type { LoadedDecoder } from '../core/api/load_decoder.ts';
import { request, type Req } from './requests.ts';
import { f1, f2, median, percentile } from './stats.ts';

export interface ContinuousOptions {
  clients: number;
  /** Requests per client, back to back. */
  perClient: number;
  minTokens: number;
  maxTokens: number;
  runs: number;
}

export interface ContinuousRow {
  /** Prompt chunks through the megakernel in waves (true) or on the generic path. */
  waves: boolean;
  wallMs: number;
  aggTokS: number;
  ttftP50Ms: number;
  ttftP95Ms: number;
  itlP50Ms: number;
  itlP95Ms: number;
}

export interface ContinuousFigures extends ContinuousOptions {
  promptTokens: number;
  rows: ContinuousRow[];
  /** Requests whose ids were the same in every round of both configurations, of `requests`. */
  idsEqual: number;
  requests: number;
}

/** New tokens of request j: spread over [min, max] so neighbours finish at different steps. */
export function continuousLengths(o: Pick<ContinuousOptions, 'clients' | 'perClient' | 'minTokens' | 'maxTokens'>): number[] {
  const span = o.maxTokens - o.minTokens + 1;
  return Array.from({ length: o.clients * o.perClient }, (_, j) => o.minTokens + ((j * 37) % span));
}

/** One round: every client's requests back to back; request j = client c's i-th, j = c * perClient + i. */
async function round(d: LoadedDecoder, prompts: number[][], lengths: number[], o: ContinuousOptions): Promise<{ wallMs: number; reqs: Req[] }> {
  const reqs: Req[] = new Array(prompts.length);
  const start = performance.now();
  await Promise.all(
    Array.from({ length: o.clients }, async (_, c) => {
      for (let i = 0; i < o.perClient; i++) {
        const j = c * o.perClient + i;
        reqs[j] = await request(d, prompts[j]!, lengths[j]!);
      }
    }),
  );
  return { wallMs: performance.now() - start, reqs };
}

/** Loads both configurations (`load(waves)`), warms each up with one round, then `runs` interleaved rounds. */
export async function measureContinuous(load: (waves: boolean) => Promise<LoadedDecoder>, promptFor: (k: number) => number[], o: ContinuousOptions, log: (s: string) => void): Promise<ContinuousFigures> {
  const lengths = continuousLengths(o);
  const prompts = lengths.map((_, j) => promptFor(j));
  const configs = [true, false].map((waves) => ({ waves, walls: [] as number[], ttft: [] as number[], itl: [] as number[], ids: [] as string[][] }));
  const decoders: LoadedDecoder[] = [];
  try {
    for (const c of configs) decoders.push(await load(c.waves));
    for (const d of decoders) await round(d, prompts, lengths, o); // warm-up: compiles every wave shape
    for (let r = 0; r < o.runs; r++) {
      for (const k of r % 2 ? [1, 0] : [0, 1]) {
        const c = configs[k]!;
        const { wallMs, reqs } = await round(decoders[k]!, prompts, lengths, o);
        c.walls.push(wallMs);
        c.ttft.push(...reqs.map((q) => q.ttftMs));
        c.itl.push(...reqs.map((q, j) => (q.last - q.first) / (lengths[j]! - 1)));
        c.ids.push(reqs.map((q) => q.ids.join()));
        const tokens = lengths.reduce((a, b) => a + b, 0);
        log(`  continuous round ${r + 1}/${o.runs} ${c.waves ? 'waves' : 'generic'}: ${(tokens / (wallMs / 1000)).toFixed(1)} tok/s, TTFT p50 ${percentile(reqs.map((q) => q.ttftMs), 50).toFixed(1)} ms`);
      }
    }
  } finally {
    for (const d of decoders) d.destroy();
  }
  const tokens = lengths.reduce((a, b) => a + b, 0);
  const ref = configs[0]!.ids[0] ?? [];
  const idsEqual = ref.filter((ids, j) => configs.every((c) => c.ids.every((run) => run[j] === ids))).length;
  return {
    ...o,
    promptTokens: prompts[0]?.length ?? 0,
    rows: configs.map((c) => {
      const wallMs = median(c.walls);
      return { waves: c.waves, wallMs, aggTokS: tokens / (wallMs / 1000), ttftP50Ms: percentile(c.ttft, 50), ttftP95Ms: percentile(c.ttft, 95), itlP50Ms: percentile(c.itl, 50), itlP95Ms: percentile(c.itl, 95) };
    }),
    idsEqual,
    requests: prompts.length,
  };
}

/** The markdown section of a ContinuousFigures. */
export function continuousTable(f: ContinuousFigures): string {
  const [on, off] = [f.rows.find((r) => r.waves), f.rows.find((r) => !r.waves)];
  return [
    `Continuous batching under arrivals: ${f.clients} clients, ${f.perClient} requests each back to back (${f.requests} requests, ${f.minTokens}–${f.maxTokens} new tokens, distinct ${f.promptTokens}-token prompts), so new prompts join a running batch; ${f.runs} interleaved round(s) per configuration after a warm-up (wall: median; TTFT and inter-token latency: percentiles over all rounds' requests).`,
    '',
    '| prompt chunks | aggregate tok/s | round wall s | TTFT p50 / p95 ms | inter-token p50 / p95 ms |',
    '| --- | ---: | ---: | ---: | ---: |',
    ...f.rows.map((r) => `| ${r.waves ? 'megakernel waves (default)' : 'generic path'} | ${f1(r.aggTokS)} | ${f2(r.wallMs / 1000)} | ${f1(r.ttftP50Ms)} / ${f1(r.ttftP95Ms)} | ${f2(r.itlP50Ms)} / ${f2(r.itlP95Ms)} |`),
    '',
    `Waves vs generic: ${on && off ? `${f2(on.aggTokS / off.aggTokS)}x aggregate tok/s, inter-token p95 ${f2(on.itlP95Ms / off.itlP95Ms)}x` : '—'}; ids equal in every round of both: ${f.idsEqual}/${f.requests} requests.`,
  ].join('\n');
}
