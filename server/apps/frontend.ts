/**
 * Serves the built web app (web/dist, `npm run build:web`) under a base path
 * on an HTTP app, ahead of its auth: the page itself holds no secret (API
 * keys are typed into it), and a browser cannot send a bearer token when it
 * navigates. What `frontendRoutes` adds to an app:
 *
 * - `<base>` and its files: index.html with `no-cache` (plus the two API
 *   base URLs written in as <meta> tags), `assets/*` (content-hashed names)
 *   as `immutable`; `<base>` without its slash redirects to it; a GET for
 *   HTML that no other route answers gets index.html (SPA fallback).
 * - `<base>models/`: the bundled models directory, read-only, for browser
 *   mode — `models/` and `models/<name>/` list files as JSON,
 *   `models/<name>/<file>` serves one with an ETag. Only `.json`,
 *   `.safetensors` and `.gguf` files; `..`, hidden names and symlinks that
 *   leave the directory are refused.
 * - CORS for pages on the same host name at another port (the app served
 *   by the other API port, a Vite dev server), so one page can reach both
 *   the inference (3000) and the management (3001) API.
 *
 * Register it on a root app before that app's auth middleware.
 */
import { createReadStream, existsSync } from 'node:fs';
import { readdir, readFile, realpath, stat } from 'node:fs/promises';
import { dirname, extname, join, resolve, sep } from 'node:path';
import { Readable } from 'node:stream';
import type { Context, Hono } from 'hono';
import { cors } from 'hono/cors';
import type { ServiceConfig } from '../config.ts';
import { DEFAULT_MODEL_DIR, WEB_DIST_DIR } from '../paths.ts';

export { WEB_DIST_DIR };
/** The bundled models (models/stories260K ...), the only directory browser mode may download from. */
export const BUNDLED_MODELS_DIR = dirname(DEFAULT_MODEL_DIR);

export interface FrontendOptions {
  /** URL path the app lives under, e.g. '/' or '/ui/'. */
  basePath: string;
  /** The built app (web/dist). */
  distDir: string;
  /**
   * API base URLs the page starts with (users can change them in its
   * Settings): relative to the page, absolute, or ':PORT' for this host on
   * another port. Default: this app's own root.
   */
  inferenceBase?: string;
  managementBase?: string;
  /** Model folders served under `<base>models/`; null = none. Default: the bundled models. */
  modelsDir?: string | null;
  /** Answer CORS requests from this host name at other ports (default true). */
  sameHostCors?: boolean;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.webp': 'image/webp',
  '.woff2': 'font/woff2',
  '.wasm': 'application/wasm',
  '.txt': 'text/plain; charset=utf-8',
  '.safetensors': 'application/octet-stream',
  '.gguf': 'application/octet-stream',
};

const MODEL_FILE = /\.(json|safetensors|gguf)$/i;
const IMMUTABLE = 'public, max-age=31536000, immutable';
const CSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self' http: https:; worker-src 'self'; frame-ancestors 'self'";

/** '/ui' -> '/ui/', '' -> '/'. */
export function normalizeBasePath(p: string): string {
  const t = p.trim().replace(/^\/+|\/+$/g, '');
  return t ? `/${t}/` : '/';
}

/** Path segments of `rel`, decoded; null when any is empty, '.', '..', hidden or holds a separator. */
function safeSegments(rel: string): string[] | null {
  const out: string[] = [];
  for (const raw of rel.split('/')) {
    let seg: string;
    try {
      seg = decodeURIComponent(raw);
    } catch {
      return null;
    }
    if (!seg || seg.startsWith('.') || /[\\/\0]/.test(seg)) return null;
    out.push(seg);
  }
  return out;
}

/** `root/segs...` if it is a regular file whose real path stays inside `root`. */
async function fileInside(root: string, segs: string[]): Promise<{ path: string; size: number; mtimeMs: number } | null> {
  const path = resolve(root, ...segs);
  if (!path.startsWith(resolve(root) + sep)) return null;
  const st = await stat(path).catch(() => null);
  if (!st?.isFile()) return null;
  const real = await realpath(path).catch(() => null);
  const realRoot = await realpath(root).catch(() => null);
  if (!real || !realRoot || !real.startsWith(realRoot + sep)) return null;
  return { path, size: st.size, mtimeMs: st.mtimeMs };
}

function sendFile(c: Context, f: { path: string; size: number; mtimeMs: number }, cache: string, extra: Record<string, string> = {}): Response {
  const etag = `W/"${f.size.toString(16)}-${Math.floor(f.mtimeMs).toString(16)}"`;
  const headers: Record<string, string> = {
    'content-type': TYPES[extname(f.path).toLowerCase()] ?? 'application/octet-stream',
    'cache-control': cache,
    etag,
    'x-content-type-options': 'nosniff',
    ...extra,
  };
  if (c.req.header('if-none-match') === etag) return new Response(null, { status: 304, headers });
  headers['content-length'] = String(f.size);
  if (c.req.method === 'HEAD') return new Response(null, { status: 200, headers });
  return new Response(Readable.toWeb(createReadStream(f.path)) as ReadableStream, { status: 200, headers });
}

