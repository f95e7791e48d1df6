/**
 * What every reader returns: the document's text as a list of blocks with
 * structure hints (headings with levels, paragraphs, list items, table rows,
 * code, page numbers). The structure-aware chunker keeps headings with what
 * follows them and prefers to cut between blocks; the token chunker only
 * uses the text. Also the text decoding every text format shares.
 */
import type { DocFormat } from '../types.ts';

export type BlockKind = 'heading' | 'paragraph' | 'list_item' | 'table_row' | 'code';

export interface Block {
  kind: BlockKind;
  text: string;
  /** Heading level, 1 (top) to 6. */
  level?: number;
  /** 1-based page (PDF). */
  page?: number;
}

export interface ReadResult {
  format: DocFormat;
  blocks: Block[];
  /** Page count for paged formats, else null. */
  pages: number | null;
}

/**
 * Bytes → string: UTF-8 unless a UTF-16 byte-order mark says otherwise; a
 * UTF-8 BOM is dropped; invalid sequences become U+FFFD rather than failing
 * (a stray byte should not lose a whole document). Newlines become \n.
 */
export function decodeText(bytes: Uint8Array): string {
  let enc = 'utf-8';
  let start = 0;
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) start = 3;
  else if (bytes[0] === 0xff && bytes[1] === 0xfe) [enc, start] = ['utf-16le', 2];
  else if (bytes[0] === 0xfe && bytes[1] === 0xff) [enc, start] = ['utf-16be', 2];
  return new TextDecoder(enc).decode(bytes.subarray(start)).replace(/\r\n?/g, '\n');
}

/** Collapses runs of spaces / tabs (not newlines) and trims. */
export function tidy(s: string): string {
  return s.replace(/[ \t\f\v\u00a0]+/g, ' ').replace(/ *\n */g, '\n').trim();
}

/** Adds a block unless its text is empty after tidying. */
export function push(blocks: Block[], kind: BlockKind, text: string, extra: { level?: number; page?: number } = {}): void {
  const t = kind === 'code' ? text.replace(/^\n+|\s+$/g, '') : tidy(text);
  if (t) blocks.push({ kind, text: t, ...extra });
}

/** Plain text: paragraphs are separated by blank lines. */
export function readTxt(bytes: Uint8Array): ReadResult {
  const blocks: Block[] = [];
  for (const para of decodeText(bytes).split(/\n[ \t]*\n/)) push(blocks, 'paragraph', para);
  return { format: 'txt', blocks, pages: null };
}
