/**
 * Ingest benchmark: loads N small and M large generated text documents
 * through `POST /api/v1/documents` (in-process app, in-memory PGlite) and
 * waits until all are ready; reports documents/s, chunks/s, peak RSS, and
 * where job time went (read / chunk / embed / store — the embedder's share).
 *
 *   npx tsx test/documents/ingest_bench.ts [--small 1000] [--large 20]
 *     [--large-kb 64] [--embedder hash|<model dir>] [--backend opengles]
 *     [--workers 2] [--units 128]
 *
 * Default embedder: the BERT test fixture (tiny; the numbers then mostly
 * measure the pipeline); `hash` measures the pipeline with a free embedder.
 * Not a vitest test (no `.test.ts`): it takes minutes at full size.
 */
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { prepareGpuEnv } from '../../core/gpu/device.ts';
import { b64, documentsApp, hashEmbedder, json } from './helpers.ts';

const { values: a } = parseArgs({
  options: {
    small: { type: 'string', default: '1000' },
    large: { type: 'string', default: '20' },
    'large-kb': { type: 'string', default: '64' },
    embedder: { type: 'string', default: fileURLToPath(new URL('../fixtures/encoders/bert', import.meta.url)) },
    backend: { type: 'string', default: process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles' },
    workers: { type: 'string', default: '2' },
    units: { type: 'string' },
  },
});

const WORDS = 'river mountain engine server window garden silver morning network harbor paper signal forest market winter station'.split(' ');
function text(seed: number, words: number): string {
  const out: string[] = [];
  let x = seed * 2654435761;
  for (let i = 0; i < words; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out.push(WORDS[x % WORDS.length]!);
    if (i % 12 === 11) out[out.length - 1] += '.';
    if (i % 120 === 119) out[out.length - 1] += '\n\n';
  }
  return `Document ${seed}. ${out.join(' ')}`;
}

prepareGpuEnv();
const useHash = a.embedder === 'hash';
const t = await documentsApp({
  ...(useHash ? { embedder: hashEmbedder() } : {}),
  config: { workers: Number(a.workers), ...(useHash ? {} : { embedder: a.embedder!, backend: a.backend! }), limits: { maxFileBytes: 64 << 20, maxRequestBytes: 256 << 20 } },
});
const { embedder } = await t.docs.ready();
const units = a.units ? Number(a.units) : Math.min(256, embedder.maxTokens);

let peak = 0;
const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 50);
const docs = [
  ...Array.from({ length: Number(a.small) }, (_, i) => ({ name: `small${i}.txt`, body: text(i, 60) })),
  ...Array.from({ length: Number(a.large) }, (_, i) => ({ name: `large${i}.txt`, body: text(100_000 + i, Math.round((Number(a['large-kb']) * 1024) / 7)) })),
];
const started = performance.now();
const ids: string[] = [];
for (let i = 0; i < docs.length; i += 200) {
  const files = docs.slice(i, i + 200).map((d) => ({ name: d.name, doc_id: null, bytes: b64(d.body), path: '', category: 'bench' }));
  const r = await t.app.request('/api/v1/documents', json({ files, chunk_units: units, chunk_overlap: Math.floor(units / 8) }));
  const body = (await r.json()) as { accepted: { doc_id: string }[] };
  if (r.status !== 202) throw new Error(`load answered ${r.status}: ${JSON.stringify(body).slice(0, 300)}`);
  ids.push(...body.accepted.map((e) => e.doc_id));
}
const accepted = performance.now();
const { pool, store } = await t.docs.ready();
await pool.waitFor(ids, 24 * 3600_000);
const wall = (performance.now() - started) / 1000;
clearInterval(sampler);
const states = await store.stateCounts();
const tot = pool.totals;
const jobMs = tot.readMs + tot.chunkMs + tot.embedMs + tot.storeMs;
const pct = (x: number): string => `${((100 * x) / jobMs).toFixed(1)}%`;
console.log(JSON.stringify({
  embedder: embedder.id, dims: embedder.dims, chunk_units: units, workers: Number(a.workers),
  documents: ids.length, small: Number(a.small), large: Number(a.large), large_kb: Number(a['large-kb']),
  states, chunks: tot.chunks,
  seconds: Number(wall.toFixed(2)), accept_seconds: Number(((accepted - started) / 1000).toFixed(2)),
  documents_per_s: Number((ids.length / wall).toFixed(1)), chunks_per_s: Number((tot.chunks / wall).toFixed(1)),
  peak_rss_mb: Math.round(peak / 2 ** 20),
  job_time_share: { read: pct(tot.readMs), chunk: pct(tot.chunkMs), embed: pct(tot.embedMs), store: pct(tot.storeMs) },
}, null, 2));
await t.close();
