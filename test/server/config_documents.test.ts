/**
 * The `documents:` section of config.yaml: accepted by the strict loader with
 * the keys of docs/documents.md, checked at load (an unknown key or a bad
 * value stops the server with an error naming `documents.<key>`), and
 * resolved with the environment over it (WEFT_DOCUMENTS_*, WEFT_DATA_DIR,
 * DATABASE_URL). End to end: a limit set only in the file is what the
 * document routes enforce.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Hono } from 'hono';
import { afterAll, describe, expect, it } from 'vitest';
import { WeftError } from '../../core/errors.ts';
import { mountDocuments, type MountOptions } from '../../server/apps/documents.ts';
import { loadConfig } from '../../server/config.ts';
import { loadDocumentsConfig } from '../../server/documents/config.ts';
import { onError } from '../../server/http/errors.ts';
import { Service } from '../../server/service.ts';
import { b64, hashEmbedder, json, pgliteTemplate } from '../documents/helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'weft-config-docs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const yaml = (text: string): string => {
  const f = join(dir, `config${n++}.yaml`);
  writeFileSync(f, text);
  return f;
};
const refusal = (text: string): WeftError => {
  try {
    loadConfig({ file: yaml(text), env: {} });
  } catch (e) {
    expect(e).toBeInstanceOf(WeftError);
    return e as WeftError;
  }
  throw new Error('expected the config to be refused');
};

const SECTION = `
port: 3100
documents:
  embedder: /models/e5
  data_dir: /var/weft
  database_url: postgres://weft:secret@db:5432/weft
  database_pool: 8
  import_roots: [/srv/a, /srv/b]
  workers: 3
  max_attempts: 5
  embed_batch: 16
  backend: swiftshader
  max_file_bytes: 1MB
  max_files_per_request: 10
  max_request_bytes: 4MiB
  chunk_units: 200
  chunk_overlap: 20
  min_chunk_units: 16
  categories: [kb, faq]
  max_wait_seconds: 30
`;

describe('config.yaml documents section', () => {
  it('is accepted with every documented key and resolved by the documents settings', () => {
    const cfg = loadConfig({ file: yaml(SECTION), env: {} });
    expect(cfg.port).toBe(3100);
    expect(cfg.documents).toMatchObject({ workers: 3, categories: ['kb', 'faq'] });
    const d = loadDocumentsConfig({ file: cfg.documents, env: {} });
    expect(d).toMatchObject({
      embedder: '/models/e5', dataDir: '/var/weft', databaseUrl: 'postgres://weft:secret@db:5432/weft', databasePool: 8,
      importRoots: ['/srv/a', '/srv/b'], workers: 3, maxAttempts: 5, embedBatch: 16, backend: 'swiftshader',
    });
    expect(d.limits).toEqual({ maxFileBytes: 1e6, maxFilesPerRequest: 10, maxRequestBytes: 4 * 2 ** 20, chunkUnits: 200, chunkOverlap: 20, minChunkUnits: 16, categories: ['kb', 'faq'], maxWaitMs: 30_000 });
    // An empty section is no section.
    expect(loadDocumentsConfig({ file: loadConfig({ file: yaml('documents:\n'), env: {} }).documents, env: {} }).workers).toBe(2);
  });

  it('the environment overrides the file, key by key', () => {
    const cfg = loadConfig({ file: yaml(SECTION), env: { WEFT_DOCUMENTS: 'ignored' } });
    const env = { WEFT_DOCUMENTS_WORKERS: '6', WEFT_DATA_DIR: '/tmp/d', DATABASE_URL: 'postgres://other/db', WEFT_DOCUMENTS_CATEGORIES: 'x, y', WEFT_DOCUMENTS_MAX_FILE_BYTES: '2MB' };
    const d = loadDocumentsConfig({ file: cfg.documents, env });
    expect(d).toMatchObject({ workers: 6, dataDir: '/tmp/d', databaseUrl: 'postgres://other/db', maxAttempts: 5, embedder: '/models/e5' });
    expect(d.limits).toMatchObject({ categories: ['x', 'y'], maxFileBytes: 2e6, maxFilesPerRequest: 10 });
    // The WEFT_DOCUMENTS_ names win over the generic ones.
    expect(loadDocumentsConfig({ env: { DATABASE_URL: 'postgres://a/x', WEFT_DOCUMENTS_DATABASE_URL: 'postgres://b/y' } }).databaseUrl).toBe('postgres://b/y');
  });

  it('refuses unknown keys, bad values and a bad section at load, naming the key', () => {
    const unknown = refusal('documents:\n  workers: 2\n  chunk_size: 100\n');
    expect(unknown.code).toBe('invalid_config');
    expect(unknown.message).toMatch(/unknown setting documents\.chunk_size/);
    expect(unknown.message).toMatch(/valid: .*chunk_units/);
    expect(unknown.details).toMatchObject({ key: 'documents.chunk_size' });
    expect(refusal('documents:\n  workers: many\n').message).toMatch(/documents\.workers: expected a non-negative integer/);
    expect(refusal('documents:\n  max_file_bytes: huge\n').message).toMatch(/max_file_bytes/);
    expect(refusal('documents:\n  import_roots: 5\n').message).toMatch(/documents\.import_roots: expected a list of strings/);
    expect(refusal('documents: [a, b]\n').message).toMatch(/config documents: expected a mapping/);
    expect(refusal('documents:\n  chunk_units: 40\n  chunk_overlap: 30\n').message).toMatch(/chunk_overlap must be at most half/);
    // The rest of the file stays strict.
    expect(refusal('document:\n  workers: 2\n').message).toMatch(/unknown setting "document"/);
  });

  it('the work-queue keys: queue, ack wait, reconciliation; workers 0 only with the nats queue', () => {
    const d = loadDocumentsConfig({ file: loadConfig({ file: yaml('documents:\n  queue: nats\n  workers: 0\n  queue_ack_wait_seconds: 5\n'), env: {} }).documents, env: { WEFT_DOCUMENTS_QUEUE_RECONCILE_SECONDS: '7' } });
    expect(d).toMatchObject({ queue: 'nats', workers: 0, queueAckWaitSeconds: 5, queueReconcileSeconds: 7 });
    expect(loadDocumentsConfig({ env: {} })).toMatchObject({ queue: 'auto', queueAckWaitSeconds: 30, queueReconcileSeconds: 30 });
    expect(refusal('documents:\n  queue: kafka\n').message).toMatch(/documents\.queue must be auto, local or nats/);
    expect(refusal('documents:\n  queue: local\n  workers: 0\n').message).toMatch(/documents\.workers 0 needs the nats work queue/);
  });

  it('the service refuses a nats queue without a broker or a shared store, and workers 0 without the nats queue', async () => {
    const svc = new Service(loadConfig({ env: {}, overrides: { model: '', embeddingModel: '', logDisableTimestamps: true } }));
    const refused = async (config: MountOptions['config']): Promise<string> => {
      const app = new Hono();
      app.onError(onError(svc.log));
      const docs = mountDocuments(app, svc, undefined, { env: {}, embedder: hashEmbedder(), pgliteTemplate: await pgliteTemplate(), config });
      const r = await app.request('/api/v1/documents/search', json({ query: 'x' }));
      expect(r.status).toBe(503);
      const body = (await r.json()) as { error: { code: string; message: string; details?: { cause?: string } } };
      expect(body.error.code).toBe('documents_unavailable');
      await docs.close();
      return body.error.message;
    };
    try {
      expect(await refused({ queue: 'nats', dataDir: 'memory://' })).toMatch(/documents\.queue is nats, but no broker is configured/);
      // No broker here: auto is the local queue, which workers 0 would leave without a worker.
      expect(await refused({ queue: 'auto', workers: 0, dataDir: 'memory://' })).toMatch(/workers 0 needs the nats work queue/);
    } finally {
      await svc.close();
    }
  });

  it('a limit set only in the file is what the document routes enforce', async () => {
    const cfg = loadConfig({ file: yaml('documents:\n  max_files_per_request: 2\n  data_dir: "memory://"\n'), env: {}, overrides: { model: '', embeddingModel: '', logDisableTimestamps: true } });
    const svc = new Service(cfg);
    const app = new Hono();
    app.onError(onError(svc.log));
    mountDocuments(app, svc, undefined, { env: {}, embedder: hashEmbedder(), pgliteTemplate: await pgliteTemplate() });
    try {
      const files = (k: number): unknown[] => Array.from({ length: k }, (_, i) => ({ name: `f${i}.txt`, bytes: b64(`file ${i}`), path: '', category: 'kb' }));
      const over = await app.request('/api/v1/documents', json({ files: files(3) }));
      expect(over.status).toBe(400);
      expect(((await over.json()) as { error: { code: string } }).error.code).toBe('too_many_files');
      expect((await app.request('/api/v1/documents', json({ files: files(2) }))).status).toBe(202);
    } finally {
      await svc.close();
    }
  });
});
