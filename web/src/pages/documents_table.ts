/**
 * The Documents page's live table: the documents this browser tracks (ids
 * it uploaded, or pasted in), each polled with GET /api/v1/document/{id}
 * until it is `ready` or `failed` — then no more requests for it. Polling
 * runs only while the page is shown and something is unfinished. Also the
 * store summary (GET /api/v1/documents/status) and Delete.
 */
import { ApiError } from '../api.ts';
import { fmtBytes, h, replace } from '../dom.ts';
import { deleteDocument, documentsStatus, FINAL_STATES, getDocument, saveTrackedIds, STEPS, trackedIds, type DocRecord, type DocsStatus } from './documents_api.ts';
import { duration, fmtInt, showError, stateBadge, timeCell } from './documents_ui.ts';

/** Between polls of unfinished documents (ms). */
const POLL_MS = 600;
/** Record requests in flight at once. */
const PARALLEL = 6;

interface Row {
  id: string;
  /** Shown until the first record arrives. */
  name: string;
  rec?: DocRecord;
  /** 404: deleted elsewhere, or not visible to this identity. */
  gone?: boolean;
  /** The last failed poll (network, 5xx); polling goes on. */
  err?: Error;
  tr: HTMLTableRowElement;
}

export interface DocTable {
  el: HTMLElement;
  /** Adds `id` at the top (no-op when tracked) and polls it. */
  track(id: string, name?: string): void;
  has(id: string): boolean;
  /** Re-reads every tracked document (after the identity changed). */
  reload(): void;
  show(): void;
  hide(): void;
}

const isFinal = (r: Row): boolean => r.gone === true || (r.rec !== undefined && FINAL_STATES.includes(r.rec.state));

