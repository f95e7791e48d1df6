/**
 * `npm run bench -- --only cluster`: what the NATS broker costs. The same
 * reader (bundled stories260K, OpenGL ES) served two ways from one front end
 * (`weft serve`): in-process, as a worker thread (group `local`), and as a
 * `weft reader --nats` process on a local `nats-server` (group `nats`).
 * Per concurrency level: requests/s, p50 TTFT and aggregate tokens/s of
 * /generate_stream for each, and NATS / in-process as ratios. The two readers
 * are separate devices on the same CPU cores, measured one after the other,
 * never at once. Processes come from test/server/nats_helpers.ts (the ones the
 * NATS tests start).
 */
import { DEFAULT_MODEL_DIR } from '../server/paths.ts';
import { kill, readerGroups, startFrontEnd, startNats, startReader, stream } from '../test/server/nats_helpers.ts';
import { until } from '../test/server/remote_helpers.ts';

export interface ClusterRow {
  concurrency: number;
  local: { rps: number; ttftP50Ms: number; tokS: number };
  nats: { rps: number; ttftP50Ms: number; tokS: number };
}

const p50 = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)] ?? NaN;
};

async function round(base: string, group: string, concurrency: number, tokens: number, requests: number): Promise<{ rps: number; ttftP50Ms: number; tokS: number }> {
  const ttfts: number[] = [];
  let toks = 0;
  let next = 0;
  const t0 = performance.now();
  const worker = async (): Promise<void> => {
    while (next < requests) {
      next++;
      const start = performance.now();
      let first = 0;
      const r = await stream(base, { text: 'Once upon a time', max_new_tokens: tokens, min_new_tokens: tokens, consumer_group: group }, () => {
        if (!first) first = performance.now();
      });
      if (r.error) throw new Error(`${group}: ${r.error}`);
      ttfts.push(first - start);
      toks += r.ids.length;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const s = (performance.now() - t0) / 1000;
  return { rps: requests / s, ttftP50Ms: p50(ttfts), tokS: toks / s };
}

export async function benchCluster(opts: { concurrency?: number[]; tokens?: number; requestsPer?: number; log?: (s: string) => void } = {}): Promise<ClusterRow[]> {
  const log = opts.log ?? (() => {});
  const levels = opts.concurrency ?? [1, 32];
  const tokens = opts.tokens ?? 32;
  const nats = await startNats();
  const procs: { child: import('node:child_process').ChildProcess }[] = [];
  try {
    log('cluster: starting a reader process on NATS and a front end with the same reader in-process');
    const [reader, fe] = await Promise.all([
      startReader(nats.url, 'nats', ['--reader-id', 'bench-nats']),
      startFrontEnd({ url: nats.url }, `model: ''\nreaders:\n  - { model: ${JSON.stringify(DEFAULT_MODEL_DIR)}, consumer_group: local, backend: opengles, reader_id: bench-local }`),
    ]);
    procs.push(reader, fe);
    await until('both readers ready', async () => {
      const g = await readerGroups(fe);
      return g.local?.[0]?.ready && g.nats?.[0]?.ready;
    }, 120_000);
    for (const group of ['local', 'nats']) await round(fe.inference, group, 4, 8, 8); // warm-up: kernels built, caches filled
    const rows: ClusterRow[] = [];
    for (const c of levels) {
      const requests = opts.requestsPer ?? Math.max(8, 2 * c);
      const local = await round(fe.inference, 'local', c, tokens, requests);
      const viaNats = await round(fe.inference, 'nats', c, tokens, requests);
      log(`cluster: concurrency ${c}: local ${local.rps.toFixed(2)} req/s, nats ${viaNats.rps.toFixed(2)} req/s`);
      rows.push({ concurrency: c, local, nats: viaNats });
    }
    return rows;
  } finally {
    for (const p of procs) await kill(p.child);
    await nats.stop();
  }
}

export function clusterTable(rows: ClusterRow[]): string {
  const f = (x: number, d = 2): string => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');
  return [
    '| Concurrency | req/s in-process | req/s NATS | ratio | TTFT p50 in-process (ms) | TTFT p50 NATS (ms) | TTFT delta (ms) | tok/s in-process | tok/s NATS | ratio |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.concurrency} | ${f(r.local.rps)} | ${f(r.nats.rps)} | ${f(r.nats.rps / r.local.rps, 3)} | ${f(r.local.ttftP50Ms, 1)} | ${f(r.nats.ttftP50Ms, 1)} | ${f(r.nats.ttftP50Ms - r.local.ttftP50Ms, 1)} | ${f(r.local.tokS, 1)} | ${f(r.nats.tokS, 1)} | ${f(r.nats.tokS / r.local.tokS, 3)} |`,
    ),
    '',
    '_Same reader configuration (stories260K, OpenGL ES) as a worker thread of the front end and as a `weft reader --nats` process; ratio = NATS / in-process._',
  ].join('\n');
}
