/**
 * One document's job: read → chunk → embed → store, moving the document
 * through its states (states.ts) as it goes.
 *
 * The job runs on a document a worker has claimed (state `reading`). Every
 * step ends with a compare-and-set transition, so a document deleted while
 * it is processed makes the job stop ("stale") without writing anything.
 * Chunks and the `ready` state are written together at the end (store
 * `complete`), so an interrupted job leaves nothing half-written.
 *
 * Errors: permanent ones (unreadable, empty) fail the document at once;
 * others go back to `queued` until `maxAttempts` starts, then fail. An abort
 * (the pool stopping) leaves the document in its current state: the next
 * start of the pool requeues it, exactly as after a crash.
 */
import { chunkBlocks } from './chunker.ts';
import type { Embedder } from './embedder.ts';
import { docErrorOf, EmptyDocumentError, isPermanent } from './errors.ts';
import { readDocument } from './readers/index.ts';
import type { ClaimedJob, DocumentStore } from './store.ts';
import type { DocCounts, DocState, StoredChunk } from './types.ts';

export interface PipelineDeps {
  store: DocumentStore;
  embedder: Embedder;
  /** Chunks per embed call (default 32). */
  embedBatch?: number;
  /** Starts after which a transient error fails the document (default 3). */
  maxAttempts?: number;
  signal?: AbortSignal;
  /** Called after each state change the job makes. */
  onState?: (docId: string, state: DocState) => void;
}

export type JobOutcome = 'ready' | 'failed' | 'requeued' | 'stale' | 'aborted';

/** Milliseconds spent per step (for throughput reports). */
export interface JobTimings {
  read: number;
  chunk: number;
  embed: number;
  store: number;
}

export interface JobResult {
  outcome: JobOutcome;
  timings: JobTimings;
  chunks: number;
}

const now = (): number => performance.now();

export async function processDocument(job: ClaimedJob, deps: PipelineDeps): Promise<JobResult> {
  const { store, embedder, signal } = deps;
  const rec = job.record;
  const id = rec.docId;
  const timings: JobTimings = { read: 0, chunk: 0, embed: 0, store: 0 };
  let state: DocState = 'reading';
  let chunkCount = 0;
  const step = async (to: DocState, counts?: Partial<DocCounts>): Promise<boolean> => {
    const t = now();
    const ok = await store.transition(id, state, to, counts ? { counts } : {});
    timings.store += now() - t;
    if (ok) {
      state = to;
      deps.onState?.(id, to);
    }
    return ok;
  };
  const checkAbort = (): void => {
    if (signal?.aborted) throw signal.reason ?? new Error('aborted');
  };
  try {
    let t = now();
    const read = await readDocument(job.content, rec.format, signal);
    timings.read += now() - t;
    checkAbort();
    const characters = read.blocks.reduce((s, b) => s + b.text.length, 0);
    if (characters === 0) throw new EmptyDocumentError(rec.format);
    if (!(await step('chunking', { characters, pages: read.pages }))) return { outcome: 'stale', timings, chunks: 0 };

    t = now();
    const opts = rec.options;
    const chunks = chunkBlocks(read.blocks, embedder.tokenizer, { mode: opts.chunker, units: opts.chunkUnits, overlap: opts.chunkOverlap });
    timings.chunk += now() - t;
    checkAbort();
    if (chunks.length === 0) throw new EmptyDocumentError(rec.format);
    chunkCount = chunks.length;
    const tokens = chunks.reduce((s, c) => s + c.tokens, 0);
    if (!(await step('embedding', { chunks: chunks.length, tokens }))) return { outcome: 'stale', timings, chunks: 0 };

    t = now();
    const batch = Math.max(1, deps.embedBatch ?? 32);
    const stored: StoredChunk[] = [];
    for (let i = 0; i < chunks.length; i += batch) {
      const part = chunks.slice(i, i + batch);
      const vectors = await embedder.embed(part.map((c) => c.text), signal ? { signal } : {});
      checkAbort();
      part.forEach((c, k) => stored.push({ index: c.index, text: c.text, tokens: c.tokens, heading: c.heading, page: c.page, embedding: vectors[k]! }));
    }
    timings.embed += now() - t;

    t = now();
    const done = await store.complete(id, stored, { chunks: chunks.length, tokens, characters, pages: read.pages });
    timings.store += now() - t;
    if (!done) return { outcome: 'stale', timings, chunks: 0 };
    deps.onState?.(id, 'ready');
    return { outcome: 'ready', timings, chunks: chunks.length };
  } catch (e) {
    if (signal?.aborted) return { outcome: 'aborted', timings, chunks: 0 };
    const retry = !isPermanent(e) && rec.attempts < (deps.maxAttempts ?? 3);
    const to: DocState = retry ? 'queued' : 'failed';
    const ok = await store.transition(id, state, to, { error: docErrorOf(e) });
    if (ok) deps.onState?.(id, to);
    return { outcome: ok ? (retry ? 'requeued' : 'failed') : 'stale', timings, chunks: chunkCount };
  }
}
