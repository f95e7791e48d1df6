/**
 * Prometheus metrics in the text exposition format (version 0.0.4), without a
 * client library: labelled counters and histograms, gauges, per-request
 * tokens/s and time to first token, and the standard `process_*` series.
 * Request, token and latency series carry `model` and `consumer_group`
 * labels. Label values are escaped as the format says (backslash, double
 * quote, newline). Reader-side gauges (queue depth, batch size, KV blocks)
 * are read from the readers at scrape time.
 */
import { readdirSync, readFileSync } from 'node:fs';
import type { GenerationEvent } from '../core/engine/engine.ts';
import type { DecodePathCounts } from '../core/models/step.ts';

type Done = Extract<GenerationEvent, { type: 'done' }>;
export type Labels = Record<string, string>;

/** A label value as the text format writes it: `\` → `\\`, `"` → `\"`, newline → `\n`. */
export function escapeLabelValue(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

/** `{a="x",b="y"}`, or '' for no labels. */
export function formatLabels(labels: Labels): string {
  const l = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabelValue(v)}"`);
  return l.length ? `{${l.join(',')}}` : '';
}

/** A sample value: NaN and infinities in the format's spelling. */
export function formatValue(v: number): string {
  return Number.isNaN(v) ? 'NaN' : v === Infinity ? '+Inf' : v === -Infinity ? '-Inf' : String(v);
}

const keyOf = (labels: Labels): string => JSON.stringify(Object.entries(labels));

/** A counter family: one total per label set (no labels: one sample, 0 until incremented). */
export class Counter {
  private readonly series = new Map<string, { labels: Labels; value: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  inc(n = 1, labels: Labels = {}): void {
    const k = keyOf(labels);
    const s = this.series.get(k) ?? { labels, value: 0 };
    s.value += n;
    this.series.set(k, s);
  }
  /** Sum over every label set. */
  get value(): number {
    let sum = 0;
    for (const s of this.series.values()) sum += s.value;
    return sum;
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    for (const s of this.series.values()) lines.push(`${this.name}${formatLabels(s.labels)} ${formatValue(s.value)}`);
    return `${lines.join('\n')}\n`;
  }
}

interface HistogramSeries {
  labels: Labels;
  counts: number[];
  sum: number;
  count: number;
}

/** A histogram family: cumulative buckets, sum and count per label set. */
export class Histogram {
  private readonly series = new Map<string, HistogramSeries>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: number[],
  ) {}
  observe(v: number, labels: Labels = {}): void {
    const k = keyOf(labels);
    const s = this.series.get(k) ?? { labels, counts: this.buckets.map(() => 0), sum: 0, count: 0 };
    s.sum += v;
    s.count++;
    this.buckets.forEach((b, i) => {
      if (v <= b) s.counts[i]!++;
    });
    this.series.set(k, s);
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const s of this.series.values()) {
      const le = (b: string): string => formatLabels({ ...s.labels, le: b });
      this.buckets.forEach((b, i) => lines.push(`${this.name}_bucket${le(String(b))} ${s.counts[i]}`));
      lines.push(`${this.name}_bucket${le('+Inf')} ${s.count}`, `${this.name}_sum${formatLabels(s.labels)} ${formatValue(s.sum)}`, `${this.name}_count${formatLabels(s.labels)} ${s.count}`);
    }
    return `${lines.join('\n')}\n`;
  }
}

