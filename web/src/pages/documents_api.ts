/**
 * The document routes as the Documents page calls them (docs/documents.md):
 * shapes of the answers, the caller identity header, base64 encoding of
 * uploads, and the list of documents this browser tracks (there is no
 * "list documents" route, so the page remembers the ids it uploaded or was
 * given, per inference API base, in localStorage).
 */
import { apiFetch, apiUrl, getJson } from '../api.ts';

export type DocState = 'queued' | 'reading' | 'chunking' | 'embedding' | 'ready' | 'failed';
export const FINAL_STATES: readonly string[] = ['ready', 'failed'];
/** The pipeline steps in order, for the "step n of 5" readout. */
export const STEPS: readonly DocState[] = ['queued', 'reading', 'chunking', 'embedding', 'ready'];

/** GET /api/v1/document/{id}. Timestamps are ISO strings; counts fill in as steps finish. */
export interface DocRecord {
  doc_id: string;
  name: string;
  category: string;
  owners: string[];
  state: DocState;
  error: { code: string; message: string } | null;
  format: string;
  source: 'bytes' | 'path';
  path: string;
  sha256: string;
  size_bytes: number;
  options: { reader: string; chunker: string; chunk_units: number; chunk_overlap: number; embedder: string };
  counts: { chunks: number; tokens: number; characters: number; pages: number | null };
  attempts: number;
  created_at: string;
  updated_at: string;
  started_at: string | null;
  finished_at: string | null;
}

/** One entry of a POST /api/v1/documents answer (`bytes` is never echoed). */
export interface ReportedEntry {
  index: number;
  name: unknown;
  doc_id: string | null;
  category?: unknown;
  owners?: unknown;
  sha256?: string;
  format?: string;
  reason?: string;
  message?: string;
  duplicate_of?: string;
}

export interface LoadAnswer {
  accepted: ReportedEntry[];
  duplicate: ReportedEntry[];
  invalid: ReportedEntry[];
}

export interface SearchHit {
  score: number;
  chunk: { index: number; text: string; tokens: number; heading: string | null; page: number | null };
  document: { doc_id: string; name: string; category: string; owners: string[] };
}

export interface DocsStatus {
  started: boolean;
  embedder?: string;
  dims?: number;
  states?: Partial<Record<DocState, number>>;
  active?: number;
}

const IDENTITY = 'weft.documents.owner';
const TRACKED = 'weft.documents.tracked';

/** The `x-weft-owner` identity the page acts as ('' = none). */
export const identity = (): string => localStorage.getItem(IDENTITY) ?? '';
export const setIdentity = (v: string): void => (v.trim() ? localStorage.setItem(IDENTITY, v.trim()) : localStorage.removeItem(IDENTITY));

function headers(): Record<string, string> {
  const who = identity();
  return who ? { 'x-weft-owner': who } : {};
}

export const getDocument = (id: string, signal?: AbortSignal): Promise<DocRecord> =>
  getJson<DocRecord>('inference', `api/v1/document/${encodeURIComponent(id)}`, { headers: headers(), ...(signal ? { signal } : {}) });

export const deleteDocument = async (id: string): Promise<void> => {
  await apiFetch('inference', `api/v1/document/${encodeURIComponent(id)}`, { method: 'DELETE', headers: headers() });
};

export const loadDocuments = (body: Record<string, unknown>): Promise<LoadAnswer> =>
  getJson<LoadAnswer>('inference', 'api/v1/documents', { method: 'POST', body: JSON.stringify(body), headers: headers() });

export const searchDocuments = (body: { query: string; top_k: number; category?: string[] }): Promise<{ results: SearchHit[] }> =>
  getJson<{ results: SearchHit[] }>('inference', 'api/v1/documents/search', { method: 'POST', body: JSON.stringify(body), headers: headers() });

export const documentsStatus = (): Promise<DocsStatus> => getJson<DocsStatus>('inference', 'api/v1/documents/status', { headers: headers() });

/** Standard base64 of `bytes` (btoa over 32 KiB slices: no call-stack limit, no data-URL prefix to strip). */
export function toBase64(bytes: Uint8Array): string {
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}

/** "a, b ,c" -> ['a','b','c'] (empty items dropped). */
export const splitList = (s: string): string[] =>
  s
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);

/** Tracked ids are kept per inference API, so pointing Settings at another server shows its own list. */
function trackedAll(): Record<string, string[]> {
  try {
    const v = JSON.parse(localStorage.getItem(TRACKED) ?? '{}') as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, string[]>) : {};
  } catch {
    return {};
  }
}

export function trackedIds(): string[] {
  const ids = trackedAll()[apiUrl('inference', '')];
  return Array.isArray(ids) ? ids.filter((x) => typeof x === 'string') : [];
}

export function saveTrackedIds(ids: readonly string[]): void {
  const all = trackedAll();
  all[apiUrl('inference', '')] = [...ids];
  localStorage.setItem(TRACKED, JSON.stringify(all));
}
