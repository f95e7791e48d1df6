/**
 * Shared types of the document pipeline (read → chunk → embed → store): the
 * document states, the record a client reads back, per-document processing
 * options, and the limits with their defaults.
 *
 * Why one module: the HTTP layer, the SQL store, the worker pool and the pure
 * pipeline all speak these shapes; keeping them here (portable, no Node APIs)
 * means the browser build can reuse the pipeline with another store.
 */

/** Processing states, in order; `ready` and `failed` are terminal. */
export const DOC_STATES = ['queued', 'reading', 'chunking', 'embedding', 'ready', 'failed'] as const;
export type DocState = (typeof DOC_STATES)[number];

/** Formats the readers understand. */
export const DOC_FORMATS = ['txt', 'md', 'html', 'pdf', 'docx', 'csv', 'json'] as const;
export type DocFormat = (typeof DOC_FORMATS)[number];

/** `structure`: chunks follow headings / paragraphs / sentences; `tokens`: plain token windows. */
export const CHUNKERS = ['structure', 'tokens'] as const;
export type ChunkerName = (typeof CHUNKERS)[number];

/** How one document is processed; fixed at acceptance and stored with it, so a resumed job does the same. */
export interface ProcessingOptions {
  /** `auto` (detected from the name, then the content) or a forced format. */
  reader: 'auto' | DocFormat;
  chunker: ChunkerName;
  /** Chunk size, in tokens of the embedder's tokenizer (special tokens excluded). */
  chunkUnits: number;
  /** Tokens shared by consecutive chunks (at most; see chunker.ts). */
  chunkOverlap: number;
  /** Embedder identity the vectors come from. */
  embedder: string;
}

/** A structured error kept on a failed document. */
export interface DocError {
  code: string;
  message: string;
}

/** Counts measured while processing (0 until known). */
export interface DocCounts {
  chunks: number;
  tokens: number;
  characters: number;
  /** Pages (PDF) or null when the format has none. */
  pages: number | null;
}

/** What the store keeps about one document (content bytes excluded). */
export interface DocumentRecord {
  docId: string;
  name: string;
  category: string;
  /** Sorted, unique; empty = no owner (visible to everyone). */
  owners: string[];
  sha256: string;
  sizeBytes: number;
  source: 'bytes' | 'path';
  /** The `path` the client gave ('' for bytes). */
  path: string;
  /** Detected or forced format. */
  format: DocFormat;
  options: ProcessingOptions;
  state: DocState;
  error: DocError | null;
  /** Times processing was started (a resumed document counts again). */
  attempts: number;
  counts: DocCounts;
  createdAt: Date;
  updatedAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
}

/** A document accepted by intake, ready to be recorded (content included). */
export interface NewDocument {
  docId: string;
  name: string;
  category: string;
  owners: string[];
  sha256: string;
  source: 'bytes' | 'path';
  path: string;
  format: DocFormat;
  options: ProcessingOptions;
  content: Uint8Array;
}

/** One chunk as stored: its place in the document, text, token count, structure hints and vector. */
export interface StoredChunk {
  index: number;
  text: string;
  tokens: number;
  /** Heading path in force where the chunk starts ("Guide > Install"), or null. */
  heading: string | null;
  page: number | null;
  embedding: Float32Array;
}

/** Limits of the load route; every one configurable (see server/documents/config.ts). */
export interface DocumentLimits {
  /** Largest file, in decoded bytes. */
  maxFileBytes: number;
  /** Most entries in one request's `files`. */
  maxFilesPerRequest: number;
  /** Largest request body, bytes (base64 inflates content by 4/3). */
  maxRequestBytes: number;
  /** Default chunk size in tokens (capped by the embedder's input limit). */
  chunkUnits: number;
  /** Default overlap in tokens (capped at chunk_units / 2). */
  chunkOverlap: number;
  /** Smallest chunk_units a request may ask for. */
  minChunkUnits: number;
  /** Categories allowed; empty = any non-empty name. */
  categories: string[];
  /** Longest a wait_for_completion request waits, ms. */
  maxWaitMs: number;
}

export const DEFAULT_LIMITS: DocumentLimits = {
  maxFileBytes: 16 * 1024 * 1024,
  maxFilesPerRequest: 256,
  maxRequestBytes: 64 * 1024 * 1024,
  chunkUnits: 256,
  chunkOverlap: 32,
  minChunkUnits: 8,
  categories: [],
  maxWaitMs: 300_000,
};

/** A search hit: one chunk, its score (cosine similarity) and its document. */
export interface SearchHit {
  score: number;
  chunk: { index: number; text: string; tokens: number; heading: string | null; page: number | null };
  document: { docId: string; name: string; category: string; owners: string[] };
}

/**
 * Who is asking. `enforce` false (auth off and no owner header) sees every
 * document; otherwise only documents without owners or owned by any of
 * `owners` (the owner header's one, or the API key's list). `bound`: the
 * owners come from the API key, which may act only as them.
 */
export interface Viewer {
  owners: readonly string[];
  enforce: boolean;
  bound?: boolean;
}

export interface SearchQuery {
  vector: Float32Array;
  topK: number;
  /** Only these categories (any of them); null = all. */
  categories: string[] | null;
  /** Only documents owned by any of these; null = no owner filter. */
  owners: string[] | null;
  viewer: Viewer;
}

/** True when `viewer` may see a document with `owners`. */
export function canSee(viewer: Viewer, owners: readonly string[]): boolean {
  return !viewer.enforce || owners.length === 0 || owners.some((o) => viewer.owners.includes(o));
}
