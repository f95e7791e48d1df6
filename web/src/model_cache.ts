/**
 * Model files for browser mode, fetched from a URL with download progress
 * and cached in IndexedDB (`idb`). An entry is keyed by URL + size + ETag,
 * learnt from a HEAD request first, so a changed file on the server is
 * fetched again and a second load of the same files never downloads.
 */
import { openDB, type DBSchema, type IDBPDatabase } from 'idb';

interface CacheDb extends DBSchema {
  files: { key: string; value: { key: string; url: string; size: number; etag: string; blob: Blob; storedAt: number }; indexes: { url: string } };
}

let db: Promise<IDBPDatabase<CacheDb>> | undefined;
function open(): Promise<IDBPDatabase<CacheDb>> {
  return (db ??= openDB<CacheDb>('weft-models', 1, {
    upgrade(d) {
      d.createObjectStore('files', { keyPath: 'key' }).createIndex('url', 'url');
    },
  }));
}

export interface Fetched {
  blob: Blob;
  /** True when the bytes came from IndexedDB. */
  cached: boolean;
}

/** Reads a response body as a Blob, reporting bytes received. */
async function download(res: Response, total: number, onBytes: (n: number) => void): Promise<Blob> {
  if (!res.body) return res.blob();
  const parts: Uint8Array[] = [];
  let n = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    parts.push(value);
    n += value.byteLength;
    onBytes(Math.min(n, total || n));
  }
  return new Blob(parts as BlobPart[]);
}

/** GETs `url` unless IndexedDB holds the same URL at the same size and ETag. */
export async function cachedFetch(url: string, onBytes: (n: number) => void = () => {}): Promise<Fetched> {
  const head = await fetch(url, { method: 'HEAD', cache: 'no-store' }).catch(() => null);
  const size = Number(head?.ok ? (head.headers.get('content-length') ?? NaN) : NaN);
  const etag = head?.ok ? (head.headers.get('etag') ?? '') : '';
  const key = `${url}|${size}|${etag}`;
  const store = await open().catch(() => null);
  if (store && Number.isFinite(size)) {
    const hit = await store.get('files', key).catch(() => undefined);
    if (hit && hit.blob.size === size) {
      onBytes(size);
      return { blob: hit.blob, cached: true };
    }
  }
  const res = await fetch(url, { cache: 'no-store' });
  if (!res.ok) throw new Error(`GET ${url}: ${res.status} ${res.statusText}`);
  const blob = await download(res, Number(res.headers.get('content-length') ?? size) || 0, onBytes);
  if (store && Number.isFinite(size) && blob.size === size) {
    const tx = store.transaction('files', 'readwrite');
    for (const old of await tx.store.index('url').getAllKeys(url)) await tx.store.delete(old);
    await tx.store.put({ key, url, size, etag, blob, storedAt: Date.now() });
    await tx.done.catch(() => {}); // a full quota only costs the next load a download
  }
  return { blob, cached: false };
}

/** Bytes held in the cache, and a way to empty it. */
export async function cacheUsage(): Promise<{ files: number; bytes: number }> {
  const store = await open();
  const all = await store.getAll('files');
  return { files: all.length, bytes: all.reduce((a, e) => a + e.size, 0) };
}

export async function clearCache(): Promise<void> {
  await (await open()).clear('files');
}
