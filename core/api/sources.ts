/**
 * The model sources createEngine accepts besides a ready ModelSource: a URL
 * (a model directory, fetched file by file, or one `.gguf` file), a browser
 * directory handle (File System Access API / OPFS), and an in-memory file
 * map (core/formats/source.ts filesSource). Only web APIs here (fetch, Blob,
 * FileSystemDirectoryHandle), so this runs in browsers, workers, Node and Deno.
 *
 * A URL directory is probed with HEAD per file the loader asks about (no
 * listing is needed); a file is downloaded whole on first open — its bytes go
 * to the GPU anyway — with `onBytes(url, loaded, total)` reporting as it
 * streams (total 0 when the server sends no Content-Length).
 */
import { ModelFormatError, UnavailableError } from '../errors.ts';
import { blobSource, GGUF_FILE, normalizeModelPath, type ModelSource } from '../formats/source.ts';

export interface UrlSourceOptions {
  fetch?: typeof fetch;
  /** Extra request headers (e.g. Authorization). */
  headers?: Record<string, string>;
  onBytes?: (url: string, loaded: number, total: number) => void;
}

/** Is `s` a URL this module can fetch (http, https, blob, data; file where the runtime's fetch has it)? */
export function isUrl(s: string): boolean {
  return /^(https?|blob|data|file):/i.test(s);
}

async function download(url: string, f: typeof fetch, headers: Record<string, string>, onBytes?: UrlSourceOptions['onBytes']): Promise<Blob> {
  const res = await f(url, { headers }).catch((e: unknown) => {
    throw new UnavailableError('fetch_failed', `cannot fetch ${url}: ${(e as Error).message}`, 1, { url });
  });
  if (!res.ok) throw new ModelFormatError(`cannot fetch ${url}: HTTP ${res.status}`, { url, status: res.status });
  const total = Number(res.headers.get('content-length') ?? 0);
  if (!res.body || !onBytes) return res.blob();
  const parts: Uint8Array[] = [];
  let loaded = 0;
  const rd = res.body.getReader();
  for (;;) {
    const { done, value } = await rd.read();
    if (done) break;
    parts.push(value);
    loaded += value.byteLength;
    onBytes(url, loaded, total);
  }
  return new Blob(parts as BlobPart[]);
}

/** A model at a URL: a directory (trailing slash optional) or a single `.gguf` file (exposed as model.gguf). */
export function urlSource(url: string, opts: UrlSourceOptions = {}): ModelSource {
  const f = opts.fetch ?? fetch;
  const headers = opts.headers ?? {};
  const path = new URL(url).pathname;
  const single = /\.gguf$/i.test(path);
  const base = single ? url : url.endsWith('/') ? url : `${url}/`;
  const name = decodeURIComponent(path.split('/').filter(Boolean).pop() ?? 'model').replace(/\.gguf$/i, '');
  const urlOf = (p: string): string | null => {
    const q = normalizeModelPath(p);
    if (single) return q === GGUF_FILE ? base : null;
    return new URL(q.split('/').map(encodeURIComponent).join('/'), base).href;
  };
  const files = new Map<string, Promise<Blob>>();
  const present = new Map<string, Promise<boolean>>();
  const get = (p: string): Promise<Blob> => {
    const u = urlOf(p);
    if (!u) return Promise.reject(new ModelFormatError(`${name} is a single GGUF file; it has no ${p}`, { path: p }));
    let b = files.get(u);
    if (!b) files.set(u, (b = download(u, f, headers, opts.onBytes)));
    return b;
  };
  return {
    name,
    exists(p) {
      const u = urlOf(p);
      if (!u) return Promise.resolve(false);
      let r = present.get(u);
      if (!r) {
        r = f(u, { method: 'HEAD', headers }).then(
          (res) => res.ok,
          () => false,
        );
        present.set(u, r);
      }
      return r;
    },
    async readText(p) {
      return (await get(p)).text();
    },
    async open(p) {
      return blobSource(await get(p), p);
    },
  };
}

/** The subset of FileSystemDirectoryHandle used here (typed locally: not every lib.dom has it). */
export interface DirectoryHandleLike {
  readonly kind: 'directory';
  readonly name: string;
  getDirectoryHandle(name: string): Promise<DirectoryHandleLike>;
  getFileHandle(name: string): Promise<{ getFile(): Promise<Blob> }>;
}

export function isDirectoryHandle(v: unknown): v is DirectoryHandleLike {
  return typeof v === 'object' && v !== null && (v as { kind?: unknown }).kind === 'directory' && typeof (v as DirectoryHandleLike).getFileHandle === 'function';
}

/** A model in a browser directory handle (showDirectoryPicker(), OPFS). A lone `*.gguf` needs the file map form instead. */
export function directoryHandleSource(dir: DirectoryHandleLike): ModelSource {
  const file = async (p: string): Promise<Blob> => {
    const segs = normalizeModelPath(p).split('/');
    let d = dir;
    try {
      for (const s of segs.slice(0, -1)) d = await d.getDirectoryHandle(s);
      return await (await d.getFileHandle(segs[segs.length - 1]!)).getFile();
    } catch (e) {
      throw new ModelFormatError(`model "${dir.name}" has no file ${p} (${(e as Error).name})`, { path: p });
    }
  };
  return {
    name: dir.name,
    async exists(p) {
      return file(p).then(
        () => true,
        () => false,
      );
    },
    async readText(p) {
      return (await file(p)).text();
    },
    async open(p) {
      return blobSource(await file(p), p);
    },
  };
}
