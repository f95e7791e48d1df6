/**
 * Persistence and resume, in-process, with the BERT fixture embedder on a GPU
 * context, over each persistent store: an on-disk PGlite store in a temp
 * directory, and PostgreSQL through `pg` (a server process that outlives the
 * two services, as a database server outlives a restarted Weft):
 *  - a worker is stopped mid-job (its embed call held by a gate): the
 *    document is `embedding`, the others `queued`; the service closes;
 *  - a new service over the same directory resumes at start-up (no request
 *    needed): every document reaches `ready`; the interrupted one was started
 *    twice; its chunks are written once — indices 0..n-1, as many rows as
 *    its chunk count;
 *  - a second `complete` for a ready document writes nothing (keyed writes
 *    guarded by the state).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Embedder } from '../../core/documents/embedder.ts';
import { prepareGpuEnv } from '../../core/gpu/device.ts';
import { loadEmbedder } from '../../server/documents/embedder.ts';
import { startPgServer } from './backends.ts';
import { b64, documentsApp, gated, json, waitReady } from './helpers.ts';

const FIXTURE = fileURLToPath(new URL('../fixtures/encoders/bert', import.meta.url));
const BACKEND = process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles';

let embedder: Embedder;
beforeAll(async () => {
  prepareGpuEnv();
  embedder = await loadEmbedder(FIXTURE, BACKEND);
});
afterAll(() => embedder?.close());

/** A persistent store: the config that opens it, and how to dispose of it. */
async function persistent(backend: 'pglite' | 'postgres'): Promise<{ config: Record<string, unknown>; dispose(): Promise<void> }> {
  if (backend === 'pglite') {
    const dataDir = mkdtempSync(join(tmpdir(), 'weft-docs-restart-'));
    return { config: { dataDir }, dispose: async () => rmSync(dataDir, { recursive: true, force: true }) };
  }
  const server = await startPgServer();
  return { config: { databaseUrl: server.url, databasePool: 1 }, dispose: () => server.stop() };
}

describe.each(['pglite', 'postgres'] as const)('restart resumes unfinished documents (%s)', (backend) => {
  it('stop mid-job, reopen the same store: every document reaches ready, chunks written once', async () => {
    const db = await persistent(backend);
    const texts = [0, 1, 2].map((d) => Array.from({ length: 8 }, (_, i) => `Document ${d} sentence ${i} speaks of lakes and hills.`).join(' '));
    const gate = gated(embedder);
    const first = await documentsApp({ embedder: gate.embedder, config: { ...db.config, workers: 1 } });
    const res = await first.app.request('/api/v1/documents', json({ files: texts.map((t, i) => ({ name: `d${i}.txt`, bytes: b64(t), path: '', category: 'kb' })), chunk_units: 24, chunk_overlap: 4 }));
    expect(res.status).toBe(202);
    const ids = ((await res.json()) as { accepted: { doc_id: string }[] }).accepted.map((e) => e.doc_id);
    await gate.entered;
    const state = async (id: string): Promise<string> => ((await (await first.app.request(`/api/v1/document/${id}`)).json()) as { state: string }).state;
    expect(await Promise.all(ids.map(state))).toEqual(['embedding', 'queued', 'queued']);
    await first.close(); // stops the worker where it stands, closes the store
    expect(first.docs.hasExistingStore()).toBe(true);

    const seen: string[] = [];
    const second = await documentsApp({ embedder, config: db.config, onState: (id, s) => seen.push(`${ids.indexOf(id)}:${s}`) });
    try {
      // Resumes at start-up: the first request finds the work already going.
      const recs = [];
      for (const id of ids) recs.push(await waitReady(second.app, id, 60_000));
      expect(recs.map((r) => r.state)).toEqual(['ready', 'ready', 'ready']);
      expect(recs.map((r) => r.attempts)).toEqual([2, 1, 1]);
      expect(seen.filter((s) => s.endsWith(':ready')).sort()).toEqual(['0:ready', '1:ready', '2:ready']);
      const { store } = await second.docs.ready();
      for (const r of recs as { doc_id: string; counts: { chunks: number } }[]) {
        const chunks = await store.chunks(r.doc_id);
        expect(chunks.length).toBe(r.counts.chunks);
        expect(chunks.map((c) => c.index)).toEqual([...chunks.keys()]);
        expect(chunks.every((c) => c.tokens <= 24)).toBe(true);
      }
      // A repeated completion changes nothing.
      const again = await store.complete(ids[0]!, [{ index: 0, text: 'x', tokens: 1, heading: null, page: null, embedding: new Float32Array(embedder.dims) }], { chunks: 1, tokens: 1, characters: 1, pages: null });
      expect(again).toBe(false);
      expect((await store.chunks(ids[0]!)).length).toBe((recs[0] as { counts: { chunks: number } }).counts.chunks);
      expect(await store.requeueInProgress()).toBe(0);
    } finally {
      await second.close();
      await db.dispose();
    }
  });
});