/** Model folders and their servable files. */
async function listModels(dir: string, only?: string): Promise<{ name: string; files: { path: string; size: number }[] }[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  const out: { name: string; files: { path: string; size: number }[] }[] = [];
  for (const e of entries) {
    if (!e.isDirectory() || e.name.startsWith('.') || (only !== undefined && e.name !== only)) continue;
    const files: { path: string; size: number }[] = [];
    for (const f of await readdir(join(dir, e.name)).catch(() => [])) {
      if (!MODEL_FILE.test(f)) continue;
      const hit = await fileInside(dir, [e.name, f]);
      if (hit) files.push({ path: f, size: hit.size });
    }
    out.push({ name: e.name, files: files.sort((a, b) => a.path.localeCompare(b.path)) });
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

const escapeAttr = (s: string): string => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');

const NOT_BUILT = (base: string): string =>
  `<!doctype html><meta charset="utf-8"><title>Weft</title><body style="font-family:system-ui;padding:2em">` +
  `<h1>The Weft web app is not built</h1><p>Run <code>npm run build:web</code> and reload. The APIs work without it; see <a href="${escapeAttr(base)}docs">/docs</a>.</p>`;

export function frontendRoutes(app: Hono, opts: FrontendOptions): void {
  const base = normalizeBasePath(opts.basePath);
  const dist = resolve(opts.distDir);
  const models = opts.modelsDir === undefined ? BUNDLED_MODELS_DIR : opts.modelsDir;
  // From the page's directory (the base path) back up to this app's root.
  const root = '../'.repeat(base.split('/').filter(Boolean).length) || './';
  const metas =
    `<meta name="weft-inference-base" content="${escapeAttr(opts.inferenceBase ?? root)}">` +
    `<meta name="weft-management-base" content="${escapeAttr(opts.managementBase ?? root)}">`;

  const index = async (c: Context): Promise<Response> => {
    const headers = { 'cache-control': 'no-cache', 'content-security-policy': CSP, 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer' };
    const html = await readFile(join(dist, 'index.html'), 'utf8').catch(() => null);
    if (html === null) return c.html(NOT_BUILT(root), 503, headers);
    return c.html(html.replace(/<head>/i, (m) => `${m}\n    ${metas}`), 200, headers);
  };

  if (opts.sameHostCors !== false) {
    app.use(
      '*',
      cors({
        origin: (origin, c) => {
          try {
            return origin && new URL(origin).hostname === new URL(c.req.url).hostname ? origin : null;
          } catch {
            return null;
          }
        },
        allowHeaders: ['authorization', 'content-type', 'x-weft-owner'], // x-weft-owner: the documents page's caller identity
        exposeHeaders: ['x-request-id'],
        maxAge: 600,
      }),
    );
  }

  if (base !== '/') app.get(base.slice(0, -1), (c) => c.redirect(`${base.split('/').filter(Boolean).pop()}/`, 301));

  app.use(`${base}*`, async (c, next) => {
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD') return next();
    const path = new URL(c.req.url).pathname;
    const rel = path.slice(base.length);
    if (rel === '' || rel === 'index.html') return index(c);

    if (models && (rel === 'models/' || rel.startsWith('models/'))) {
      const segs = rel === 'models/' ? [] : safeSegments(rel.slice('models/'.length).replace(/\/$/, ''));
      if (!segs) return c.json({ error: { code: 'invalid_path', message: 'invalid model file path' } }, 400);
      if (segs.length === 0) return c.json({ models: await listModels(models) }, 200, { 'cache-control': 'no-cache' });
      if (segs.length === 1 && rel.endsWith('/')) {
        const [m] = await listModels(models, segs[0]);
        return m ? c.json(m, 200, { 'cache-control': 'no-cache' }) : c.json({ error: { code: 'model_not_found', message: `no bundled model ${segs[0]}` } }, 404);
      }
      const f = segs.length === 2 && MODEL_FILE.test(segs[1]!) ? await fileInside(models, segs) : null;
      if (!f) return c.json({ error: { code: 'not_found', message: `no model file ${rel.slice('models/'.length)}` } }, 404);
      return sendFile(c, f, 'no-cache');
    }

    const segs = safeSegments(rel);
    const f = segs ? await fileInside(dist, segs) : null;
    if (f) return extname(f.path) === '.html' ? index(c) : sendFile(c, f, rel.startsWith('assets/') ? IMMUTABLE : 'no-cache');

    await next();
    // SPA fallback: a page navigation that nothing else answered.
    if (c.res.status === 404 && c.req.method === 'GET' && !extname(rel) && (c.req.header('accept') ?? '').includes('text/html')) {
      c.res = undefined as unknown as Response; // drop the 404 (and its headers) before replacing it
      c.res = await index(c);
    }
  });
}

/**
 * The options `weft serve` mounts the app with: `config.frontendBasePath`,
 * the built web/dist, the bundled models, and the other API at this host's
 * other port. `role` is the app being mounted on.
 */
export function frontendOptions(config: ServiceConfig, role: 'inference' | 'management', distDir: string = WEB_DIST_DIR): FrontendOptions {
  const other = role === 'inference' ? config.managementPort : config.port;
  const sibling = other > 0 ? `:${other}` : undefined;
  return {
    basePath: config.frontendBasePath,
    distDir,
    ...(role === 'inference' && sibling ? { managementBase: sibling } : {}),
    ...(role === 'management' && sibling ? { inferenceBase: sibling } : {}),
  };
}

/** True when web/dist holds a build (for `weft serve` to log a hint when it does not). */
export const webAppBuilt = (distDir: string = WEB_DIST_DIR): boolean => existsSync(join(distDir, 'index.html'));
