/**
 * Where the two APIs are and how to call them. Every URL is relative: the
 * defaults come from `<meta name="weft-inference-base">` /
 * `<meta name="weft-management-base">`, which the server writes into
 * index.html (server/apps/frontend.ts), else the page's own directory. A
 * value `:PORT` means "this page's host on another port" (the management API
 * listens on 3001 by default). The Settings dialog overrides both, plus
 * bearer keys, in localStorage.
 */

export type ApiName = 'inference' | 'management';

export interface Settings {
  inference: string;
  management: string;
  apiKey: string;
  managementKey: string;
}

const STORE = 'weft.settings';

function meta(name: string): string | null {
  return document.querySelector<HTMLMetaElement>(`meta[name="${name}"]`)?.content ?? null;
}

export function defaults(): Settings {
  return { inference: meta('weft-inference-base') ?? './', management: meta('weft-management-base') ?? './', apiKey: '', managementKey: '' };
}

/** Only what the user saved (empty fields mean: the server's default). */
export function savedSettings(): Partial<Settings> {
  try {
    return JSON.parse(localStorage.getItem(STORE) ?? '{}') as Partial<Settings>;
  } catch {
    return {};
  }
}

export function loadSettings(): Settings {
  try {
    const saved = savedSettings();
    const d = defaults();
    return { inference: saved.inference || d.inference, management: saved.management || d.management, apiKey: saved.apiKey ?? '', managementKey: saved.managementKey ?? '' };
  } catch {
    return defaults();
  }
}

export function saveSettings(s: Partial<Settings>): void {
  const cur = loadSettings();
  localStorage.setItem(STORE, JSON.stringify({ ...cur, ...s }));
}

export function resetSettings(): void {
  localStorage.removeItem(STORE);
}

/** A base spec ('../', ':3001', 'https://x/weft/') as an absolute URL ending in '/'. */
export function resolveBase(spec: string, page: string = document.baseURI): string {
  const s = spec.trim() || './';
  const port = /^:(\d+)\/?(.*)$/.exec(s);
  const url = port ? new URL(`${new URL(page).protocol}//${new URL(page).hostname}:${port[1]}/${port[2] ?? ''}`) : new URL(s, page);
  if (!url.pathname.endsWith('/')) url.pathname += '/';
  url.search = '';
  url.hash = '';
  return url.href;
}

/** The absolute URL of `path` (relative, no leading slash) on API `which`. */
export function apiUrl(which: ApiName, path: string): string {
  const s = loadSettings();
  return new URL(path.replace(/^\/+/, ''), resolveBase(which === 'inference' ? s.inference : s.management)).href;
}

/** An error body from the API (`{error:{code,message}}`) or a transport failure. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    /** The error body's `details` (e.g. `{field}`, `{min, max}`, `{valid}`), when it has one. */
    readonly details?: unknown,
  ) {
    super(message);
  }
}

export async function apiFetch(which: ApiName, path: string, init: RequestInit = {}): Promise<Response> {
  const s = loadSettings();
  const key = which === 'inference' ? s.apiKey : s.managementKey || s.apiKey;
  const headers = new Headers(init.headers);
  if (key && !headers.has('authorization')) headers.set('authorization', `Bearer ${key}`);
  if (typeof init.body === 'string' && !headers.has('content-type')) headers.set('content-type', 'application/json');
  const url = apiUrl(which, path);
  let res: Response;
  try {
    res = await fetch(url, { ...init, headers });
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    throw new ApiError(`cannot reach the ${which} API at ${url} (${(e as Error).message}); check Settings`, 0, 'unreachable');
  }
  if (!res.ok) throw await errorOf(res);
  return res;
}

export async function errorOf(res: Response): Promise<ApiError> {
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { error?: { code?: string; message?: string; details?: unknown } | string };
    const e = body.error;
    if (typeof e === 'object' && e) return new ApiError(e.message ?? text, res.status, e.code ?? String(res.status), e.details);
    if (typeof e === 'string') return new ApiError(e, res.status, String(res.status));
  } catch {
    // not JSON
  }
  return new ApiError(`${res.status} ${res.statusText}${text ? `: ${text.slice(0, 200)}` : ''}`, res.status, String(res.status));
}

export async function getJson<T>(which: ApiName, path: string, init?: RequestInit): Promise<T> {
  return (await (await apiFetch(which, path, init)).json()) as T;
}

/** Reader summary as GET /reader_groups and GET /status return it. */
export interface ReaderSummary {
  reader_id: string;
  consumer_group: string;
  model: string;
  type: string;
  device: string | null;
  backend: string | null;
  ready: boolean;
  state: string;
  error?: { code: string; message: string } | null;
  in_flight?: number;
  stats?: { running: number; waiting: number; kvBlocksTotal: number; kvBlocksFree: number } | null;
  /** A model given as a Hub id: bytes fetched (all files together), their total, the file in progress; null for a local model. */
  download?: { loaded: number; total: number; file: string } | null;
}

export interface Status {
  version: string;
  requests_in_flight: number;
  groups: Record<string, ReaderSummary[]>;
}
