/**
 * Validation of `POST /api/v1/documents` (service-interface §2, §4.1).
 *
 * Two levels, because the contract has two outcomes:
 *  - the request as a whole (`files` missing or not a list, too many files,
 *    bad option types or values, unknown top-level fields) → 400 with an
 *    InvalidRequestError naming the field;
 *  - each file entry → accepted, or invalid with a machine-readable
 *    `reason` (duplicates are decided later, against the store).
 *
 * Decisions (docs/documents.md): `bytes` is base64; give `bytes` or `path`
 * (the unused one empty or absent); `doc_id` is a UUID or null; `owners` is
 * a string or a list of strings; `category` is any non-empty name (or one of
 * the configured categories); the format is forced by `reader` or detected
 * from the name and content. Paths are read by an injected PathReader (the
 * server confines it to the import roots), at acceptance, so an accepted
 * document never depends on a file that may change later.
 */
import { InvalidRequestError } from '../errors.ts';
import { base64DecodedLength, decodeBase64 } from './base64.ts';
import { detectFormat } from './readers/index.ts';
import { normalizeOwners } from './store.ts';
import { CHUNKERS, DOC_FORMATS, type ChunkerName, type DocFormat, type DocumentLimits } from './types.ts';

export interface LoadOptions {
  reader: 'auto' | DocFormat;
  chunker: ChunkerName;
  chunkUnits: number;
  chunkOverlap: number;
  embedder: string;
  waitForCompletion: boolean;
}

export interface ValidEntry {
  name: string;
  docId: string | null;
  category: string;
  owners: string[];
  source: 'bytes' | 'path';
  path: string;
  content: Uint8Array;
  format: DocFormat;
  sha256: string;
}

export type EntryResult = { ok: true; entry: ValidEntry } | { ok: false; reason: string; message: string };

export type PathResult = { ok: true; bytes: Uint8Array } | { ok: false; reason: string; message: string };
/** Reads a file named by an entry's `path`, refusing anything outside the import roots or over `maxBytes`. */
export type PathReader = (path: string, maxBytes: number) => Promise<PathResult>;

const TOP_FIELDS = new Set(['files', 'reader', 'chunker', 'embedder', 'chunk_units', 'chunk_overlap', 'wait_for_completion']);
const ENTRY_FIELDS = new Set(['name', 'doc_id', 'bytes', 'path', 'category', 'owners']);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_NAME = 1024;
const MAX_CATEGORY = 128;
const MAX_OWNER = 256;
const MAX_OWNERS = 64;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const bad = (code: string, field: string, message: string, details: Record<string, unknown> = {}): never => {
  throw new InvalidRequestError(code, `${field}: ${message}`, { field, ...details });
};

/** A string option, or an object `{[key]: string}` (the spec allows both forms). */
function named(v: unknown, field: string, key: string): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v === 'string') return v.trim() || null;
  if (isObject(v)) {
    for (const k of Object.keys(v)) if (k !== key) bad('unknown_field', `${field}.${k}`, `unknown field; ${field} takes {"${key}": ...}`);
    const n = v[key];
    if (n === undefined || n === null) return null;
    if (typeof n === 'string') return n.trim() || null;
  }
  return bad('invalid_request', field, `expected a string or {"${key}": string}`);
}

function intOrNull(v: unknown, field: string): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isInteger(v)) bad('invalid_request', field, 'expected an integer or null');
  return v as number;
}

/** Whole-request checks; returns the options (defaults applied) and the raw entries. */
export function parseLoadRequest(body: unknown, limits: DocumentLimits, embedder: { id: string; maxTokens: number; aliases?: readonly string[] }): { options: LoadOptions; files: unknown[] } {
  if (!isObject(body)) bad('invalid_request', '(body)', 'expected a JSON object');
  const b = body as Record<string, unknown>;
  for (const k of Object.keys(b)) if (!TOP_FIELDS.has(k)) bad('unknown_field', k, `unknown field; valid: ${[...TOP_FIELDS].join(', ')}`);
  if (!Array.isArray(b.files)) bad('invalid_request', 'files', 'required: a list of file entries');
  const files = b.files as unknown[];
  if (files.length === 0) bad('invalid_request', 'files', 'at least one file entry is required');
  if (files.length > limits.maxFilesPerRequest) bad('too_many_files', 'files', `${files.length} entries; the limit is ${limits.maxFilesPerRequest} per request`, { limit: limits.maxFilesPerRequest });

  const reader = named(b.reader, 'reader', 'type') ?? 'auto';
  if (reader !== 'auto' && !(DOC_FORMATS as readonly string[]).includes(reader)) bad('unknown_reader', 'reader', `unknown reader "${reader}"`, { valid: ['auto', ...DOC_FORMATS] });
  const chunker = named(b.chunker, 'chunker', 'type') ?? 'structure';
  if (!(CHUNKERS as readonly string[]).includes(chunker)) bad('unknown_chunker', 'chunker', `unknown chunker "${chunker}"`, { valid: [...CHUNKERS] });
  const emb = named(b.embedder, 'embedder', 'name') ?? 'default';
  if (emb !== 'default' && emb !== embedder.id && !(embedder.aliases ?? []).includes(emb)) bad('unknown_embedder', 'embedder', `unknown embedder "${emb}"`, { valid: ['default', embedder.id, ...(embedder.aliases ?? [])] });

  const maxUnits = embedder.maxTokens;
  const units = intOrNull(b.chunk_units, 'chunk_units') ?? Math.min(limits.chunkUnits, maxUnits);
  if (units < limits.minChunkUnits || units > maxUnits) bad('invalid_chunk_units', 'chunk_units', `must be in [${limits.minChunkUnits}, ${maxUnits}] (the embedder's input limit)`, { min: limits.minChunkUnits, max: maxUnits });
  const overlap = intOrNull(b.chunk_overlap, 'chunk_overlap') ?? Math.min(limits.chunkOverlap, Math.floor(units / 8));
  if (overlap < 0 || overlap * 2 > units) bad('invalid_chunk_overlap', 'chunk_overlap', `must be in [0, ${Math.floor(units / 2)}] (half of chunk_units)`, { min: 0, max: Math.floor(units / 2) });
  const wait = b.wait_for_completion;
  if (wait !== undefined && wait !== null && typeof wait !== 'boolean') bad('invalid_request', 'wait_for_completion', 'expected a boolean');

  return {
    options: { reader: reader as LoadOptions['reader'], chunker: chunker as ChunkerName, chunkUnits: units, chunkOverlap: overlap, embedder: embedder.id, waitForCompletion: wait === true },
    files,
  };
}

