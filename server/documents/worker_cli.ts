/**
 * `weft document-worker`: a process that only processes documents — it
 * consumes the NATS work queue (nats_queue.ts) and reads, chunks, embeds and
 * stores what front ends accepted, against the PostgreSQL store they share.
 * Start as many as the embedding load needs, on any machine that reaches the
 * broker and the database.
 *
 *   weft document-worker --nats URL --database-url postgres://... [--embedder DIR]
 *                        [--workers N] [--backend B] [--config FILE]
 *                        [--creds FILE | --nkey SEED | --user U --password P | --token T]
 *                        [--tls-ca FILE] [--tls-cert FILE --tls-key FILE]
 *
 * Settings: the `documents:` and `nats:` sections of the config file (the
 * same file and lookup a front end uses), then WEFT_DOCUMENTS_* / DATABASE_URL and
 * WEFT_NATS_* variables, then the flags. Prints one JSON line
 * `{"document_worker": {...}}` once it consumes, and stops on SIGINT /
 * SIGTERM (jobs it was running go back to the queue at once).
 */
import { parseArgs } from 'node:util';
import type { Embedder } from '../../core/documents/embedder.ts';
import type { DocState } from '../../core/documents/types.ts';
import { InvalidRequestError } from '../../core/errors.ts';
import { prepareGpuEnv } from '../../core/gpu/device.ts';
import { connectNats, resolveNatsOptions, type NatsOptions } from '../readers/nats_conn.ts';
import { loadConfig } from '../config.ts';
import { createLogger } from '../log.ts';
import { loadDocumentsConfig, type DocumentsConfig } from './config.ts';
import { DocumentService } from './service.ts';

export interface DocumentWorker {
  service: DocumentService;
  close(): Promise<void>;
}

export interface WorkerOptions {
  config: DocumentsConfig;
  nats: NatsOptions;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
  /** Use this embedder instead of loading config.embedder. */
  embedder?: Embedder;
  onState?: (docId: string, state: DocState) => void;
}

/** Connects, opens the store and the embedder, and starts consuming; resolves once it does. */
export async function startDocumentWorker(o: WorkerOptions): Promise<DocumentWorker> {
  if (!o.config.databaseUrl) throw new InvalidRequestError('invalid_config', 'a document worker needs the shared PostgreSQL store: --database-url, documents.database_url or DATABASE_URL', { key: 'documents.database_url' });
  if (o.config.workers < 1) throw new InvalidRequestError('invalid_config', 'a document worker needs documents.workers ≥ 1', { key: 'documents.workers' });
  const nc = await connectNats(o.nats, 'weft-document-worker');
  const service = new DocumentService({
    config: { ...o.config, queue: 'nats' },
    nats: nc,
    ...(o.log ? { log: o.log } : {}),
    ...(o.embedder ? { embedder: o.embedder } : {}),
    ...(o.onState ? { onState: o.onState } : {}),
  });
  try {
    await service.ready();
  } catch (e) {
    await nc.close().catch(() => undefined);
    throw e;
  }
  return {
    service,
    async close() {
      await service.close();
      await nc.drain().catch(() => undefined);
    },
  };
}

/** The command line (server/cli.ts dispatches here). */
export async function documentWorkerCommand(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      config: { type: 'string' },
      nats: { type: 'string' },
      'database-url': { type: 'string' },
      embedder: { type: 'string' },
      workers: { type: 'string' },
      backend: { type: 'string' },
      creds: { type: 'string' },
      nkey: { type: 'string' },
      user: { type: 'string' },
      password: { type: 'string' },
      token: { type: 'string' },
      'tls-ca': { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
    },
  });
  // The same file and variables a front end reads (`--config`, WEFT_CONFIG or ./config.yaml); only documents: and nats: matter here.
  const svcConfig = loadConfig(values.config ? { file: values.config } : {});
  const file = { documents: (svcConfig as unknown as { documents?: unknown }).documents, nats: svcConfig.nats };
  const workers = values.workers === undefined ? undefined : Number(values.workers);
  if (workers !== undefined && !(Number.isInteger(workers) && workers >= 1)) throw new InvalidRequestError('invalid_argument', `--workers must be a positive integer, got "${values.workers}"`);
  const config = loadDocumentsConfig({
    file: file.documents,
    overrides: {
      ...(values['database-url'] ? { databaseUrl: values['database-url'] } : {}),
      ...(values.embedder ? { embedder: values.embedder } : {}),
      ...(workers !== undefined ? { workers } : {}),
      ...(values.backend ? { backend: values.backend } : {}),
    },
  });
  const flags: Record<string, string | undefined> = {
    url: values.nats,
    creds: values.creds,
    nkey: values.nkey,
    user: values.user,
    password: values.password,
    token: values.token,
    tls_ca: values['tls-ca'],
    tls_cert: values['tls-cert'],
    tls_key: values['tls-key'],
  };
  const section = { ...((file.nats as Record<string, unknown> | undefined) ?? {}), ...Object.fromEntries(Object.entries(flags).filter(([, v]) => v !== undefined)) };
  const nats = resolveNatsOptions(section);
  if (!nats) throw new InvalidRequestError('invalid_argument', 'a document worker needs a broker: --nats URL, nats.url or WEFT_NATS_URL');
  const log = createLogger({ timestamps: !process.env.WEFT_LOG_DISABLE_TIMESTAMPS, color: false });
  prepareGpuEnv(); // before the embedder's worker thread starts: it cannot change the native environment
  const worker = await startDocumentWorker({ config, nats, log: (m, f) => log(m, f) });
  process.stdout.write(`${JSON.stringify({ document_worker: { nats: nats.url, store: worker.service.storeName(), workers: config.workers, embedder: (await worker.service.status()).embedder } })}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
  log('document worker shutting down', {});
  await worker.close();
  setTimeout(() => process.exit(0), 200).unref(); // a GPU device may hold the event loop open
  return 0;
}
