/**
 * Document ingest benchmark (`npm run bench -- --only documents`, or standalone
 * `npx tsx bench/documents.ts [--small 1000] [--large 20] [--small-words 50]
 * [--large-kb 16] [--embedder use-lite|hash|<model dir>] [--backend opengles]
 * [--workers 2] [--units 128] [--json]`).
 *
 * Loads `small` short and `large` long generated text documents through
 * `POST /api/v1/documents` (in-process Hono app, in-memory PGlite + pgvector
 * store, the real worker pool) in requests of 200 files, waits until every
 * one is `ready`, and reports:
 *  - documents/s and chunks/s over the whole run (acceptance to last ready);
 *  - peak RSS (sampled every 50 ms);
 *  - the embedder's share of the time: wall time during which at least one
 *    embed call was in flight, over the run's wall time — and, per step, the
 *    share of job time (read / chunk / embed / store, summed over the
 *    concurrent jobs, so embed includes waiting for a batch shared with the
 *    other worker);
 *  - the longest event-loop stall (the embedder's GPU work runs in this
 *    process: on Dawn's GL backend a batch blocks the thread while it runs).
 *
 * Default embedder: the bundled USE-Lite (produced on first use from the npm
 * package, server/models/use_lite.ts), on the GPU backend given (Dawn on
 * llvmpipe here: about 50 tokens/s, so the embedder dominates). `hash` is a
 * free bag-of-words embedder that measures the pipeline alone.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Hono } from 'hono';
import { encodeBase64 } from '../core/documents/base64.ts';
import { normalize, type Embedder } from '../core/documents/embedder.ts';
import { prepareGpuEnv } from '../core/gpu/device.ts';
import { mountDocuments } from '../server/apps/documents.ts';
import { loadConfig } from '../server/config.ts';
import { loadEmbedder } from '../server/documents/embedder.ts';
import { ensureUseLite } from '../server/models/use_lite.ts';
import { Service } from '../server/service.ts';

export interface DocumentsBenchOptions {
  small?: number;
  large?: number;
  /** Words per small document (~1.2 USE-Lite tokens per word). */
  smallWords?: number;
  /** Size of a large document, KiB of text. */
  largeKb?: number;
  /** `use-lite` (default), `hash`, or an embedding model directory. */
  embedder?: string;
  backend?: string;
  workers?: number;
  /** chunk_units of the requests (default min(128, embedder limit)). */
  units?: number;
  log?: (s: string) => void;
}

export interface DocumentsBenchReport {
  embedder: string;
  dims: number;
  backend: string;
  workers: number;
  chunkUnits: number;
  small: number;
  large: number;
  smallWords: number;
  largeKb: number;
  documents: number;
  ready: number;
  failed: number;
  chunks: number;
  tokens: number;
  megabytes: number;
  acceptSeconds: number;
  seconds: number;
  documentsPerS: number;
  chunksPerS: number;
  tokensPerS: number;
  peakRssMb: number;
  /** Wall time with an embed call in flight / run wall time. */
  embedderBusyShare: number;
  embedCalls: number;
  /** Longest the event loop was blocked, s (HTTP answers wait that long meanwhile). */
  eventLoopMaxS: number;
  /** Share of summed job time per step. */
  jobShare: { read: number; chunk: number; embed: number; store: number };
  /** Small and large documents timed apart (they are loaded one group after the other). */
  smallSeconds: number;
  largeSeconds: number;
}

const WORDS = 'river mountain engine server window garden silver morning network harbor paper signal forest market winter station lantern meadow copper valley'.split(' ');

/** Deterministic prose-like text: sentences of 12 words, paragraphs of 120. */
export function benchText(seed: number, words: number): string {
  const out: string[] = [];
  let x = (seed * 2654435761) >>> 0;
  for (let i = 0; i < words; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    let w = WORDS[(x >>> 8) % WORDS.length]!;
    if (i % 12 === 0) w = w[0]!.toUpperCase() + w.slice(1);
    if (i % 12 === 11) w += '.';
    if (i % 120 === 119) w += '\n\n';
    out.push(w);
  }
  return `Document ${seed}. ${out.join(' ')}`;
}

/** Free embedder: hashed bag of words, one token per word. */
function hashEmbedder(dims = 256): Embedder {
  const hash = (s: string): number => {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
    return h >>> 0;
  };
  return {
    id: 'hash-bench',
    dims,
    maxTokens: 512,
    tokenizer: { count: (t) => (t.match(/[\p{L}\p{N}]+|[^\s\p{L}\p{N}]/gu) ?? []).length },
    async embed(texts) {
      return texts.map((t) => {
        const v = new Float32Array(dims);
        for (const w of t.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) v[hash(w) % dims]! += 1;
        v[0]! += 1e-3;
        return normalize(v);
      });
    },
    async close() {},
  };
}