export function documentsTable(): DocTable {
  const rows = new Map<string, Row>();
  const tbody = h('tbody');
  const empty = h('p#doc-empty.muted', 'No documents yet. Upload files above, or track a document id below.');
  const table = h(
    'table.readers.docs#doc-table',
    h('thead', h('tr', ...['Document', 'Category', 'State', 'Chunks', 'Tokens', 'Characters', 'Created', 'Finished', ''].map((t, i) => h(i >= 3 && i <= 5 ? 'th.num' : 'th', t)))),
    tbody,
  );
  const error = h('div#doc-table-error.error.errbox');
  const summary = h('span#doc-summary.muted.small');
  const trackInput = h('input#doc-track-id.mono', { placeholder: 'document id (uuid)', spellcheck: false });
  const trackForm = h('form.row.track', trackInput, h('button', { type: 'submit' }, 'Track'));
  trackForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const id = trackInput.value.trim().toLowerCase();
    if (id) track(id);
    trackInput.value = '';
  });

  let visible = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let ticking = false;

  const persist = (): void => saveTrackedIds([...rows.keys()]);

  const render = (r: Row): void => {
    const rec = r.rec;
    const state = r.gone ? 'not found' : (rec?.state ?? 'loading');
    r.tr.dataset.state = state;
    const del = h('button.link.danger', { type: 'button' }, r.gone ? 'Forget' : 'Delete');
    del.addEventListener('click', () => void (r.gone ? forget(r.id) : remove(r, del)));
    const step = rec && rec.state !== 'failed' && rec.state !== 'ready' ? `step ${STEPS.indexOf(rec.state) + 1} of ${STEPS.length}` : null;
    const took = rec ? duration(rec.started_at, rec.finished_at) : null;
    replace(
      r.tr,
      h(
        'td.doc-name',
        h('div.strong', rec?.name ?? r.name ?? ''),
        h('div.mono.small.muted', r.id),
        rec ? h('div.small.muted', [rec.format, fmtBytes(rec.size_bytes), rec.counts.pages !== null ? `${rec.counts.pages} pages` : null, rec.attempts > 1 ? `${rec.attempts} attempts` : null].filter(Boolean).join(' · ')) : null,
      ),
      h('td', rec ? rec.category : '—', rec?.owners.length ? h('div.small.muted', `owners: ${rec.owners.join(', ')}`) : null),
      h(
        'td.doc-state',
        stateBadge(state, rec?.error?.message),
        step ? h('div.small.muted', step) : null,
        rec?.error ? h('div.small.error', h('code', rec.error.code), ' ', rec.error.message) : null,
        r.gone ? h('div.small.muted', 'deleted, or not visible to this identity') : null,
        r.err ? h('div.small.error', r.err.message) : null,
      ),
      h('td.num', fmtInt(rec?.counts.chunks)),
      h('td.num', fmtInt(rec?.counts.tokens)),
      h('td.num', fmtInt(rec?.counts.characters)),
      h('td.small', timeCell(rec?.created_at ?? null)),
      h('td.small', timeCell(rec?.finished_at ?? null), took ? h('div.muted', took) : null),
      h('td.actions', del),
    );
  };

  const refreshEmpty = (): void => {
    empty.hidden = rows.size > 0;
    table.hidden = rows.size === 0;
  };

  const poll = async (r: Row): Promise<void> => {
    try {
      r.rec = await getDocument(r.id);
      r.err = undefined;
      r.gone = false;
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) r.gone = true;
      else r.err = e as Error;
    }
    if (rows.get(r.id) === r) render(r);
  };

  const showStatus = (s: DocsStatus): void => {
    summary.classList.remove('error');
    if (!s.started) return void (summary.textContent = 'The document store starts with the first upload.');
    const states = Object.entries(s.states ?? {})
      .filter(([, n]) => n)
      .map(([k, n]) => `${n} ${k}`);
    summary.textContent = `Store: ${states.join(' · ') || 'empty'} · embedder ${s.embedder} (${s.dims} dims)`;
  };

  /** One round: every unfinished document, the store summary; then again in POLL_MS while anything is unfinished. */
  const tick = async (): Promise<void> => {
    timer = undefined;
    if (!visible || ticking) return;
    ticking = true;
    try {
      const pending = [...rows.values()].filter((r) => !isFinal(r));
      for (let i = 0; i < pending.length; i += PARALLEL) await Promise.all(pending.slice(i, i + PARALLEL).map(poll));
      // Its failure (no key, 503 documents_unavailable, unreachable) shows in the summary: the error box is for actions.
      try {
        showStatus(await documentsStatus());
      } catch (e) {
        summary.classList.add('error');
        summary.textContent = e instanceof ApiError ? `${e.message} (${e.code})` : (e as Error).message;
      }
    } finally {
      ticking = false;
    }
    if (visible && [...rows.values()].some((r) => !isFinal(r))) timer = setTimeout(() => void tick(), POLL_MS);
  };
  const kick = (): void => {
    if (visible && !ticking && timer === undefined) timer = setTimeout(() => void tick(), 0);
  };

  const add = (id: string, name: string, atTop: boolean): Row => {
    const r: Row = { id, name, tr: h('tr', { dataset: { docId: id } }) };
    rows.set(id, r);
    if (atTop) tbody.prepend(r.tr);
    else tbody.append(r.tr);
    render(r);
    return r;
  };

  function track(id: string, name = ''): void {
    if (rows.has(id)) return;
    add(id, name, true);
    persist();
    refreshEmpty();
    kick();
  }

  function forget(id: string): void {
    rows.get(id)?.tr.remove();
    rows.delete(id);
    persist();
    refreshEmpty();
  }

  async function remove(r: Row, btn: HTMLButtonElement): Promise<void> {
    if (!confirm(`Delete ${r.rec?.name ?? r.id}? Its chunks leave the search index.`)) return;
    btn.disabled = true;
    try {
      await deleteDocument(r.id);
      showError(error, null);
      forget(r.id);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) forget(r.id);
      else {
        btn.disabled = false;
        showError(error, e);
      }
    }
    kick(); // refresh the store summary
  }

  for (const id of trackedIds()) add(id, '', false);
  refreshEmpty();

  const el = h(
    'section.card#doc-list',
    h('div.row.spread', h('h2', 'Documents'), summary),
    error,
    empty,
    h('div.table-scroll', table),
    h('div.row.spread.track-row', h('span.muted.small', 'Uploads from this browser are listed here. To follow another document, track its id:'), trackForm),
  );
  return {
    el,
    track,
    has: (id) => rows.has(id),
    reload() {
      for (const r of rows.values()) {
        r.rec = undefined;
        r.gone = false;
        render(r);
      }
      kick();
    },
    show() {
      visible = true;
      // Ids that were not found may be visible now (another identity, a restored store): ask again.
      for (const r of rows.values()) if (r.gone) r.gone = false;
      kick();
    },
    hide() {
      visible = false;
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
