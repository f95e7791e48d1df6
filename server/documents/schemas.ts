/**
 * Schemas of the document routes: the search body is validated with zod;
 * the load body is validated by core/documents/intake.ts (it must report
 * entries one by one, which a schema cannot), so `LoadBodyDoc` only
 * documents it in the OpenAPI document.
 */
import { z } from 'zod';

const stringOrList = z.union([z.string(), z.array(z.string())]);

export const FileEntry = z.object({
  name: z.string().describe('File name; its extension selects the reader when `reader` is "auto".'),
  doc_id: z.union([z.string().uuid(), z.null()]).optional().describe('UUID for the document; null or absent: the server assigns one.'),
  bytes: z.string().describe('File content, base64 (standard or URL-safe alphabet, padding optional). "" when `path` is given.'),
  path: z.string().describe('File to import, inside a configured import root. "" when `bytes` is given.'),
  category: z.string().describe('Category the document is stored under.'),
  owners: z.union([z.string(), z.array(z.string()), z.null()]).optional().describe('Owner or owners; none: visible to everyone.'),
});

export const LoadBodyDoc = z.object({
  files: z.array(FileEntry).describe('Entries to import (at most documents.max_files_per_request).'),
  reader: z.union([z.string(), z.object({ type: z.string() }), z.null()]).optional().describe('"auto" (default) or a format: txt, md, html, pdf, docx, csv, json.'),
  chunker: z.union([z.string(), z.object({ type: z.string() }), z.null()]).optional().describe('"structure" (default: headings, paragraphs, sentences) or "tokens" (plain windows).'),
  embedder: z.union([z.string(), z.object({ name: z.string() }), z.null()]).optional().describe('"default" or the configured embedder\'s name.'),
  chunk_units: z.union([z.number().int(), z.null()]).optional().describe('Chunk size in embedder tokens (default min(256, embedder limit)).'),
  chunk_overlap: z.union([z.number().int(), z.null()]).optional().describe('Tokens shared by consecutive chunks (default min(32, chunk_units / 8); at most chunk_units / 2).'),
  wait_for_completion: z.union([z.boolean(), z.null()]).optional().describe('Answer after the accepted documents are ready or failed.'),
});

const Reported = FileEntry.extend({
  index: z.number().int().describe('Position in the request\'s `files`.'),
  sha256: z.string().optional(),
  format: z.string().optional(),
  reason: z.string().optional().describe('Why the entry is a duplicate or invalid (machine-readable).'),
  message: z.string().optional(),
  duplicate_of: z.string().optional(),
  state: z.string().optional().describe('With wait_for_completion: the final state.'),
  error: z.unknown().optional(),
});

export const LoadResponse = z.object({ accepted: z.array(Reported), duplicate: z.array(Reported), invalid: z.array(Reported) });

export const DocumentRecordDoc = z.object({
  doc_id: z.string(),
  name: z.string(),
  category: z.string(),
  owners: z.array(z.string()),
  state: z.enum(['queued', 'reading', 'chunking', 'embedding', 'ready', 'failed']),
  error: z.union([z.object({ code: z.string(), message: z.string() }), z.null()]),
  format: z.string(),
  source: z.enum(['bytes', 'path']),
  path: z.string(),
  sha256: z.string(),
  size_bytes: z.number(),
  options: z.object({ reader: z.string(), chunker: z.string(), chunk_units: z.number(), chunk_overlap: z.number(), embedder: z.string() }),
  counts: z.object({ chunks: z.number(), tokens: z.number(), characters: z.number(), pages: z.union([z.number(), z.null()]) }),
  attempts: z.number(),
  created_at: z.string(),
  updated_at: z.string(),
  started_at: z.union([z.string(), z.null()]),
  finished_at: z.union([z.string(), z.null()]),
});

export const SearchBody = z
  .object({
    query: z.string().min(1).max(16384).describe('Text to search for.'),
    top_k: z.number().int().min(1).max(100).optional().describe('Chunks to return (default 5).'),
    category: stringOrList.optional().describe('Only these categories.'),
    owners: stringOrList.optional().describe('Only documents owned by any of these (within what the caller may see).'),
  })
  .strict();

export const SearchResponse = z.object({
  results: z.array(
    z.object({
      score: z.number().describe('Cosine similarity, higher is closer.'),
      chunk: z.object({ index: z.number(), text: z.string(), tokens: z.number(), heading: z.union([z.string(), z.null()]), page: z.union([z.number(), z.null()]) }),
      document: z.object({ doc_id: z.string(), name: z.string(), category: z.string(), owners: z.array(z.string()) }),
    }),
  ),
});
