/**
 * Metrics dashboard: polls GET /metrics (Prometheus text) once a second and
 * charts tokens/s (the rate of weft_generated_tokens_total over the last 5
 * s: the counter moves when requests finish, so a per-scrape rate would
 * spike), queue depth (weft_queue_depth), running batch size
 * (weft_batch_size) and KV blocks in use (weft_kv_blocks_used, with the pool
 * size as a dashed ceiling), each summed over readers, and utilization: GPU
 * (weft_gpu_utilization, the fraction of wall time each reader's device queue
 * was busy with engine steps, measured by the step timer's timestamp queries;
 * the mean over readers, absent where the adapter has no timestamps) and CPU
 * (the rate of process_cpu_seconds_total: cores used by the server process).
 * The licence state comes from the management API's GET /license. The time
 * axis grows with the data from 30 s up to two minutes.
 */
import { apiFetch } from '../api.ts';
import { lineChart, type Point } from '../charts.ts';
import { h, replace } from '../dom.ts';
import { parsePrometheus, rate, total } from '../prom.ts';
import { poller, type Page } from './page.ts';

const MAX_WINDOW_MS = 120_000;
const MIN_WINDOW_MS = 30_000;
const RATE_MS = 5_000;
const KEEP = 600;

interface Series {
  key: string;
  title: string;
  points: Point[];
  ceiling: number | null;
  box: HTMLElement;
  value: HTMLElement;
  format?: (v: number) => string;
  integer?: boolean;
}

export function metricsPage(): Page {
  const mk = (key: string, title: string, format?: (v: number) => string, integer = true): Series => ({
    key,
    title,
    points: [],
    ceiling: null,
    box: h('div.chart-box'),
    value: h(`strong#mx-${key}-value`, '—'),
    ...(format ? { format } : {}),
    integer,
  });
  const pct = (v: number): string => `${(v * 100).toFixed(0)}%`;
  const series = [
    mk('tps', 'Tokens / s', (v) => v.toFixed(v < 10 ? 1 : 0), false),
    mk('queue', 'Queue depth'),
    mk('batch', 'Batch size'),
    mk('kv', 'KV blocks used'),
    mk('gpu', 'GPU utilization', pct, false),
    mk('cpu', 'CPU utilization (cores)', (v) => v.toFixed(2), false),
  ];
  const [tps, queue, batch, kv, gpu, cpu] = series as [Series, Series, Series, Series, Series, Series];
  gpu.ceiling = 1;
  const license = h('span#mx-license', '—');
  let lastCpu: { at: number; value: number } | null = null;
  const err = h('div#mx-error.error');
  const totals = h('div#mx-totals.stats');
  const counter: { at: number; value: number }[] = [];
  let since = 0;

  const render = (): void => {
    const now = Date.now();
    const windowMs = Math.min(MAX_WINDOW_MS, Math.max(MIN_WINDOW_MS, since ? now - since : 0));
    for (const s of series) {
      replace(s.box, lineChart(s.points, { windowMs, now, ceiling: s.ceiling, label: s.title, integer: !!s.integer, ...(s.format ? { format: s.format } : {}) }));
      const last = [...s.points].reverse().find((p) => p.v !== null);
      s.value.textContent = last?.v === null || last === undefined ? '—' : (s.format ?? String)(last.v);
    }
  };

  const scrape = async (): Promise<void> => {
    let text: string;
    try {
      text = await (await apiFetch('inference', 'metrics')).text();
      err.textContent = '';
    } catch (e) {
      err.textContent = (e as Error).message;
      return;
    }
    const at = Date.now();
    since ||= at;
    const m = parsePrometheus(text);
    const tokens = total(m, 'weft_generated_tokens_total');
    const cur = tokens === null ? null : { at, value: tokens };
    if (cur) counter.push(cur);
    while (counter.length > 2 && counter[1]!.at <= at - RATE_MS) counter.shift();
    const push = (s: Series, v: number | null): void => {
      s.points.push({ t: at, v });
      if (s.points.length > KEEP) s.points.shift();
    };
    push(tps, cur && counter.length > 1 ? rate(counter[0]!, cur) : null);
    push(queue, total(m, 'weft_queue_depth') ?? 0);
    push(batch, total(m, 'weft_batch_size') ?? 0);
    push(kv, total(m, 'weft_kv_blocks_used') ?? 0);
    kv.ceiling = total(m, 'weft_kv_blocks_total');
    const gpus = m.filter((s) => s.name === 'weft_gpu_utilization');
    push(gpu, gpus.length ? gpus.reduce((a, s) => a + s.value, 0) / gpus.length : null);
    const cpuSeconds = total(m, 'process_cpu_seconds_total');
    const cpuNow = cpuSeconds === null ? null : { at, value: cpuSeconds };
    push(cpu, cpuNow ? rate(lastCpu, cpuNow) : null);
    lastCpu = cpuNow;
    const fmt = (name: string): string => String(total(m, name) ?? '—');
    replace(
      totals,
      h('span', 'requests ', h('strong#mx-requests', fmt('weft_requests_total'))),
      h('span', 'generated tokens ', h('strong', fmt('weft_generated_tokens_total'))),
      h('span', 'prompt tokens ', h('strong', fmt('weft_prompt_tokens_total'))),
      h('span', 'readers ready ', h('strong', `${total(m, 'weft_reader_ready') ?? 0}/${m.filter((s) => s.name === 'weft_reader_ready').length}`)),
      h('span', 'rejected ', h('strong', fmt('weft_requests_rejected_total'))),
      h('span', 'licence ', h('strong', license)),
    );
    void apiFetch('management', 'license')
      .then(async (r) => {
        const s = (await r.json()) as { state: string; required: boolean; licensee: string | null; expires: string | null };
        license.textContent = `${s.state}${s.licensee ? ` · ${s.licensee}` : ''}${s.expires ? ` · until ${s.expires.slice(0, 10)}` : ''}${s.required ? ' · required' : ''}`;
      })
      .catch(() => (license.textContent = 'unknown'));
    render();
  };
  const poll = poller(scrape, 1000);

  const el = h(
    'div.page.metrics-page',
    h('section.card', h('div.row.spread', h('h2', 'Service'), h('span.muted.small', 'GET /metrics every second · up to the last 2 minutes')), err, totals),
    h(
      'div.charts',
      series.map((s) => h(`section.card.chart-card#mx-${s.key}`, h('div.row.spread', h('h3', s.title), s.value), s.box)),
    ),
  );
  render();
  return { el, show: () => poll.start(), hide: () => poll.stop() };
}
