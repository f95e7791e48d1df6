/**
 * Prometheus text-format parsing for the metrics dashboard (pure,
 * unit-tested): samples with labels, and helpers to sum a metric over its
 * label sets and to turn a counter into a rate between two scrapes.
 */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parsePrometheus(text: string): Sample[] {
  const out: Sample[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL)) labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    const v = m[3]!;
    const value = v === '+Inf' ? Infinity : v === '-Inf' ? -Infinity : Number(v);
    out.push({ name: m[1]!, labels, value });
  }
  return out;
}

/** Sum of a metric over all its label sets (null when it is absent). */
export function total(samples: Sample[], name: string, filter: Record<string, string> = {}): number | null {
  let sum: number | null = null;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.entries(filter).some(([k, v]) => s.labels[k] !== v)) continue;
    sum = (sum ?? 0) + s.value;
  }
  return sum;
}

/** Per-second rate of a counter between two scrapes; a reset (restart) counts from zero. */
export function rate(prev: { at: number; value: number } | null, cur: { at: number; value: number }): number | null {
  if (!prev || cur.at <= prev.at) return null;
  const delta = cur.value >= prev.value ? cur.value - prev.value : cur.value;
  return delta / ((cur.at - prev.at) / 1000);
}
