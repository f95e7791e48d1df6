/**
 * GET /metrics (Prometheus text): service counters and histograms, process
 * CPU/memory, and per-reader engine gauges (queue depth, running batch, KV
 * blocks, prefix-cache hits, prompt prefills) gathered from the readers at scrape time.
 */
import type { Hono } from 'hono';
import { decodePathMetrics, gauge, readerCounter, speculativeMetrics } from '../metrics.ts';
import { PROBE_MS } from '../readers/managed_reader.ts';
import type { Service } from '../service.ts';

export function metricsRoute(app: Hono, svc: Service): void {
  /** Previous scrape's GPU busy total per reader, for utilization over the scrape interval. */
  const lastBusy = new Map<string, { ms: number; at: number }>();
  app.get('/metrics', async (c) => {
    const readers = svc.readers.all();
    const stats = await Promise.all(readers.map(async (r) => ({ r, s: (await r.statsWithin(PROBE_MS)).stats }))); // bounded wait: a busy reader gives its last known figures
    const lbl = (id: string, group: string): Record<string, string> => ({ reader_id: id, consumer_group: group });
    const per = (f: (s: NonNullable<(typeof stats)[number]['s']>) => number): [Record<string, string>, number][] =>
      stats.filter((x) => x.s).map((x) => [lbl(x.r.readerId, x.r.spec.consumerGroup), f(x.s!)]);
    const utilization = (): [Record<string, string>, number][] => {
      const now = performance.now();
      const out: [Record<string, string>, number][] = [];
      for (const { r, s } of stats) {
        if (!s || s.gpuBusyMs === null || s.gpuBusyMs === undefined) continue;
        const prev = lastBusy.get(r.readerId);
        lastBusy.set(r.readerId, { ms: s.gpuBusyMs, at: now });
        if (prev && now > prev.at) out.push([lbl(r.readerId, r.spec.consumerGroup), Math.min(1, Math.max(0, (s.gpuBusyMs - prev.ms) / (now - prev.at)))]);
      }
      return out;
    };
    const body =
      svc.metrics.render() +
      gauge('weft_reader_ready', '1 when the reader finished loading.', readers.map((r) => [lbl(r.readerId, r.spec.consumerGroup), r.ready ? 1 : 0])) +
      gauge('weft_queue_depth', 'Requests waiting for admission.', per((s) => s.waiting)) +
      gauge('weft_batch_size', 'Sequences in the running batch.', per((s) => s.running)) +
      gauge('weft_kv_blocks_used', 'KV-cache blocks in use.', per((s) => s.kvBlocksTotal - s.kvBlocksFree)) +
      gauge('weft_kv_blocks_total', 'KV-cache blocks in the pool.', per((s) => s.kvBlocksTotal)) +
      gauge('weft_prefix_cache_hit_tokens', 'Prompt tokens served from the prefix cache.', per((s) => s.prefixHitTokens)) +
      readerCounter(
        'weft_prefills_total',
        'Prompts admitted to a generative reader: cache="miss" computed the whole prompt, cache="hit" started from prefix-cached KV blocks.',
        stats.flatMap((x) => (x.s?.prefills === undefined ? [] : (['miss', 'hit'] as const).map((cache): [Record<string, string>, number] => [{ ...lbl(x.r.readerId, x.r.spec.consumerGroup), cache }, cache === 'miss' ? x.s!.prefills! : (x.s!.prefixReuses ?? 0)]))),
      ) +
      readerCounter('weft_prefill_tokens_total', 'Prompt tokens computed (not served from the prefix cache).', stats.flatMap((x) => (x.s?.prefillTokens === undefined ? [] : [[lbl(x.r.readerId, x.r.spec.consumerGroup), x.s.prefillTokens]]))) +
      gauge('weft_computed_tokens', 'Tokens run through the model.', per((s) => s.computedTokens)) +
      gauge('weft_gpu_busy_seconds_total', 'GPU time spent in engine steps (timestamp queries; absent where unsupported).', per((s) => (s.gpuBusyMs ?? NaN) / 1000).filter(([, v]) => !Number.isNaN(v))) +
      gauge('weft_gpu_utilization', 'Fraction of wall time the GPU spent in engine steps since the previous scrape.', utilization()) +
      gauge('weft_reserved_bytes', 'Bytes held by queued requests and pending responses.', [[{}, svc.reservedBytes]]) +
      gauge('weft_reader_stalled_seconds', 'How long work has waited on the reader without progress (0 when none waits).', readers.filter((r) => r.ready).map((r) => [lbl(r.readerId, r.spec.consumerGroup), r.stalledMs() / 1000])) +
      gauge('weft_reader_reserved_tokens', 'Tokens (prompt + capped max_new_tokens) admitted to the reader.', readers.filter((r) => r.ready && r.info?.capacity).map((r) => [lbl(r.readerId, r.spec.consumerGroup), svc.admission.reservedTokens(r)])) +
      svc.readers.renderMetrics() +
      decodePathMetrics(stats.filter((x) => x.s?.decodePaths).map((x) => [lbl(x.r.readerId, x.r.spec.consumerGroup), x.s!.decodePaths!])) +
      speculativeMetrics(stats.filter((x) => x.s?.draftTokensProposed !== undefined).map((x) => [lbl(x.r.readerId, x.r.spec.consumerGroup), { proposed: x.s!.draftTokensProposed!, accepted: x.s!.draftTokensAccepted ?? 0 }]));
    return c.text(body, 200, { 'content-type': 'text/plain; version=0.0.4' });
  });
}