export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>));
  return Array.from(d, (x) => x.toString(16).padStart(2, '0')).join('');
}

const invalid = (reason: string, message: string): EntryResult => ({ ok: false, reason, message });

/**
 * Text a database column can hold and a person can read: no control
 * characters (NUL, which PostgreSQL refuses in text, included) and no lone
 * UTF-16 surrogate (which has no UTF-8 form).
 */
export function isStorableText(s: string): boolean {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this check refuses
  return !/[\0-\x1f\x7f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);
}

/** Owners as given: a string or a list of strings (null / absent: none); null when malformed. */
export function parseOwners(v: unknown): string[] | null {
  if (v === undefined || v === null) return [];
  const list = typeof v === 'string' ? [v] : Array.isArray(v) ? v : null;
  if (!list || list.length > MAX_OWNERS || !list.every((o) => typeof o === 'string' && o.trim() && o.length <= MAX_OWNER && isStorableText(o))) return null;
  return normalizeOwners(list as string[]);
}

/** Checks one file entry and loads its content (decoded bytes or the file at `path`). */
export async function validateEntry(raw: unknown, limits: DocumentLimits, reader: LoadOptions['reader'], readPath: PathReader): Promise<EntryResult> {
  if (!isObject(raw)) return invalid('invalid_entry', 'a file entry must be a JSON object');
  for (const k of Object.keys(raw)) if (!ENTRY_FIELDS.has(k)) return invalid('unknown_field', `unknown field "${k}"; valid: ${[...ENTRY_FIELDS].join(', ')}`);
  const { name, category, doc_id: docId, bytes, path } = raw;
  if (name === undefined || name === null || name === '') return invalid('missing_name', '"name" is required');
  if (typeof name !== 'string' || name.length > MAX_NAME || /[\0\n\r]/.test(name)) return invalid('invalid_name', `"name" must be a one-line string of at most ${MAX_NAME} characters`);
  if (category === undefined || category === null || (typeof category === 'string' && !category.trim())) return invalid('missing_category', '"category" is required');
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this check refuses
  if (typeof category !== 'string' || category.length > MAX_CATEGORY || /[\0-\x1f]/.test(category)) return invalid('invalid_category', `"category" must be a string of at most ${MAX_CATEGORY} characters`);
  if (limits.categories.length && !limits.categories.includes(category)) return invalid('unknown_category', `unknown category "${category}"; configured: ${limits.categories.join(', ')}`);
  const owners = parseOwners(raw.owners);
  if (!owners) return invalid('invalid_owners', `"owners" must be a non-empty string or a list of at most ${MAX_OWNERS} such strings (each at most ${MAX_OWNER} characters)`);
  if (docId !== undefined && docId !== null && (typeof docId !== 'string' || !UUID.test(docId))) return invalid('invalid_doc_id', '"doc_id" must be a UUID string or null');
  if (bytes !== undefined && bytes !== null && typeof bytes !== 'string') return invalid('invalid_bytes', '"bytes" must be a base64 string');
  if (path !== undefined && path !== null && typeof path !== 'string') return invalid('invalid_path', '"path" must be a string');
  const hasBytes = typeof bytes === 'string' && bytes.length > 0;
  const hasPath = typeof path === 'string' && path.length > 0;
  if (hasBytes && hasPath) return invalid('conflicting_content', 'give "bytes" or "path", not both (leave the unused one empty)');
  if (!hasBytes && !hasPath) return invalid('missing_content', 'give the file content in "bytes" (base64) or a "path" to import');

  let content: Uint8Array;
  if (hasBytes) {
    const size = base64DecodedLength(bytes);
    if (size < 0) return invalid('invalid_base64', '"bytes" is not valid base64');
    if (size > limits.maxFileBytes) return invalid('file_too_large', `the file is ${size} bytes; the limit is ${limits.maxFileBytes}`);
    const decoded = decodeBase64(bytes);
    if (!decoded) return invalid('invalid_base64', '"bytes" is not valid base64');
    content = decoded;
  } else {
    const r = await readPath(path as string, limits.maxFileBytes);
    if (!r.ok) return invalid(r.reason, r.message);
    content = r.bytes;
  }
  if (content.length === 0) return invalid('empty_file', 'the file is empty');
  const format = reader === 'auto' ? detectFormat(name, content) : reader;
  if (!format) return invalid('unsupported_format', `cannot tell the format of "${name}"; supported: ${DOC_FORMATS.join(', ')} (or force one with "reader")`);
  return {
    ok: true,
    entry: { name, docId: typeof docId === 'string' ? docId.toLowerCase() : null, category, owners, source: hasBytes ? 'bytes' : 'path', path: hasPath ? (path as string) : '', content, format, sha256: await sha256Hex(content) },
  };
}
