/**
 * Management console: consumer groups and their readers with live readiness
 * (polls GET /reader_groups), starting a reader (PUT /models), deleting one
 * (DELETE /reader/{id}) and viewing its model config (GET /config/{id}),
 * which can be sent to the memory calculator below. A reader whose model is
 * a Hub id shows its download (percent and bytes) as a bar while `downloading`.
 */
import { apiFetch, apiUrl, getJson, type ReaderSummary } from '../api.ts';
import { field, fmtBytes, h, replace } from '../dom.ts';
import { memoryCalculator } from './memory_calc.ts';
import { poller, type Page } from './page.ts';

export function readersPage(): Page {
  const list = h('div#rd-list');
  const listError = h('div#rd-error.error');
  const updated = h('span.muted.small');

  // --- start form ---
  const f = {
    model: h('input#rd-model', { placeholder: 'server default model', name: 'model' }),
    consumer_group: h('input#rd-group', { placeholder: 'primary', name: 'consumer_group' }),
    reader_id: h('input#rd-id', { placeholder: 'generated', name: 'reader_id' }),
    dtype: h('select#rd-dtype', ...['auto', 'f32', 'f16', 'q8_0', 'q4_0'].map((d) => h('option', { value: d }, d))),
    backend: h('input#rd-backend', { placeholder: 'auto', name: 'backend' }),
    max_batch_size: h('input#rd-batch', { type: 'number', min: 1, placeholder: '16' }),
    max_context: h('input#rd-context', { type: 'number', min: 1, placeholder: 'model’s' }),
    page_cache_size: h('input#rd-cache', { placeholder: 'e.g. 64MB or 10%' }),
  };
  const prefix = h('input#rd-prefix', { type: 'checkbox', checked: true });
  const submit = h('button#rd-start.primary', { type: 'submit' }, 'Start reader');
  const formMsg = h('div#rd-form-msg');
  const form = h(
    'form#rd-form',
    h(
      'div.grid3',
      field('Model', f.model, 'A model directory or .gguf on the server, or a Hub id (org/name, org/name:file.gguf) the server downloads'),
      field('Consumer group', f.consumer_group),
      field('Reader id', f.reader_id),
      field('Weights dtype', f.dtype),
      field('GPU backend', f.backend),
      field('Max batch size', f.max_batch_size),
      field('Max context', f.max_context),
      field('KV cache size', f.page_cache_size),
      h('label.field.check', prefix, h('span', 'Prefix caching')),
    ),
    h('div.row', submit, formMsg),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const body: Record<string, unknown> = { prefix_caching: prefix.checked };
    for (const [k, input] of Object.entries(f)) {
      const v = input.value.trim();
      if (!v || (k === 'dtype' && v === 'auto')) continue;
      body[k] = input instanceof HTMLInputElement && input.type === 'number' ? Number(v) : k === 'page_cache_size' && /^\d+$/.test(v) ? Number(v) : v;
    }
    submit.disabled = true;
    formMsg.className = 'muted';
    formMsg.textContent = 'Starting…';
    void apiFetch('management', 'models', { method: 'PUT', body: JSON.stringify(body) })
      .then(async (r) => {
        const s = (await r.json()) as ReaderSummary;
        formMsg.textContent = `Started ${s.reader_id} in ${s.consumer_group}; it loads in the background.`;
        void refresh();
      })
      .catch((err: Error) => {
        formMsg.className = 'error';
        formMsg.textContent = err.message;
      })
      .finally(() => (submit.disabled = false));
  });

  // --- config viewer ---
  const configTitle = h('h2', 'Model config');
  const configPre = h('pre#rd-config.mono.scroll');
  const toCalc = h('button.link', { type: 'button' }, 'Use in memory calculator');
  const configCard = h('section.card#rd-config-card', { hidden: true }, h('div.row.spread', configTitle, h('div', toCalc, h('button.link', { type: 'button', onclick: () => (configCard.hidden = true) }, 'Close'))), configPre);
  const calc = memoryCalculator();
  let shown: Record<string, unknown> | null = null;
  toCalc.addEventListener('click', () => {
    if (shown) calc.setConfig(shown);
    calc.el.scrollIntoView({ behavior: 'smooth' });
  });
  const viewConfig = async (id: string): Promise<void> => {
    configCard.hidden = false;
    configTitle.textContent = `Model config · ${id}`;
    configPre.textContent = 'Loading…';
    try {
      shown = await getJson<Record<string, unknown>>('management', `config/${encodeURIComponent(id)}`);
      configPre.textContent = JSON.stringify(shown, null, 2);
    } catch (e) {
      shown = null;
      configPre.textContent = (e as Error).message;
    }
  };

  const remove = async (id: string, btn: HTMLButtonElement): Promise<void> => {
    if (!confirm(`Stop and remove reader ${id}?`)) return;
    btn.disabled = true;
    try {
      await apiFetch('management', `reader/${encodeURIComponent(id)}`, { method: 'DELETE' });
      if (configTitle.textContent?.endsWith(id)) configCard.hidden = true;
    } catch (e) {
      listError.textContent = (e as Error).message;
    }
    await refresh();
  };

  const badge = (r: ReaderSummary): HTMLElement => h(`span.state.${r.ready ? 'ok' : r.state === 'failed' || r.error ? 'bad' : 'wait'}`, { title: r.error?.message ?? r.state }, r.ready ? 'ready' : r.state);

  /** The download of a reader whose model is a Hub id: a bar with percent and bytes (all files together). */
  const downloadBar = (r: ReaderSummary): HTMLElement | null => {
    const d = r.download;
    if (r.state !== 'downloading' || !d) return null;
    const pct = d.total > 0 ? Math.min(100, Math.floor((100 * d.loaded) / d.total)) : 0;
    const bar = h('progress', { max: 100 });
    if (d.total > 0) bar.value = pct; // no value: an indeterminate bar until the file list is known
    return h(
      'div.rd-download',
      { dataset: { loaded: String(d.loaded), total: String(d.total) } },
      bar,
      h('div.small.muted', d.total > 0 ? `${pct}% · ${fmtBytes(d.loaded)} / ${fmtBytes(d.total)}${d.file ? ` · ${d.file}` : ''}` : 'Asking the Hub…'),
    );
  };

  const render = (groups: Record<string, ReaderSummary[]>): void => {
    const names = Object.keys(groups).sort();
    if (!names.length) return replace(list, h('p.muted', 'No readers. Start one below.'));
    replace(
      list,
      names.map((g) =>
        h(
          'div.group',
          h('h3', g, h('span.muted.small', ` · ${groups[g]!.filter((r) => r.ready).length}/${groups[g]!.length} ready`)),
          h(
            'table.readers',
            h('thead', h('tr', ...['Reader', 'State', 'Model', 'Device', 'In flight', ''].map((t) => h('th', t)))),
            h(
              'tbody',
              groups[g]!.map((r) => {
                const del = h('button.link.danger', { type: 'button' }, 'Delete');
                del.addEventListener('click', () => void remove(r.reader_id, del));
                return h(
                  'tr',
                  { dataset: { readerId: r.reader_id, ready: String(r.ready) } },
                  h('td.mono', r.reader_id),
                  h('td', badge(r), downloadBar(r), r.error ? h('div.small.error', r.error.message) : null),
                  h('td.mono.small.wrap', r.model),
                  h('td.small', r.device ? `${r.device} (${r.backend})` : '—'),
                  h('td', String(r.in_flight ?? 0)),
                  h('td.actions', h('button.link', { type: 'button', onclick: () => void viewConfig(r.reader_id), disabled: !r.ready }, 'Config'), del),
                );
              }),
            ),
          ),
        ),
      ),
    );
  };

  const refresh = async (): Promise<void> => {
    try {
      render(await getJson<Record<string, ReaderSummary[]>>('management', 'reader_groups'));
      listError.textContent = '';
      updated.textContent = `updated ${new Date().toLocaleTimeString()}`;
    } catch (e) {
      listError.textContent = `${(e as Error).message}`;
      if (!list.childElementCount) replace(list, h('p.muted', `The management API (${apiUrl('management', '')}) is not reachable from this page. Set its URL in Settings.`));
    }
  };
  const poll = poller(refresh, 1000);

  const el = h(
    'div.page.readers-page',
    h('section.card', h('div.row.spread', h('h2', 'Readers'), updated), listError, list),
    configCard,
    h('section.card', h('h2', 'Start a reader'), form),
    calc.el,
  );
  return { el, show: () => poll.start(), hide: () => poll.stop() };
}
