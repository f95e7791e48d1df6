/**
 * DOCX → blocks: mammoth converts the document to plain semantic HTML
 * (Heading 1–6 styles → h1–h6, lists → li, tables → tr/td), which the HTML
 * reader turns into blocks. Images are dropped (no OCR). mammoth is loaded
 * lazily: it is only needed when a DOCX arrives.
 */
import { DocumentReadError } from '../errors.ts';
import { htmlBlocks } from './html.ts';
import type { ReadResult } from './blocks.ts';

interface Mammoth {
  convertToHtml(input: { buffer: Uint8Array } | { arrayBuffer: ArrayBuffer }, options?: Record<string, unknown>): Promise<{ value: string }>;
}

let mammoth: Promise<Mammoth> | undefined;

function loadMammoth(): Promise<Mammoth> {
  return (mammoth ??= import('mammoth').then((m: unknown) => ((m as { default?: Mammoth }).default ?? m) as Mammoth));
}

export async function readDocx(bytes: Uint8Array): Promise<ReadResult> {
  const lib = await loadMammoth();
  let html: string;
  try {
    const isNode = typeof (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node === 'string';
    // Node's mammoth reads `buffer` (any Uint8Array); its browser build reads `arrayBuffer`.
    const input = isNode ? { buffer: bytes } : { arrayBuffer: bytes.slice().buffer };
    html = (await lib.convertToHtml(input, { ignoreEmptyParagraphs: true })).value;
  } catch (e) {
    throw new DocumentReadError('docx', (e as Error).message);
  }
  return { format: 'docx', blocks: htmlBlocks(html), pages: null };
}
