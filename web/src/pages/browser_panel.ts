/**
 * The playground's "Run in this tab" card: load a model into the browser-mode
 * worker from the server's bundled models (read-only route
 * `models/<name>/<file>` next to the app), any URL, or local files (a
 * directory picker or a multi-file input with config.json, tokenizer.json,
 * tokenizer_config.json and model.safetensors, or one .gguf). Shows a
 * progress bar for download and weight upload, and how many files came from
 * the IndexedDB cache.
 */
import { browserModel, loadModelFromUrl, onBrowserModel, startBrowserModel, unloadBrowserModel, type LoadProgress } from '../browser_mode.ts';
import { field, fmtBytes, h, replace } from '../dom.ts';
import { clearCache } from '../model_cache.ts';

interface Listing {
  models: { name: string; files: { path: string; size: number }[] }[];
}

export function browserPanel(): HTMLElement {
  const gpu = 'gpu' in navigator;
  const source = h('select#bm-source', h('option', { value: 'bundled' }, 'Bundled model (this server)'), h('option', { value: 'url' }, 'URL'), h('option', { value: 'files' }, 'Local files'));
  const bundled = h('select#bm-bundled', h('option', { value: '' }, 'loading…'));
  const url = h('input#bm-url', { type: 'url', placeholder: 'https://host/path/model-dir/ or …/model.gguf' });
  const dir = h('input#bm-dir', { type: 'file', webkitdirectory: true, multiple: true });
  const files = h('input#bm-files', { type: 'file', multiple: true, accept: '.json,.safetensors,.gguf' });
  const load = h('button#bm-load.primary', { type: 'button', disabled: !gpu }, 'Load in this tab');
  const unload = h('button#bm-unload', { type: 'button', hidden: true }, 'Unload');
  const clear = h('button#bm-clear.link', { type: 'button' }, 'Clear download cache');
  const bar = h('progress#bm-progress', { max: 1, value: 0, hidden: true });
  const status = h('div#bm-status.muted', gpu ? 'No model loaded in this tab.' : 'This browser has no WebGPU (navigator.gpu): browser mode is unavailable.');
  const rows = {
    bundled: field('Model', bundled),
    url: field('Model URL', url, 'A directory with config.json, tokenizer.json, model.safetensors — or a .gguf file. Cached in IndexedDB.'),
    files: h('div', field('Model folder', dir), field('…or files', files, 'config.json, tokenizer.json, tokenizer_config.json, model.safetensors (or one .gguf)')),
  };
  const showSource = (): void => {
    for (const [k, el] of Object.entries(rows)) el.hidden = k !== source.value;
  };
  source.addEventListener('change', showSource);
  showSource();

  void fetch('models/', { headers: { accept: 'application/json' } })
    .then(async (r) => (r.ok && /json/.test(r.headers.get('content-type') ?? '') ? ((await r.json()) as Listing) : { models: [] }))
    .catch(() => ({ models: [] }) as Listing)
    .then((l) => {
      replace(bundled, l.models.length ? l.models.map((m) => h('option', { value: m.name }, `${m.name} (${fmtBytes(m.files.reduce((a, f) => a + f.size, 0))})`)) : h('option', { value: '' }, 'none served here'));
      if (!l.models.length && source.value === 'bundled') (source.value = 'url'), showSource();
    });

  const progress = (p: LoadProgress): void => {
    bar.hidden = false;
    bar.value = p.total ? p.loaded / p.total : 0;
    const what = { download: 'Downloading', device: 'Opening the GPU', weights: 'Uploading weights', ready: 'Ready' }[p.stage];
    status.textContent = `${what}… ${p.total ? `${fmtBytes(p.loaded)} / ${fmtBytes(p.total)}` : ''} ${p.detail ?? ''}`;
  };

  const describe = (): void => {
    const m = browserModel();
    unload.hidden = !m;
    if (!m) return void (status.textContent = 'No model loaded in this tab.');
    const c = m.cache ? ` · ${m.cache.hits}/${m.cache.files} files from cache` : '';
    status.dataset.cacheHits = String(m.cache?.hits ?? 0);
    status.textContent = `Loaded ${m.info.model} (${m.info.architecture}, context ${m.info.contextLength}) on ${m.info.device}${c}`;
  };
  onBrowserModel(describe);

  load.addEventListener('click', async () => {
    load.disabled = true;
    status.classList.remove('error');
    const t0 = performance.now();
    try {
      if (source.value === 'files') {
        const picked = [...(dir.files ?? []), ...(files.files ?? [])];
        if (!picked.length) throw new Error('pick a model folder or its files first');
        const map = new Map(picked.map((f) => [f.webkitRelativePath || f.name, f as Blob]));
        const name = picked[0]!.webkitRelativePath.split('/')[0] || picked.find((f) => /\.gguf$/i.test(f.name))?.name || 'local model';
        await startBrowserModel(name, map, progress);
      } else {
        const target = source.value === 'url' ? url.value.trim() : bundled.value ? new URL(`models/${encodeURIComponent(bundled.value)}/`, document.baseURI).href : '';
        if (!target) throw new Error(source.value === 'url' ? 'enter a model URL' : 'no bundled model is served here');
        await loadModelFromUrl(new URL(target, document.baseURI).href, progress);
      }
      describe();
      status.textContent += ` · ${((performance.now() - t0) / 1000).toFixed(1)} s`;
    } catch (e) {
      status.classList.add('error');
      status.textContent = `Load failed: ${(e as Error).message}`;
    } finally {
      bar.hidden = true;
      load.disabled = !gpu;
    }
  });
  unload.addEventListener('click', () => unloadBrowserModel());
  clear.addEventListener('click', () => void clearCache().then(() => (status.textContent = 'Download cache cleared.')));

  return h(
    'section.card#browser-mode',
    h('h2', 'Run in this tab', h('span.badge', 'WebGPU')),
    h('p.muted', 'The same engine as the server, in a Web Worker on this device’s GPU. Nothing is sent to the server.'),
    h('div.grid2', field('Source', source), rows.bundled, rows.url, rows.files),
    h('div.row', load, unload, clear),
    bar,
    status,
  );
}
