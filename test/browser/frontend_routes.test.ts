/**
 * server/apps/frontend.ts through app.request(): the built app under a base
 * path (redirect, index with API-base metas, immutable hashed assets, SPA
 * fallback that leaves API 404s alone), the read-only bundled-models route
 * with its traversal refusals and ETags, same-host CORS, and the page shown
 * when web/dist was never built.
 */
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frontendOptions, frontendRoutes, normalizeBasePath } from '../../server/apps/frontend.ts';
import { DEFAULTS } from '../../server/config.ts';

let dir: string;
let app: Hono;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'weft-fe-'));
  await mkdir(join(dir, 'dist/assets'), { recursive: true });
  await writeFile(join(dir, 'dist/index.html'), '<!doctype html><html><head><script type="module" src="./assets/index-abc12345.js"></script></head><body></body></html>');
  await writeFile(join(dir, 'dist/assets/index-abc12345.js'), 'console.log(1)');
  await writeFile(join(dir, 'dist/assets/index-abc12345.css'), 'body{}');
  await mkdir(join(dir, 'models/tiny'), { recursive: true });
  await writeFile(join(dir, 'models/tiny/config.json'), '{"hidden_size":8}');
  await writeFile(join(dir, 'models/tiny/notes.md'), 'not served');
  await writeFile(join(dir, 'secret.json'), '{"secret":true}');
  await symlink(join(dir, 'secret.json'), join(dir, 'models/tiny/escape.json'));
  app = new Hono();
  frontendRoutes(app, { basePath: '/ui', distDir: join(dir, 'dist'), modelsDir: join(dir, 'models'), managementBase: ':3001' });
  app.get('/status', (c) => c.json({ ok: true }));
  app.notFound((c) => c.json({ error: { code: 'route_not_found' } }, 404));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const get = (path: string, headers: Record<string, string> = {}): Promise<Response> => Promise.resolve(app.request(`http://127.0.0.1:3000${path}`, { headers }));

describe('frontendRoutes', () => {
  it('normalizes base paths', () => {
    expect(['', '/', 'ui', '/ui', '/ui/', '//a/b//'].map(normalizeBasePath)).toEqual(['/', '/', '/ui/', '/ui/', '/ui/', '/a/b/']);
  });

  it('redirects the bare base path and serves index.html with the API bases written in', async () => {
    const r = await get('/ui');
    expect(r.status).toBe(301);
    expect(r.headers.get('location')).toBe('ui/');
    const idx = await get('/ui/');
    expect(idx.headers.get('content-type')).toMatch(/^text\/html/);
    expect(idx.headers.get('cache-control')).toBe('no-cache');
    expect(idx.headers.get('content-security-policy')).toContain("default-src 'self'");
    const html = await idx.text();
    expect(html).toContain('<meta name="weft-inference-base" content="../">');
    expect(html).toContain('<meta name="weft-management-base" content=":3001">');
    expect(await (await get('/ui/index.html')).text()).toBe(html);
  });

  it('serves hashed assets as immutable with their content types', async () => {
    const js = await get('/ui/assets/index-abc12345.js');
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(await js.text()).toBe('console.log(1)');
    expect((await get('/ui/assets/index-abc12345.css')).headers.get('content-type')).toMatch(/^text\/css/);
    const etag = js.headers.get('etag')!;
    expect((await get('/ui/assets/index-abc12345.js', { 'if-none-match': etag })).status).toBe(304);
  });

  it('falls back to index.html for page navigations only; API routes and their 404s are untouched', async () => {
    const nav = await get('/ui/some/deep/link', { accept: 'text/html,application/xhtml+xml' });
    expect(nav.status).toBe(200);
    expect(await nav.text()).toContain('weft-inference-base');
    expect((await get('/ui/some/deep/link', { accept: 'application/json' })).status).toBe(404);
    expect((await get('/ui/assets/missing.js', { accept: 'text/html' })).status).toBe(404);
    expect(await (await get('/status')).json()).toEqual({ ok: true });
    expect((await get('/nope')).status).toBe(404);
  });

  it('lists and serves bundled model files read-only, refusing escapes and other files', async () => {
    expect(await (await get('/ui/models/')).json()).toEqual({ models: [{ name: 'tiny', files: [{ path: 'config.json', size: 17 }] }] });
    expect(await (await get('/ui/models/tiny/')).json()).toEqual({ name: 'tiny', files: [{ path: 'config.json', size: 17 }] });
    const cfg = await get('/ui/models/tiny/config.json');
    expect(cfg.headers.get('content-type')).toBe('application/json');
    expect(cfg.headers.get('etag')).toMatch(/^W\/"/);
    expect(await cfg.text()).toBe('{"hidden_size":8}');
    const head = await app.request('http://127.0.0.1:3000/ui/models/tiny/config.json', { method: 'HEAD' });
    expect(head.headers.get('content-length')).toBe('17');
    for (const bad of ['/ui/models/tiny/notes.md', '/ui/models/tiny/escape.json', '/ui/models/..%2fsecret.json', '/ui/models/tiny/..%2f..%2fsecret.json', '/ui/models/%2e%2e/secret.json', '/ui/models/tiny/.hidden.json', '/ui/models/nope/']) {
      expect([400, 404], bad).toContain((await get(bad)).status);
    }
  });

  it('answers CORS for the same host name at another port only', async () => {
    const pre = await app.request('http://127.0.0.1:3001/status', { method: 'OPTIONS', headers: { origin: 'http://127.0.0.1:3000', 'access-control-request-method': 'PUT', 'access-control-request-headers': 'authorization,content-type' } });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('http://127.0.0.1:3000');
    expect(pre.headers.get('access-control-allow-headers')).toContain('authorization');
    const ok = await app.request('http://127.0.0.1:3001/status', { headers: { origin: 'http://127.0.0.1:3000' } });
    expect(ok.headers.get('access-control-allow-origin')).toBe('http://127.0.0.1:3000');
    expect(ok.headers.get('access-control-expose-headers')).toContain('x-request-id');
    const other = await app.request('http://127.0.0.1:3001/status', { headers: { origin: 'http://evil.example:3000' } });
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('explains a missing build, and derives options from the service config', async () => {
    const bare = new Hono();
    frontendRoutes(bare, { basePath: '/', distDir: join(dir, 'nowhere'), modelsDir: null });
    const r = await bare.request('http://x/');
    expect(r.status).toBe(503);
    expect(await r.text()).toContain('npm run build:web');
    expect((await bare.request('http://x/models/')).status).toBe(404);
    expect(frontendOptions({ ...DEFAULTS }, 'inference', '/d')).toEqual({ basePath: '/', distDir: '/d', managementBase: ':3001' });
    expect(frontendOptions({ ...DEFAULTS }, 'management', '/d')).toEqual({ basePath: '/', distDir: '/d', inferenceBase: ':3000' });
  });
});
