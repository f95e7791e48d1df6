/**
 * Test helpers for document loading:
 *  - `hashEmbedder`: a deterministic bag-of-words embedder (feature hashing,
 *    unit vectors) with a one-token-per-word tokenizer — no GPU, instant, and
 *    chunks sharing words with a query score higher, so ranking tests are
 *    meaningful without a trained model;
 *  - `gated`: wraps an embedder so embedding blocks until released (to stop
 *    a worker mid-job);
 *  - `pgliteTemplate`: a dumped PGlite data directory with pgvector created,
 *    cached in the OS temp dir across test processes, so each store skips
 *    initdb (tens of seconds on a loaded machine);
 *  - `documentsApp`: a Service without readers plus a Hono app carrying only
 *    the document routes (as buildApps would mount them).
 */
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Hono } from 'hono';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { encodeBase64 } from '../../core/documents/base64.ts';
import { normalize, type Embedder } from '../../core/documents/embedder.ts';
import { mountDocuments, type MountOptions } from '../../server/apps/documents.ts';
import type { DocumentService } from '../../server/documents/service.ts';
import { loadConfig } from '../../server/config.ts';
import { NotFoundError } from '../../core/errors.ts';
import { bearerAuth } from '../../server/http/auth.ts';
import { errorBody, onError } from '../../server/http/errors.ts';
import { Service } from '../../server/service.ts';

const WORDS = /[\p{L}\p{N}]+|[^\s\p{L}\p{N}]/gu;

function hash(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return h >>> 0;
}

/** One token per word or punctuation mark; vectors are hashed word counts. */
export function hashEmbedder(opts: { dims?: number; id?: string; delayMs?: number; maxTokens?: number } = {}): Embedder & { calls: number } {
  const dims = opts.dims ?? 256;
  const e = {
    id: opts.id ?? 'hash-test',
    dims,
    maxTokens: opts.maxTokens ?? 512,
    calls: 0,
    tokenizer: { count: (t: string) => (t.match(WORDS) ?? []).length },
    async embed(texts: string[]) {
      e.calls++;
      if (opts.delayMs) await new Promise((r) => setTimeout(r, opts.delayMs));
      return texts.map((t) => {
        const v = new Float32Array(dims);
        for (const w of t.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) v[hash(w) % dims]! += 1;
        v[0]! += 1e-3; // never a zero vector
        return normalize(v);
      });
    },
    async close() {},
  };
  return e;
}

/** `inner`, except that embed() waits until `release()`; `entered` resolves at the first blocked call. */
export function gated(inner: Embedder): { embedder: Embedder; entered: Promise<void>; release(): void } {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  let enter!: () => void;
  const entered = new Promise<void>((r) => (enter = r));
  const embedder: Embedder = {
    id: inner.id,
    dims: inner.dims,
    maxTokens: inner.maxTokens,
    tokenizer: inner.tokenizer,
    async embed(texts, o) {
      enter();
      await Promise.race([gate, new Promise((_, reject) => o?.signal?.addEventListener('abort', () => reject(o.signal!.reason), { once: true }))]);
      return inner.embed(texts, o);
    },
    close: () => inner.close(),
  };
  return { embedder, entered, release: () => open() };
}

/** Where the template tarball is cached (child processes read it from here). */
export const TEMPLATE = join(tmpdir(), 'weft-test-pglite-0.5.14-pgvector.tar');

/** The cached template tarball (created once, atomically, by whichever test process gets there first). */
export async function pgliteTemplate(): Promise<Blob> {
  if (!existsSync(TEMPLATE)) {
    const pg = await PGlite.create('memory://', { extensions: { vector } });
    await pg.exec('CREATE EXTENSION IF NOT EXISTS vector');
    const dump = await pg.dumpDataDir('none');
    await pg.close();
    const tmp = `${TEMPLATE}.${process.pid}.tmp`;
    writeFileSync(tmp, new Uint8Array(await dump.arrayBuffer()));
    renameSync(tmp, TEMPLATE);
  }
  return new Blob([readFileSync(TEMPLATE)]);
}

export interface DocumentsApp {
  app: Hono;
  docs: DocumentService;
  svc: Service;
  close(): Promise<void>;
}

/**
 * A service without readers and an app with the document routes (auth on when `apiKeys` is given;
 * attached to the broker at `natsUrl` as `weft serve` with a `nats:` section is, when given).
 */
export async function documentsApp(opts: MountOptions & { apiKeys?: string[]; apiKeyOwners?: Record<string, string[]>; natsUrl?: string } = {}): Promise<DocumentsApp> {
  const { apiKeys = [], apiKeyOwners = {}, natsUrl, ...mount } = opts;
  const svc = new Service(loadConfig({ env: {}, overrides: { model: '', embeddingModel: '', logDisableTimestamps: true, apiKeys, apiKeyOwners, ...(natsUrl ? { nats: { url: natsUrl } } : {}) } }));
  if (natsUrl) await svc.attachNats();
  const inner = new Hono();
  const docs = mountDocuments(inner, svc, undefined, { env: {}, pgliteTemplate: await pgliteTemplate(), ...mount, config: { dataDir: 'memory://', ...mount.config } });
  const app = new Hono();
  app.onError(onError(svc.log));
  app.notFound((c) => c.json(errorBody(new NotFoundError('route_not_found', `no route ${c.req.method} ${c.req.path}`)), 404));
  app.use('*', bearerAuth(apiKeys, apiKeyOwners));
  app.route('/', inner);
  return { app, docs, svc, close: () => svc.close() };
}

export const b64 = (s: string | Uint8Array): string => encodeBase64(typeof s === 'string' ? new TextEncoder().encode(s) : s);

export function json(body: unknown, headers: Record<string, string> = {}): RequestInit {
  return { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) };
}

/** Polls GET /api/v1/document/{id} until its state is terminal. */
export async function waitReady(app: Hono, id: string, timeoutMs = 60_000, headers: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const r = (await (await app.request(`/api/v1/document/${id}`, { headers })).json()) as Record<string, unknown>;
    if (r.state === 'ready' || r.state === 'failed' || Date.now() > end) return r;
    await new Promise((res) => setTimeout(res, 50));
  }
}
