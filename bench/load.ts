/**
 * Load benchmark of the HTTP service (loopback only, bounded): N concurrent
 * clients stream `/generate_stream` on the bundled stories260K for a fixed
 * duration. Reports requests, errors, lost responses (a stream that ended
 * without its `done` event), latency percentiles and aggregate tokens/s.
 *
 *   npx tsx bench/load.ts [--clients 32] [--seconds 30] [--max-new-tokens 32]
 *
 * Uses plain fetch clients rather than autocannon because every response is
 * an SSE stream that must be read to its end to count tokens and losses.
 */
import { parseArgs } from 'node:util';
import { loadConfig } from '../server/config.ts';
import { start } from '../server/main.ts';
import { percentile } from './stats.ts';

export interface LoadResult {
  clients: number;
  seconds: number;
  requests: number;
  errors: number;
  lost: number;
  tokens: number;
  tokensPerSecond: number;
  p50: number;
  p99: number;
}

export async function benchLoad(opts: { clients?: number; seconds?: number; maxNewTokens?: number } = {}): Promise<LoadResult> {
  const clients = opts.clients ?? 32;
  const seconds = opts.seconds ?? 30;
  const maxNew = opts.maxNewTokens ?? 32;
  const running = await start(loadConfig({ env: {}, overrides: { embeddingModel: '', host: '127.0.0.1', port: 0, managementPort: 0, openaiPort: 0, sagemakerPort: 0, vertexPort: 0, logDisableTimestamps: true, readers: [] } }));
  try {
    await running.service.readers.waitSettled(120_000);
    const port = running.servers.find((s) => s.name === 'inference')!.port;
    const url = `http://127.0.0.1:${port}/generate_stream`;
    const prompts = ['Once upon a time', 'The little dog', 'Lily and Tom went to the park.', 'One day', 'Tim had a big red ball.'];
    const latencies: number[] = [];
    let requests = 0;
    let errors = 0;
    let lost = 0;
    let tokens = 0;
    const deadline = performance.now() + seconds * 1000;
    const t0 = performance.now();
    const client = async (i: number): Promise<void> => {
      for (let k = 0; performance.now() < deadline; k++) {
        const started = performance.now();
        try {
          const res = await fetch(url, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ text: prompts[(i + k) % prompts.length], max_new_tokens: maxNew, sampling_temperature: 0.8, seed: i * 1000 + k }),
          });
          if (res.status !== 200) {
            errors++;
            await res.text();
            continue;
          }
          const text = await res.text();
          const n = (text.match(/^data: \{"text"/gm) ?? []).length;
          if (!text.includes('event: done')) lost++;
          tokens += n;
          requests++;
          latencies.push(performance.now() - started);
        } catch {
          errors++;
        }
      }
    };
    await Promise.all(Array.from({ length: clients }, (_, i) => client(i)));
    const elapsed = (performance.now() - t0) / 1000;
    const pct = (p: number): number => (latencies.length ? percentile(latencies, p) : 0);
    return { clients, seconds: elapsed, requests, errors, lost, tokens, tokensPerSecond: tokens / elapsed, p50: pct(50), p99: pct(99) };
  } finally {
    await running.close();
  }
}

export function loadTable(r: LoadResult): string {
  return [
    '| clients | seconds | requests | errors | lost | tokens | tokens/s | p50 ms | p99 ms |',
    '|---|---|---|---|---|---|---|---|---|',
    `| ${r.clients} | ${r.seconds.toFixed(1)} | ${r.requests} | ${r.errors} | ${r.lost} | ${r.tokens} | ${r.tokensPerSecond.toFixed(0)} | ${r.p50.toFixed(0)} | ${r.p99.toFixed(0)} |`,
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { clients: { type: 'string' }, seconds: { type: 'string' }, 'max-new-tokens': { type: 'string' } } });
  const r = await benchLoad({
    ...(values.clients ? { clients: Number(values.clients) } : {}),
    ...(values.seconds ? { seconds: Number(values.seconds) } : {}),
    ...(values['max-new-tokens'] ? { maxNewTokens: Number(values['max-new-tokens']) } : {}),
  });
  console.log(loadTable(r));
  process.exit(0);
}