/** `inner` with the union of its in-flight intervals measured (ms) and its calls counted. */
function timed(inner: Embedder): Embedder & { busyMs(): number; calls: number } {
  let active = 0;
  let since = 0;
  let busy = 0;
  const e = {
    id: inner.id,
    dims: inner.dims,
    maxTokens: inner.maxTokens,
    tokenizer: inner.tokenizer,
    calls: 0,
    busyMs: () => busy + (active ? performance.now() - since : 0),
    async embed(texts: string[], o?: { signal?: AbortSignal }) {
      e.calls++;
      if (active++ === 0) since = performance.now();
      try {
        return await inner.embed(texts, o);
      } finally {
        if (--active === 0) busy += performance.now() - since;
      }
    },
    close: () => inner.close(),
  };
  return e;
}

async function openEmbedder(name: string, backend: string, log: (s: string) => void): Promise<Embedder> {
  if (name === 'hash') return hashEmbedder();
  prepareGpuEnv();
  const dir = name === 'use-lite' ? await ensureUseLite({ log: (m, f) => log(`documents: ${m} ${JSON.stringify(f ?? {})}`) }) : name;
  return loadEmbedder(dir, backend);
}

export async function benchDocuments(o: DocumentsBenchOptions = {}): Promise<DocumentsBenchReport> {
  const log = o.log ?? ((s: string) => void process.stderr.write(`${s}\n`));
  const small = o.small ?? 1000;
  const large = o.large ?? 20;
  const smallWords = o.smallWords ?? 50;
  const largeKb = o.largeKb ?? 16;
  const workers = o.workers ?? 2;
  const backend = o.backend ?? process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles';
  const embedder = timed(await openEmbedder(o.embedder ?? 'use-lite', backend, log));
  const units = o.units ?? Math.min(128, embedder.maxTokens);

  const svc = new Service(loadConfig({ env: {}, overrides: { model: '', embeddingModel: '', logDisableTimestamps: true } }));
  const app = new Hono();
  const docs = mountDocuments(app, svc, undefined, {
    env: {},
    embedder,
    config: { dataDir: 'memory://', workers, embedBatch: 32, limits: { maxFileBytes: 64 << 20, maxRequestBytes: 256 << 20, maxFilesPerRequest: 256 } },
  });
  try {
    const { pool, store } = await docs.ready();
    log(`documents: ${small} small (${smallWords} words) + ${large} large (${largeKb} KiB) documents, embedder ${embedder.id} (${embedder.dims} dims), chunk_units ${units}, ${workers} workers`);
    const wordsLarge = Math.round((largeKb * 1024) / 7.2);
    const groups = [
      Array.from({ length: small }, (_, i) => ({ name: `small${i}.txt`, body: benchText(i, smallWords) })),
      Array.from({ length: large }, (_, i) => ({ name: `large${i}.txt`, body: benchText(100_000 + i, wordsLarge) })),
    ];
    const loopDelay = monitorEventLoopDelay({ resolution: 20 });
    loopDelay.enable();
    let peak = process.memoryUsage().rss;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 50);
    const started = performance.now();
    let acceptMs = 0;
    let bytes = 0;
    const groupMs: number[] = [];
    const allIds: string[] = [];
    try {
      // Small documents first, then large ones, each group timed to its last ready document.
      for (const group of groups) {
        const g0 = performance.now();
        const ids: string[] = [];
        for (let i = 0; i < group.length; i += 200) {
          const a0 = performance.now();
          const files = group.slice(i, i + 200).map((d) => {
            bytes += d.body.length;
            return { name: d.name, doc_id: null, bytes: encodeBase64(new TextEncoder().encode(d.body)), path: '', category: 'bench' };
          });
          const r = await app.request('/api/v1/documents', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ files, chunk_units: units, chunk_overlap: Math.floor(units / 8) }) });
          const body = (await r.json()) as { accepted: { doc_id: string }[] };
          if (r.status !== 202) throw new Error(`load answered ${r.status}: ${JSON.stringify(body).slice(0, 300)}`);
          ids.push(...body.accepted.map((e) => e.doc_id));
          acceptMs += performance.now() - a0;
        }
        const progress = setInterval(() => log(`documents: ${pool.totals.ready} ready, ${pool.totals.chunks} chunks, ${((performance.now() - started) / 1000).toFixed(0)} s`), 60_000);
        try {
          await pool.waitFor(ids, 24 * 3600_000);
        } finally {
          clearInterval(progress);
        }
        groupMs.push(performance.now() - g0);
        allIds.push(...ids);
      }
    } finally {
      clearInterval(sampler);
      loopDelay.disable();
    }
    const wallMs = performance.now() - started;
    const recs = await store.getMany(allIds);
    const tot = pool.totals;
    const jobMs = tot.readMs + tot.chunkMs + tot.embedMs + tot.storeMs || 1;
    const share = (x: number): number => Number((x / jobMs).toFixed(3));
    const tokens = recs.reduce((s, r) => s + r.counts.tokens, 0);
    const s = wallMs / 1000;
    return {
      embedder: embedder.id,
      dims: embedder.dims,
      backend: o.embedder === 'hash' ? 'none' : backend,
      workers,
      chunkUnits: units,
      small,
      large,
      smallWords,
      largeKb,
      documents: allIds.length,
      ready: recs.filter((r) => r.state === 'ready').length,
      failed: recs.filter((r) => r.state === 'failed').length,
      chunks: tot.chunks,
      tokens,
      megabytes: Number((bytes / 1e6).toFixed(2)),
      acceptSeconds: Number((acceptMs / 1000).toFixed(2)),
      seconds: Number(s.toFixed(1)),
      documentsPerS: Number((allIds.length / s).toFixed(2)),
      chunksPerS: Number((tot.chunks / s).toFixed(2)),
      tokensPerS: Number((tokens / s).toFixed(1)),
      peakRssMb: Math.round(peak / 2 ** 20),
      embedderBusyShare: Number((embedder.busyMs() / wallMs).toFixed(3)),
      embedCalls: embedder.calls,
      eventLoopMaxS: Number((loopDelay.max / 1e9).toFixed(1)),
      jobShare: { read: share(tot.readMs), chunk: share(tot.chunkMs), embed: share(tot.embedMs), store: share(tot.storeMs) },
      smallSeconds: Number(((groupMs[0] ?? 0) / 1000).toFixed(1)),
      largeSeconds: Number(((groupMs[1] ?? 0) / 1000).toFixed(1)),
    };
  } finally {
    await svc.close();
    await embedder.close();
  }
}

