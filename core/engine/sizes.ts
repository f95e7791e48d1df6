/**
 * Human sizes in configuration: "1GB", "30KB", "512MiB", plain byte counts,
 * and "X%" for the page cache (a share of the GPU memory budget).
 * Units are decimal for KB/MB/GB and binary for KiB/MiB/GiB, as written.
 */
import { InvalidRequestError } from '../errors.ts';

const UNITS: Record<string, number> = { b: 1, kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30, tib: 2 ** 40, k: 1e3, m: 1e6, g: 1e9 };

export function parseBytes(v: string | number, field: string): number {
  if (typeof v === 'number' && Number.isFinite(v) && v >= 0) return Math.floor(v);
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(String(v));
  const unit = m ? UNITS[(m[2] || 'b').toLowerCase()] : undefined;
  if (!m || unit === undefined) throw new InvalidRequestError('invalid_size', `${field}: "${v}" is not a size (e.g. 30KB, 1GB, 512MiB)`, { field });
  return Math.floor(Number(m[1]) * unit);
}

/** Page cache size: bytes, or `X%` of `budget` bytes. */
export function parsePageCacheSize(v: string | number, budget: number): number {
  const s = String(v).trim();
  if (s.endsWith('%')) {
    const pct = Number(s.slice(0, -1));
    if (!Number.isFinite(pct) || pct <= 0 || pct > 100) throw new InvalidRequestError('invalid_size', `page_cache_size: "${v}" must be a percentage in (0, 100]`, { field: 'page_cache_size' });
    return Math.floor((budget * pct) / 100);
  }
  return parseBytes(v, 'page_cache_size');
}