export function gauge(name: string, help: string, samples: [Record<string, string>, number][], type: 'gauge' | 'counter' = 'gauge'): string {
  const lines = [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`];
  for (const [labels, v] of samples) {
    lines.push(`${name}${formatLabels(labels)} ${formatValue(v)}`);
  }
  return `${lines.join('\n')}\n`;
}

/** A counter with labels, one sample per label set (values kept by the caller). */
export function counterFamily(name: string, help: string, samples: [Record<string, string>, number][]): string {
  return gauge(name, help, samples).replace(`# TYPE ${name} gauge`, `# TYPE ${name} counter`);
}

/** Labelled counters whose totals live in the readers (read at scrape time), e.g. speculative draft tokens. */
export function readerCounter(name: string, help: string, samples: [Record<string, string>, number][]): string {
  return gauge(name, help, samples, 'counter');
}

/**
 * Decoder steps per path per reader (counters): through the decode megakernel and through the
 * generic per-op path, and the megakernel's dispatches (one per wave: more than its steps when
 * prompt chunks ride in waves; docs/engine.md).
 */
export function decodePathMetrics(samples: [Record<string, string>, DecodePathCounts][]): string {
  if (!samples.length) return '';
  return (
    readerCounter(
      'weft_engine_steps_total',
      'Decoder engine steps per decode path (megakernel: one or a few dispatches for the whole step; generic: one dispatch per op).',
      samples.flatMap(([l, s]) => [
        [{ ...l, path: 'megakernel' }, s.megakernelSteps],
        [{ ...l, path: 'generic' }, s.genericSteps],
      ]),
    ) + readerCounter('weft_megakernel_dispatches_total', 'Decode megakernel dispatches (one per wave of a step).', samples.map(([l, s]) => [l, s.megakernelDispatches]))
  );
}

/**
 * Speculative decoding per reader with a draft: tokens proposed and accepted
 * (counters) and the acceptance rate so far (gauge).
 */
export function speculativeMetrics(samples: [Record<string, string>, { proposed: number; accepted: number }][]): string {
  if (!samples.length) return '';
  return (
    readerCounter('weft_speculative_draft_tokens_total', 'Draft tokens proposed to the target for verification (speculative decoding).', samples.map(([l, s]) => [l, s.proposed])) +
    readerCounter('weft_speculative_accepted_tokens_total', 'Draft tokens the target accepted (speculative decoding).', samples.map(([l, s]) => [l, s.accepted])) +
    gauge('weft_speculative_acceptance_rate', 'Accepted / proposed draft tokens since the reader started.', samples.filter(([, s]) => s.proposed > 0).map(([l, s]) => [l, s.accepted / s.proposed]))
  );
}

/** Labels of a request's series: the model that served it and its consumer group. */
export interface RequestLabels extends Labels {
  model: string;
  consumer_group: string;
}

/**
 * Decode speed of one request, tokens/s: the tokens after the first over the
 * seconds from the first token to the last (queueing and prefill excluded;
 * the same figure as weft_request_tokens_per_second). 0 with fewer than two
 * tokens, where no decode rate exists.
 */
export function decodeTokensPerSecond(completionTokens: number, firstAt: number, lastAt: number): number {
  return completionTokens > 1 && firstAt && lastAt > firstAt ? (completionTokens - 1) / ((lastAt - firstAt) / 1000) : 0;
}

/** Seconds since the epoch at which this process started (process_start_time_seconds). */
const PROCESS_START = (Date.now() - process.uptime() * 1000) / 1000;

/** Open file descriptors and their soft limit, from /proc (Linux only; null elsewhere). */
function fds(): { open: number; max: number | null } | null {
  try {
    const open = readdirSync('/proc/self/fd').length;
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    return { open, max: m ? Number(m[1]) : null };
  } catch {
    return null;
  }
}

/** The standard process series (Prometheus client conventions) plus the V8 heap. */
export function processMetrics(): string {
  const cpu = process.cpuUsage();
  const mem = process.memoryUsage();
  const fd = fds();
  return (
    gauge('process_cpu_seconds_total', 'Total user and system CPU time spent in seconds.', [[{}, (cpu.user + cpu.system) / 1e6]], 'counter') +
    gauge('process_resident_memory_bytes', 'Resident memory size in bytes.', [[{}, mem.rss]]) +
    gauge('process_start_time_seconds', 'Start time of the process since unix epoch in seconds.', [[{}, Math.round(PROCESS_START * 1000) / 1000]]) +
    (fd ? gauge('process_open_fds', 'Number of open file descriptors.', [[{}, fd.open]]) : '') +
    (fd?.max ? gauge('process_max_fds', 'Maximum number of open file descriptors.', [[{}, fd.max]]) : '') +
    gauge('weft_process_heap_used_bytes', 'V8 heap in use.', [[{}, mem.heapUsed]])
  );
}

export class Metrics {
  readonly requests = new Counter('weft_requests_total', 'Generation requests finished, by model and consumer group.');
  readonly rejected = new Counter('weft_requests_rejected_total', 'Requests refused because the queued-work memory bound was reached, by consumer group.');
  readonly tokens = new Counter('weft_generated_tokens_total', 'Tokens generated, by model and consumer group.');
  readonly promptTokens = new Counter('weft_prompt_tokens_total', 'Prompt tokens processed, by model and consumer group.');
  readonly ttft = new Histogram('weft_time_to_first_token_seconds', 'Time from admission to the first token.', [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]);
  readonly tps = new Histogram('weft_request_tokens_per_second', 'Per-request decode speed (tokens after the first / time since the first).', [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500]);
  readonly latency = new Histogram('weft_request_duration_seconds', 'Request duration.', [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]);
  readonly encoderRequests = new Counter('weft_encoder_requests_total', 'Encoder requests (embed, rerank, classify) finished.');
  readonly encoderInputs = new Counter('weft_encoder_inputs_total', 'Texts sent to encoder readers (pair members and rerank queries included).');
  readonly encoderLatency = new Histogram('weft_encoder_request_duration_seconds', 'Encoder request duration.', [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]);
  /** The most recent per-request figures, for the dashboard (bounded). */
  readonly recent: { at: number; tokens: number; tokensPerSecond: number; ttft: number; finishReason: string }[] = [];
  private lastCpu = process.cpuUsage();
  private lastCpuAt = performance.now();

  /** Records a finished generation; returns its decode tokens/s (decodeTokensPerSecond). */
  finished(ev: Done, started: number, firstAt: number, labels: RequestLabels): number {
    const now = performance.now();
    this.requests.inc(1, labels);
    this.tokens.inc(ev.usage.completionTokens, labels);
    this.promptTokens.inc(ev.usage.promptTokens, labels);
    this.latency.observe((now - started) / 1000, labels);
    const n = ev.usage.completionTokens;
    const tps = decodeTokensPerSecond(n, firstAt, now);
    if (tps > 0) this.tps.observe(tps, labels);
    this.recent.push({ at: Date.now(), tokens: n, tokensPerSecond: tps, ttft: firstAt ? (firstAt - started) / 1000 : 0, finishReason: ev.finishReason });
    if (this.recent.length > 256) this.recent.shift();
    return tps;
  }

  encoderFinished(inputs: number, seconds: number, labels: RequestLabels): void {
    this.encoderRequests.inc(1, labels);
    this.encoderInputs.inc(inputs, labels);
    this.encoderLatency.observe(seconds, labels);
  }

  /** Fraction of one core used by this process since the last call. */
  cpuUtilization(): number {
    const now = performance.now();
    const cur = process.cpuUsage();
    const used = (cur.user - this.lastCpu.user + cur.system - this.lastCpu.system) / 1000; // ms
    const dt = now - this.lastCpuAt;
    this.lastCpu = cur;
    this.lastCpuAt = now;
    return dt > 0 ? used / dt : 0;
  }

  renderProcess(): string {
    return processMetrics() + gauge('weft_process_cpu_utilization', 'Cores used by the server process since the previous scrape (1.0 = one core).', [[{}, this.cpuUtilization()]]);
  }

  render(): string {
    return [this.requests, this.rejected, this.tokens, this.promptTokens, this.ttft, this.tps, this.latency, this.encoderRequests, this.encoderInputs, this.encoderLatency].map((m) => m.render()).join('') + this.renderProcess();
  }
}
