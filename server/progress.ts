/**
 * Draws model-loading progress (core/progress.ts LoadProgress) on a
 * stream: on a terminal, one bar redrawn in place
 *   loading  weights    [##########----------]  3/7  0.4s
 *   loading  pipelines  [################----]  8/10 1.1s  matmul{...}
 * and on anything else (a log file, a pipe, a container's stdout) JSON lines
 * in the server log's shape, `{"level":"info","msg":"loading", phase, done,
 * total, ms, ...}`, at most one per `intervalMs` per phase plus each phase's
 * last line, so a log stays short.
 */
import type { LoadProgress } from '../core/progress.ts';

export interface ProgressOptions {
  /** Redraw a bar (a TTY) rather than write JSON lines. Default: the stream's isTTY. */
  tty?: boolean;
  /** Extra fields of each JSON line (reader_id, model). */
  fields?: Record<string, unknown>;
  /** Minimum milliseconds between JSON lines of one phase (default 1000). */
  intervalMs?: number;
  /** Timestamps on JSON lines (default true), as the server log. */
  timestamps?: boolean;
}

interface Stream {
  write(s: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

const BAR = 24;

export function progressReporter(out: Stream, opts: ProgressOptions = {}): (p: LoadProgress) => void {
  const tty = opts.tty ?? !!out.isTTY;
  const interval = opts.intervalMs ?? 1000;
  let lastPhase = '';
  let lastAt = -Infinity;
  let pending: LoadProgress | null = null;
  const line = (p: LoadProgress): void => {
    const rec = {
      ...(opts.timestamps === false ? {} : { ts: new Date().toISOString() }),
      level: 'info',
      msg: p.phase === 'ready' ? 'loaded' : 'loading',
      ...opts.fields,
      phase: p.phase,
      done: p.done,
      total: p.total,
      ms: Math.round(p.ms),
      ...(p.label !== undefined && p.phase !== 'ready' ? { label: p.label } : {}),
    };
    out.write(`${JSON.stringify(rec)}\n`);
    lastAt = p.ms;
  };
  return (p) => {
    if (tty) {
      if (p.phase === 'ready') {
        out.write(`\r\x1b[2Kloaded in ${(p.ms / 1000).toFixed(1)}s\n`);
        return;
      }
      const frac = p.total ? Math.min(1, p.done / p.total) : 0;
      const fill = Math.round(frac * BAR);
      const count = p.total ? `${p.done}/${p.total}` : String(p.done);
      const label = p.label ? `  ${p.label}` : '';
      const text = `loading  ${p.phase.padEnd(9)} [${'#'.repeat(fill)}${'-'.repeat(BAR - fill)}] ${count.padStart(5)} ${(p.ms / 1000).toFixed(1)}s${label}`;
      const width = Math.max(20, (out.columns || 100) - 1); // a pty may report 0 columns
      out.write(`\r\x1b[2K${text.slice(0, width)}`);
      return;
    }
    // JSON lines: each phase's first line, then at most one per interval; a phase's last
    // line (done == total) and 'ready' always.
    const phaseChanged = p.phase !== lastPhase;
    if (phaseChanged && pending) line(pending); // the previous phase's last state
    pending = null;
    lastPhase = p.phase;
    const final = p.phase === 'ready' || (p.total !== null && p.done >= p.total);
    if (phaseChanged || final || p.ms - lastAt >= interval) line(p);
    else pending = p;
  };
}
