/**
 * Browser mode, page side: gathers a model's files (picked locally, or
 * fetched from a URL through the IndexedDB cache), starts web/src/worker.ts
 * and talks to it through the engine library's createWorkerEngine
 * (core/api), as any web app embedding Weft would. One in-tab model at a
 * time; loading another replaces it.
 */
import { createWorkerEngine, type LoadProgress as EngineProgress, type ReaderInfo, type WeftEngine } from '../../core/api/index.ts';
import { cachedFetch } from './model_cache.ts';

export interface LoadProgress {
  stage: 'download' | 'device' | 'weights' | 'ready';
  loaded: number;
  total: number;
  detail?: string;
}

export interface BrowserModel {
  engine: WeftEngine;
  info: ReaderInfo;
  /** How many files came from the IndexedDB cache, of how many (URL loads only). */
  cache: { hits: number; files: number } | null;
  terminate(): void;
}

let current: BrowserModel | null = null;
const listeners = new Set<(m: BrowserModel | null) => void>();

export const browserModel = (): BrowserModel | null => current;
export function onBrowserModel(cb: (m: BrowserModel | null) => void): () => void {
  listeners.add(cb);
  return () => listeners.delete(cb);
}
function setCurrent(m: BrowserModel | null): void {
  current?.terminate();
  current = m;
  for (const cb of listeners) cb(m);
}

export function unloadBrowserModel(): void {
  setCurrent(null);
}

/** Starts a worker on `files` and resolves once the model is loaded on the GPU. */
export async function startBrowserModel(name: string, files: Map<string, Blob>, onProgress: (p: LoadProgress) => void, cache: BrowserModel['cache'] = null): Promise<BrowserModel> {
  if (!('gpu' in navigator)) throw new Error('this browser has no WebGPU (navigator.gpu); browser mode needs it');
  setCurrent(null);
  const worker = new Worker(new URL('./worker.ts', import.meta.url), { type: 'module', name: 'weft-reader' });
  const engine = await createWorkerEngine(worker, { model: files, name, gpuBackend: 'navigator', onProgress: (p) => onProgress(progressOf(p)) }).catch((e: unknown) => {
    worker.terminate();
    throw e;
  });
  // unload() fails what is in flight at once; terminating the worker frees its device
  // without waiting for the worker's reply (so that promise is left to lapse).
  const model: BrowserModel = { engine, info: engine.info(), cache, terminate: () => (void engine.unload(), worker.terminate()) };
  setCurrent(model);
  return model;
}

function progressOf(p: EngineProgress): LoadProgress {
  return { stage: p.stage === 'fetch' ? 'download' : p.stage, loaded: p.loaded, total: p.total, ...(p.detail ? { detail: p.detail } : {}) };
}

/** Files a model directory URL is probed for when the server gives no listing. */
const KNOWN = ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'model.safetensors', 'model.safetensors.index.json'];

/** The files of a model at `url`: a `.gguf` file, or a directory (listed by the server, else probed). */
export async function listModelFiles(url: string): Promise<{ path: string; size?: number }[]> {
  if (/\.gguf$/i.test(new URL(url).pathname)) return [{ path: new URL(url).pathname.split('/').pop()! }];
  const dir = url.endsWith('/') ? url : `${url}/`;
  const listing = await fetch(dir, { headers: { accept: 'application/json' }, cache: 'no-store' }).catch(() => null);
  if (listing?.ok && /json/.test(listing.headers.get('content-type') ?? '')) {
    const body = (await listing.json()) as { files?: { path: string; size: number }[] };
    if (Array.isArray(body.files)) return body.files;
  }
  const found: { path: string }[] = [];
  for (const f of KNOWN) if ((await fetch(dir + f, { method: 'HEAD' }).catch(() => null))?.ok) found.push({ path: f });
  const index = found.find((f) => f.path === 'model.safetensors.index.json');
  if (index) {
    const idx = (await (await fetch(dir + index.path)).json()) as { weight_map?: Record<string, string> };
    for (const shard of new Set(Object.values(idx.weight_map ?? {}))) found.push({ path: shard });
  }
  if (!found.some((f) => f.path === 'config.json')) throw new Error(`no model at ${dir}: no config.json there (and no file listing)`);
  return found;
}

/** Downloads (or reads from the cache) every file of the model at `url` and starts it. */
export async function loadModelFromUrl(url: string, onProgress: (p: LoadProgress) => void): Promise<BrowserModel> {
  const files = await listModelFiles(url);
  const dir = /\.gguf$/i.test(url) ? new URL('./', url).href : url.endsWith('/') ? url : `${url}/`;
  const total = files.reduce((a, f) => a + (f.size ?? 0), 0);
  const got = new Map<string, Blob>();
  const done = new Map<string, number>();
  let hits = 0;
  const report = (): void => onProgress({ stage: 'download', loaded: [...done.values()].reduce((a, b) => a + b, 0), total, detail: `${got.size}/${files.length} files` });
  await Promise.all(
    files.map(async (f) => {
      const r = await cachedFetch(new URL(f.path, dir).href, (n) => (done.set(f.path, n), report()));
      if (r.cached) hits++;
      got.set(f.path, r.blob);
      report();
    }),
  );
  const name = decodeURIComponent(new URL(dir).pathname.split('/').filter(Boolean).pop() ?? 'model');
  return startBrowserModel(name, got, onProgress, { hits, files: files.length });
}