const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;

export function documentsTable(r: DocumentsBenchReport): string {
  return [
    `Ingest of ${r.small} small documents (~${r.smallWords} words) and ${r.large} large ones (${r.largeKb} KiB) through \`POST /api/v1/documents\`: embedder \`${r.embedder}\` (${r.dims} dims, backend ${r.backend}), chunk_units ${r.chunkUnits}, ${r.workers} workers, in-memory PGlite + pgvector.`,
    '',
    '| documents | ready / failed | chunks | tokens | MB | accept s | total s | small s | large s | docs/s | chunks/s | tokens/s | peak RSS MB | embedder busy | job time: read / chunk / embed / store | event loop max stall s |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|',
    `| ${r.documents} | ${r.ready} / ${r.failed} | ${r.chunks} | ${r.tokens} | ${r.megabytes} | ${r.acceptSeconds} | ${r.seconds} | ${r.smallSeconds} | ${r.largeSeconds} | ${r.documentsPerS} | ${r.chunksPerS} | ${r.tokensPerS} | ${r.peakRssMb} | ${pct(r.embedderBusyShare)} | ${pct(r.jobShare.read)} / ${pct(r.jobShare.chunk)} / ${pct(r.jobShare.embed)} / ${pct(r.jobShare.store)} | ${r.eventLoopMaxS} |`,
    '',
    '_embedder busy_: share of the wall time with an embed call in flight; _job time_: per step, summed over the concurrent jobs (embed includes waiting for a GPU batch shared with the other worker); _event loop max stall_: longest the process could not answer anything (the embedder runs on its GPU device in the server process)._',
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values: a } = parseArgs({
    options: {
      small: { type: 'string' },
      large: { type: 'string' },
      'small-words': { type: 'string' },
      'large-kb': { type: 'string' },
      embedder: { type: 'string' },
      backend: { type: 'string' },
      workers: { type: 'string' },
      units: { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  const num = (v: string | undefined): number | undefined => (v === undefined ? undefined : Number(v));
  const opts: DocumentsBenchOptions = {};
  for (const [k, v] of [['small', a.small], ['large', a.large], ['smallWords', a['small-words']], ['largeKb', a['large-kb']], ['workers', a.workers], ['units', a.units]] as const) {
    if (v !== undefined) (opts as Record<string, number | undefined>)[k] = num(v);
  }
  if (a.embedder) opts.embedder = a.embedder;
  if (a.backend) opts.backend = a.backend;
  const r = await benchDocuments(opts);
  process.stdout.write(`${a.json ? JSON.stringify(r, null, 2) : documentsTable(r)}\n`);
  process.exit(0); // Dawn can keep the event loop alive after its devices are destroyed.
}
