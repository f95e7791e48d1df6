/**
 * Format detection and dispatch to the readers.
 *
 * Detection (`reader: "auto"`): the file name's extension first, then the
 * content's magic bytes (%PDF, a zip holding word/, an HTML start tag, JSON),
 * then "valid text" → txt. Binary content of no known format is
 * `unsupported_format` — decided at acceptance, so such an entry is reported
 * invalid rather than failing later.
 */
import { DocumentReadError } from '../errors.ts';
import type { DocFormat } from '../types.ts';
import { readTxt, type ReadResult } from './blocks.ts';
import { readDocx } from './docx.ts';
import { readHtml } from './html.ts';
import { readMarkdown } from './markdown.ts';
import { readPdf } from './pdf.ts';
import { readCsv, readJson } from './tabular.ts';

export type { Block, BlockKind, ReadResult } from './blocks.ts';

const BY_EXTENSION: Record<string, DocFormat> = {
  txt: 'txt', text: 'txt', log: 'txt', rst: 'txt',
  md: 'md', markdown: 'md', mdx: 'md', mkd: 'md',
  html: 'html', htm: 'html', xhtml: 'html',
  pdf: 'pdf',
  docx: 'docx',
  csv: 'csv', tsv: 'csv',
  json: 'json', jsonl: 'json', ndjson: 'json',
};

function startsWith(b: Uint8Array, s: string): boolean {
  for (let i = 0; i < s.length; i++) if (b[i] !== s.charCodeAt(i)) return false;
  return true;
}

/** Latin-1 view of the first bytes, for sniffing. */
function head(b: Uint8Array, n = 512): string {
  return String.fromCharCode(...b.subarray(0, n));
}

/** Whether the bytes contain the ASCII string `s` (zip member names are stored plainly). */
function contains(b: Uint8Array, s: string): boolean {
  const first = s.charCodeAt(0);
  outer: for (let i = b.indexOf(first); i >= 0 && i <= b.length - s.length; i = b.indexOf(first, i + 1)) {
    for (let k = 1; k < s.length; k++) if (b[i + k] !== s.charCodeAt(k)) continue outer;
    return true;
  }
  return false;
}

function looksBinary(b: Uint8Array): boolean {
  const n = Math.min(b.length, 8192);
  if (b[0] === 0xff && b[1] === 0xfe) return false; // UTF-16 text
  if (b[0] === 0xfe && b[1] === 0xff) return false;
  for (let i = 0; i < n; i++) if (b[i] === 0) return true;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(b.subarray(0, n - (n < b.length ? 4 : 0)));
    return false;
  } catch {
    return true;
  }
}

/** The format of a file, or null when it is none the readers know. */
export function detectFormat(name: string, bytes: Uint8Array): DocFormat | null {
  const ext = /\.([A-Za-z0-9]+)$/.exec(name)?.[1]?.toLowerCase();
  if (ext && BY_EXTENSION[ext]) return BY_EXTENSION[ext]!;
  if (startsWith(bytes, '%PDF-')) return 'pdf';
  if (startsWith(bytes, 'PK\x03\x04')) return contains(bytes, 'word/') ? 'docx' : null;
  if (looksBinary(bytes)) return null;
  const start = head(bytes).replace(/^\ufeff|^\xef\xbb\xbf/, '').trimStart().toLowerCase();
  if (start.startsWith('<!doctype html') || start.startsWith('<html') || /^<(head|body|p|div|h[1-6])[\s>]/.test(start)) return 'html';
  if (start.startsWith('{') || start.startsWith('[')) return 'json';
  return 'txt';
}

export async function readDocument(bytes: Uint8Array, format: DocFormat, signal?: AbortSignal): Promise<ReadResult> {
  switch (format) {
    case 'txt':
      return readTxt(bytes);
    case 'md':
      return readMarkdown(bytes);
    case 'html':
      return readHtml(bytes);
    case 'pdf':
      return readPdf(bytes, signal);
    case 'docx':
      return readDocx(bytes);
    case 'csv':
      return readCsv(bytes);
    case 'json':
      return readJson(bytes);
    default:
      throw new DocumentReadError(String(format), 'no reader for this format');
  }
}
