/**
 * Prometheus metrics in the text exposition format, without a client
 * library: counters, gauges and histograms, plus per-request tokens/s and
 * time to first token, process CPU and memory. Reader-side gauges (queue
 * depth, batch size, KV blocks) are read from the readers at scrape time.
 */
import type { GenerationEvent } from '../core/engine/engine.ts';
import type { DecodePathCounts } from '../core/engine/runner.ts';

type Done = Extract<GenerationEvent, { type: 'done' }>;

export class Counter {
  value = 0;
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  inc(n = 1): void {
    this.value += n;
  }
  render(): string {
    return `# HELP ${this.name} ${this.help}\n# TYPE ${this.name} counter\n${this.name} ${this.value}\n`;
  }
}

export class Histogram {
  private readonly counts: number[];
  private sum = 0;
  private count = 0;
  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: number[],
  ) {
    this.counts = buckets.map(() => 0);
  }
  observe(v: number): void {
    this.sum += v;
    this.count++;
    this.buckets.forEach((b, i) => {
      if (v <= b) this.counts[i]!++;
    });
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    this.buckets.forEach((b, i) => lines.push(`${this.name}_bucket{le="${b}"} ${this.counts[i]}`));
    lines.push(`${this.name}_bucket{le="+Inf"} ${this.count}`, `${this.name}_sum ${this.sum}`, `${this.name}_count ${this.count}`);
    return `${lines.join('\n')}\n`;
  }
}

export function gauge(name: string, help: string, samples: [Record<string, string>, number][], type: 'gauge' | 'counter' = 'gauge'): string {
  const lines = [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`];
  for (const [labels, v] of samples) {
    const l = Object.entries(labels).map(([k, x]) => `${k}="${x.replace(/["\\\n]/g, '_')}"`).join(',');
    lines.push(`${name}${l ? `{${l}}` : ''} ${v}`);
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

export class Metrics {
  readonly requests = new Counter('weft_requests_total', 'Generation requests finished.');
  readonly rejected = new Counter('weft_requests_rejected_total', 'Requests refused because the queued-work memory bound was reached.');
  readonly tokens = new Counter('weft_generated_tokens_total', 'Tokens generated.');
  readonly promptTokens = new Counter('weft_prompt_tokens_total', 'Prompt tokens processed.');
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

  finished(ev: Done, started: number, firstAt: number): void {
    const now = performance.now();
    this.requests.inc();
    this.tokens.inc(ev.usage.completionTokens);
    this.promptTokens.inc(ev.usage.promptTokens);
    this.latency.observe((now - started) / 1000);
    const n = ev.usage.completionTokens;
    const tps = n > 1 && firstAt ? (n - 1) / ((now - firstAt) / 1000) : 0;
    if (tps > 0) this.tps.observe(tps);
    this.recent.push({ at: Date.now(), tokens: n, tokensPerSecond: tps, ttft: firstAt ? (firstAt - started) / 1000 : 0, finishReason: ev.finishReason });
    if (this.recent.length > 256) this.recent.shift();
  }

  encoderFinished(inputs: number, seconds: number): void {
    this.encoderRequests.inc();
    this.encoderInputs.inc(inputs);
    this.encoderLatency.observe(seconds);
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
    const mem = process.memoryUsage();
    return (
      gauge('weft_process_cpu_utilization', 'Cores used by the server process since the previous scrape (1.0 = one core).', [[{}, this.cpuUtilization()]]) +
      gauge('weft_process_resident_memory_bytes', 'Resident set size.', [[{}, mem.rss]]) +
      gauge('weft_process_heap_used_bytes', 'V8 heap in use.', [[{}, mem.heapUsed]])
    );
  }

  render(): string {
    return [this.requests, this.rejected, this.tokens, this.promptTokens, this.ttft, this.tps, this.latency, this.encoderRequests, this.encoderInputs, this.encoderLatency].map((m) => m.render()).join('') + this.renderProcess();
  }
}
