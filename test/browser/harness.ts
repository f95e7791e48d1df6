/**
 * Browser test harness: Debian chromium driven by playwright-core, a static
 * HTTP server on 127.0.0.1 and an in-memory esbuild bundler.
 *
 * WebGPU needs a secure context, which http://127.0.0.1 is and about:blank is
 * not, so pages are served over real loopback HTTP. Chromium is the system
 * one (apt `chromium`, override with WEFT_CHROMIUM); playwright never
 * downloads a browser. `--enable-unsafe-webgpu` turns WebGPU on (SwiftShader
 * on CPU-only hosts); never pass `--disable-gpu`, which removes it.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { extname, join, resolve, sep } from 'node:path';
import { build, type BuildOptions } from 'esbuild';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = process.env.WEFT_CHROMIUM ?? '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--enable-unsafe-webgpu',
  '--no-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
];

export interface Browser {
  context: BrowserContext;
  page: Page;
  /** Console lines and page errors so far, for failure messages. */
  log: string[];
  close(): Promise<void>;
}

/** Launches headless chromium with a fresh profile; fails clearly if it is missing. */
export async function launch(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`chromium not found at ${CHROMIUM}: install Debian's chromium (apt-get install chromium; .ci/run does) or set WEFT_CHROMIUM`);
  }
  const profile = await mkdtemp(join(tmpdir(), 'weft-chromium-'));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  } catch (e) {
    await rm(profile, { recursive: true, force: true });
    throw e;
  }
  const page = context.pages()[0] ?? (await context.newPage());
  const log: string[] = [];
  page.on('console', (m) => log.push(`[${m.type()}] ${m.text()}`));
  page.on('pageerror', (e) => log.push(`[pageerror] ${e.message}`));
  return {
    context,
    page,
    log,
    async close() {
      await context.close().catch(() => {});
      await rm(profile, { recursive: true, force: true });
    },
  };
}

export type Files = Record<string, string | Uint8Array>;

export interface StaticServer {
  /** e.g. http://127.0.0.1:41234 */
  origin: string;
  /** origin + prefix, with a trailing slash. */
  url: string;
  close(): Promise<void>;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.map': 'application/json',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.css': 'text/css',
  '.txt': 'text/plain; charset=utf-8',
};

/**
 * Serves `files` (in memory, keyed by relative path) and/or the directory
 * `root` under `prefix` (default "/") on 127.0.0.1, ephemeral port.
 * In-memory files win; `dir/` serves `dir/index.html`; nothing escapes `root`.
 */
export async function serve(opts: { files?: Files; root?: string; prefix?: string }): Promise<StaticServer> {
  const trimmed = (opts.prefix ?? '').replace(/^\/+|\/+$/g, '');
  const prefix = trimmed ? `/${trimmed}/` : '/';
  const root = opts.root ? resolve(opts.root) : undefined;
  const server: Server = createServer((req, res) => {
    void (async () => {
      const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
      if (path === '/favicon.ico') return void res.writeHead(204).end(); // keeps the console clean
      if (!path.startsWith(prefix)) return void res.writeHead(404).end('not found');
      let rel = path.slice(prefix.length);
      if (rel === '' || rel.endsWith('/')) rel += 'index.html';
      let body: string | Uint8Array | undefined = opts.files?.[rel];
      if (body === undefined && root) {
        const file = resolve(root, rel);
        if ((file === root || file.startsWith(root + sep)) && (await stat(file).catch(() => null))?.isFile()) body = await readFile(file);
      }
      if (body === undefined) return void res.writeHead(404).end('not found');
      res.writeHead(200, { 'content-type': TYPES[extname(rel)] ?? 'application/octet-stream', 'cache-control': 'no-store' });
      res.end(body);
    })().catch((e: unknown) => res.writeHead(500).end(String(e)));
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    url: origin + prefix,
    close: () => new Promise<void>((ok) => server.close(() => ok())),
  };
}

/** Bundles TypeScript entry points for the browser into memory: { "name.js": code, ... }. */
export async function bundle(entryPoints: Record<string, string>, extra: BuildOptions = {}): Promise<Files> {
  const out = await build({
    entryPoints,
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    outdir: '/bundle',
    sourcemap: 'inline',
    logLevel: 'silent',
    ...extra,
  });
  const files: Files = {};
  for (const f of out.outputFiles ?? []) files[f.path.slice('/bundle/'.length)] = f.contents;
  return files;
}

/** An empty page: a secure-context origin to `import()` bundles from. */
export const BLANK_HTML = '<!doctype html><meta charset="utf-8"><title>weft test</title>';

/**
 * In `page`, imports the module at `moduleUrl` and awaits `exportName(arg)`.
 * Built as a string so no test-runner transform touches the `import()`.
 */
export function callExport<T>(page: Page, moduleUrl: string, exportName: string, arg: unknown): Promise<T> {
  return page.evaluate(`import(${JSON.stringify(moduleUrl)}).then((m) => m[${JSON.stringify(exportName)}](${JSON.stringify(arg)}))`) as Promise<T>;
}
