/**
 * The document store interface: documents (with their content until they
 * are processed), their chunks and vectors, and the operations the intake,
 * the worker pool and the search route need.
 *
 * Guarantees every implementation gives (the SQL store in
 * server/documents/sql_store.ts is the one there is):
 *  - `insert` is durable when it resolves (the HTTP layer acknowledges only
 *    after it), atomic per call, and race-safe on both duplicate rules;
 *  - `claim` hands a queued document to exactly one worker; `claimById`
 *    is for a work queue (one message per document decides who works);
 *  - `transition` is a compare-and-set on the state (see states.ts);
 *  - `complete` writes all chunks keyed by (doc_id, index) and sets `ready`
 *    in one transaction, only if the document is still `embedding`: a job
 *    interrupted before it commits leaves no chunks, one that committed is
 *    never resumed, so no document is processed twice into the store.
 */
import type { DocCounts, DocError, DocState, DocumentRecord, NewDocument, SearchHit, SearchQuery, StoredChunk } from './types.ts';

export type DuplicateReason = 'duplicate_doc_id' | 'duplicate_content';

export type InsertOutcome = { status: 'inserted' } | { status: 'duplicate'; reason: DuplicateReason; existing: string };

/** The duplicate rule: same content (sha-256) in the same category for the same owners. */
export interface ContentKey {
  category: string;
  owners: readonly string[];
  sha256: string;
}

/** A document handed to a worker, with its bytes. */
export interface ClaimedJob {
  record: DocumentRecord;
  content: Uint8Array;
}

export interface StatePatch {
  error?: DocError | null;
  counts?: Partial<DocCounts>;
}

export interface DocumentStore {
  /** Creates the schema when missing and checks the stored embedder identity (StoreEmbedderMismatchError). */
  open(embedder: { id: string; dims: number }): Promise<void>;
  /** Per item, an existing document that makes it a duplicate: same doc_id (when given) first, then same content key. */
  findDuplicates(items: readonly { docId: string | null; key: ContentKey }[]): Promise<({ reason: DuplicateReason; existing: string } | null)[]>;
  /** Records documents in one transaction (state queued); a row that loses a race is reported as a duplicate. */
  insert(docs: readonly NewDocument[]): Promise<InsertOutcome[]>;
  get(docId: string): Promise<DocumentRecord | null>;
  getMany(docIds: readonly string[]): Promise<DocumentRecord[]>;
  /** Removes a document and its chunks; false when unknown. */
  delete(docId: string): Promise<boolean>;
  /** Start-up: documents left reading / chunking / embedding by a dead process go back to queued. */
  requeueInProgress(): Promise<number>;
  /** Takes the oldest queued document (queued → reading, attempts + 1), or null. */
  claim(): Promise<ClaimedJob | null>;
  /**
   * Takes one document by id for a worker that holds its work-queue message: queued → reading, or an
   * in-progress document (its previous worker died) taken over the same way; attempts + 1 either way.
   * Null when the document is ready, failed or gone.
   */
  claimById(docId: string): Promise<ClaimedJob | null>;
  /** Documents not ready or failed, untouched for `olderThanMs`, oldest first (a work queue's reconciliation). */
  unfinished(olderThanMs: number, limit: number): Promise<{ docId: string; state: DocState; attempts: number }[]>;
  /** Compare-and-set: `from` → `to` with an optional patch; false when the document is not in `from` any more. */
  transition(docId: string, from: DocState, to: DocState, patch?: StatePatch): Promise<boolean>;
  /** Writes the chunks and sets embedding → ready, in one transaction (see above). */
  complete(docId: string, chunks: readonly StoredChunk[], counts: DocCounts): Promise<boolean>;
  /** Chunks of a document, by index (tests and tools). */
  chunks(docId: string): Promise<Omit<StoredChunk, 'embedding'>[]>;
  /** Nearest chunks of ready documents the viewer may see, best first. */
  search(q: SearchQuery): Promise<SearchHit[]>;
  /** Documents per state. */
  stateCounts(): Promise<Record<DocState, number>>;
  close(): Promise<void>;
}

/** Canonical owner set: trimmed, unique, sorted. */
export function normalizeOwners(owners: readonly string[]): string[] {
  return [...new Set(owners.map((o) => o.trim()))].sort();
}

/** The key duplicates are found by (owners as a canonical JSON list). */
export function ownersKey(owners: readonly string[]): string {
  return JSON.stringify(normalizeOwners(owners));
}
