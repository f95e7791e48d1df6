/**
 * A hand-rolled SVG time-series chart (no chart library): one line with a
 * soft area under it, an optional dashed ceiling (e.g. KV blocks in the
 * pool), y-axis labels at 0 / mid / max, and the time window along x.
 * `lineChart` returns a fresh <svg>; the dashboard re-renders on each poll.
 */
export interface Point {
  t: number;
  v: number | null;
}

export interface ChartOptions {
  width?: number;
  height?: number;
  /** Window shown, ms (points older than now - window are dropped). */
  windowMs: number;
  now: number;
  /** A dashed horizontal line (e.g. a capacity). */
  ceiling?: number | null;
  format?: (v: number) => string;
  /** Whole-number series (queue depth, batch size): integer axis labels. */
  integer?: boolean;
  label: string;
}

const NS = 'http://www.w3.org/2000/svg';

function el<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, text?: string): SVGElementTagNameMap[K] {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

/**
 * A "nice" upper bound for the y axis at or above `v`: 1, 2, 2.5 or 5 × 10^k;
 * for integer series 2, 4 or 10 × 10^k (at least 2), so the midline is whole.
 */
export function niceMax(v: number, integer = false): number {
  if (integer) {
    if (!(v > 2)) return 2;
    const p = 10 ** Math.floor(Math.log10(v / 2));
    for (const m of [2, 4, 10, 20]) if (m * p >= v) return m * p;
    return 20 * p;
  }
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

export function lineChart(points: Point[], o: ChartOptions): SVGSVGElement {
  const W = o.width ?? 480;
  const H = o.height ?? 180;
  const pad = { l: 44, r: 12, t: 12, b: 24 };
  const fmt = o.format ?? ((v: number) => (Math.abs(v) >= 100 || Number.isInteger(v) ? v.toFixed(0) : v.toFixed(1)));
  const axis = (v: number): string => (v >= 1000 ? `${+(v / 1000).toFixed(1)}k` : Number.isInteger(v) ? String(v) : fmt(v));
  const t0 = o.now - o.windowMs;
  const pts = points.filter((p) => p.t >= t0 && p.v !== null && Number.isFinite(p.v)) as { t: number; v: number }[];
  const ymax = niceMax(Math.max(0, o.ceiling ?? 0, ...pts.map((p) => p.v)), o.integer);
  const x = (t: number): number => pad.l + ((t - t0) / o.windowMs) * (W - pad.l - pad.r);
  const y = (v: number): number => pad.t + (1 - v / ymax) * (H - pad.t - pad.b);
  const svg = el('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': o.label });
  for (const f of [0, 0.5, 1]) {
    const yy = y(ymax * f);
    svg.append(el('line', { x1: pad.l, x2: W - pad.r, y1: yy, y2: yy, class: 'grid' }));
    svg.append(el('text', { x: pad.l - 6, y: yy + 4, class: 'axis', 'text-anchor': 'end' }, axis(ymax * f)));
  }
  const secs = Math.round(o.windowMs / 1000);
  svg.append(el('text', { x: pad.l, y: H - 6, class: 'axis' }, `-${secs}s`));
  svg.append(el('text', { x: W - pad.r, y: H - 6, class: 'axis', 'text-anchor': 'end' }, 'now'));
  if (o.ceiling !== undefined && o.ceiling !== null && o.ceiling > 0) {
    svg.append(el('line', { x1: pad.l, x2: W - pad.r, y1: y(o.ceiling), y2: y(o.ceiling), class: 'ceiling' }));
  }
  if (pts.length) {
    const line = pts.map((p, i) => `${i ? 'L' : 'M'}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join('');
    const first = pts[0]!;
    const last = pts[pts.length - 1]!;
    svg.append(el('path', { d: `${line}L${x(last.t).toFixed(1)},${y(0)}L${x(first.t).toFixed(1)},${y(0)}Z`, class: 'area' }));
    svg.append(el('path', { d: line, class: 'line' }));
    svg.append(el('circle', { cx: x(last.t), cy: y(last.v), r: 3, class: 'dot' }));
  } else {
    svg.append(el('text', { x: W / 2, y: H / 2, class: 'axis', 'text-anchor': 'middle' }, 'waiting for data…'));
  }
  return svg;
}
