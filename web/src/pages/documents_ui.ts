/**
 * Small view helpers shared by the Documents page's cards: the API error
 * box, state badges and time formatting.
 */
import { ApiError } from '../api.ts';
import { h, replace, type Child } from '../dom.ts';

/**
 * Shows an error in `box` (cleared with `null`): the API's message, then
 * its stable code and HTTP status, then any `details` other than `field`
 * (already in the message), e.g. `{"min": 8, "max": 512}` or the valid names.
 */
export function showError(box: HTMLElement, err: unknown): void {
  if (err === null || err === undefined) return replace(box);
  const e = err as Error;
  const meta: Child[] = [];
  if (e instanceof ApiError) {
    meta.push(h('code', e.code), e.status ? ` · HTTP ${e.status}` : '');
    const rest = e.details && typeof e.details === 'object' ? Object.entries(e.details as Record<string, unknown>).filter(([k]) => k !== 'field') : [];
    if (rest.length) meta.push(' · ', h('code', JSON.stringify(Object.fromEntries(rest))));
  }
  replace(box, h('div.msg-text', e.message || String(err)), meta.length ? h('div.err-meta', meta) : null);
}

/** A coloured state pill: ready green, failed red, in progress amber. */
export function stateBadge(state: string, title?: string): HTMLElement {
  const cls = state === 'ready' ? 'ok' : state === 'failed' || state === 'not found' ? 'bad' : 'wait';
  return h(`span.state.${cls}`, { title: title ?? state }, state);
}

/** "14:03:12" today, else "Nov 21 14:03" (local time); full ISO in the title. */
export function timeCell(iso: string | null): HTMLElement {
  if (!iso) return h('span.muted', '—');
  const d = new Date(iso);
  const today = new Date().toDateString() === d.toDateString();
  const text = today ? d.toLocaleTimeString([], { hour12: false }) : `${d.toLocaleDateString([], { month: 'short', day: 'numeric' })} ${d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', hour12: false })}`;
  return h('span', { title: iso }, text);
}

/** Milliseconds between two ISO times as "850 ms" / "4.2 s" / "3 min 5 s"; null when either is missing. */
export function duration(fromIso: string | null, toIso: string | null): string | null {
  if (!fromIso || !toIso) return null;
  const ms = Date.parse(toIso) - Date.parse(fromIso);
  if (!Number.isFinite(ms) || ms < 0) return null;
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export const fmtInt = (n: number | null | undefined): string => (typeof n === 'number' && Number.isFinite(n) ? n.toLocaleString('en-US') : '—');
