/**
 * One process of the document work-queue test (nats_workers.test.ts):
 *
 *   tsx nats_child.ts front  <nats_url> <database_url>
 *       the document routes of a front end attached to NATS (as `weft serve`
 *       with a `nats:` section and documents.queue nats, workers 0: it only
 *       accepts), on an ephemeral port printed as `PORT <n>`;
 *   tsx nats_child.ts worker <nats_url> <database_url>
 *       a document worker (as `weft document-worker`, two jobs at a time,
 *       ack_wait 2 s), printing `CONSUMING` once it pulls, then
 *       `READING <doc_id>` when it takes a document and `READY <doc_id>`
 *       when a job's commit is done.
 *
 * Both embed with the hash test embedder (same identity, so they share the
 * store), the worker's slowed to 100 ms per call so jobs are in flight when
 * it is killed. SIGTERM stops cleanly; SIGKILL is the crash under test.
 */
import { serve } from '@hono/node-server';
import { loadDocumentsConfig } from '../../server/documents/config.ts';
import { startDocumentWorker } from '../../server/documents/worker_cli.ts';
import { documentsApp, hashEmbedder } from './helpers.ts';

const [role, natsUrl, databaseUrl] = process.argv.slice(2) as [string, string, string];
const log = (msg: string, fields?: Record<string, unknown>): void => void process.stderr.write(`${msg} ${JSON.stringify(fields ?? {})}\n`);

if (role === 'front') {
  const t = await documentsApp({ natsUrl, embedder: hashEmbedder(), config: { databaseUrl, databasePool: 4, queue: 'nats', workers: 0 } });
  await t.docs.ready();
  const server = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => process.stdout.write(`PORT ${info.port}\n`));
  process.once('SIGTERM', () => {
    server.close();
    void t.close().then(() => process.exit(0));
  });
} else {
  const config = loadDocumentsConfig({ env: {}, overrides: { databaseUrl, databasePool: 4, workers: 2, embedBatch: 2, queueAckWaitSeconds: 2, queueReconcileSeconds: 5 } });
  const w = await startDocumentWorker({
    config,
    nats: { url: natsUrl },
    embedder: hashEmbedder({ delayMs: 100 }),
    log,
    onState: (id, s) => {
      if (s === 'reading') process.stdout.write(`READING ${id}\n`);
      else if (s === 'ready') process.stdout.write(`READY ${id}\n`);
    },
  });
  process.stdout.write('CONSUMING\n');
  process.once('SIGTERM', () => void w.close().then(() => process.exit(0)));
}
