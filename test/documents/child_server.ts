/**
 * A document-loading server in a child process, for kill.test.ts:
 * `tsx child_server.ts <data_dir> <template.tar> [<database_url>]` serves the
 * document routes on an ephemeral port of 127.0.0.1 (printed as `PORT <n>`),
 * over an on-disk PGlite store at <data_dir> (or PostgreSQL at <database_url>,
 * one connection), embedding with the hash test embedder slowed to
 * 30 ms per call so documents stay in flight. Each `ready` a job commits is
 * printed as `READY <doc_id>`. SIGTERM closes the store cleanly; SIGKILL is
 * the crash under test.
 */
import { readFileSync } from 'node:fs';
import { serve } from '@hono/node-server';
import { documentsApp, hashEmbedder } from './helpers.ts';

const [dataDir, template, databaseUrl] = process.argv.slice(2);
const t = await documentsApp({
  embedder: hashEmbedder({ delayMs: 30 }),
  pgliteTemplate: new Blob([readFileSync(template!)]),
  config: { dataDir: dataDir!, workers: 2, embedBatch: 2, ...(databaseUrl ? { databaseUrl, databasePool: 1 } : {}) },
  eager: true,
  onState: (id, s) => {
    if (s === 'ready') process.stdout.write(`READY ${id}\n`);
  },
});
await t.docs.ready();
const server = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => process.stdout.write(`PORT ${info.port}\n`));
process.once('SIGTERM', () => {
  server.close();
  void t.close().then(() => process.exit(0));
});
