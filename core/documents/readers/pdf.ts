/**
 * PDF → blocks through pdfjs-dist (legacy build: runs in Node without a
 * worker, and in browsers). Text items are grouped into lines by their
 * baseline, lines into paragraphs by vertical gaps; a line set clearly larger
 * than the body text (≥ 1.25 × the most common size) and short is a heading,
 * its level ranked by size. Every block carries its page number.
 *
 * Scanned PDFs (images only) yield no text: the pipeline reports them as
 * `document_empty` rather than inventing OCR.
 */
import { DocumentReadError } from '../errors.ts';
import type { Block, ReadResult } from './blocks.ts';

interface TextItem {
  str: string;
  transform: number[];
  width: number;
  height: number;
  hasEOL: boolean;
}

interface Line {
  text: string;
  size: number;
  y: number;
  page: number;
}

type PdfJs = typeof import('pdfjs-dist/legacy/build/pdf.mjs');
let pdfjs: Promise<PdfJs> | undefined;

function loadPdfJs(): Promise<PdfJs> {
  return (pdfjs ??= import('pdfjs-dist/legacy/build/pdf.mjs'));
}

function isTextItem(x: unknown): x is TextItem {
  return typeof x === 'object' && x !== null && typeof (x as TextItem).str === 'string' && Array.isArray((x as TextItem).transform);
}

/** Lines of one page, top to bottom as the content stream draws them. */
function pageLines(items: TextItem[], page: number): Line[] {
  const lines: Line[] = [];
  let cur: Line | null = null;
  let lastRight = 0;
  for (const it of items) {
    const size = Math.abs(it.transform[3] ?? it.height) || it.height;
    const x = it.transform[4] ?? 0;
    const y = it.transform[5] ?? 0;
    if (it.str) {
      if (cur && Math.abs(y - cur.y) <= Math.max(cur.size, size) * 0.5) {
        const gap = x - lastRight;
        if (gap > size * 0.15 && !cur.text.endsWith(' ') && !it.str.startsWith(' ')) cur.text += ' ';
        cur.text += it.str;
        cur.size = Math.max(cur.size, size);
      } else {
        if (cur) lines.push(cur);
        cur = { text: it.str, size, y, page };
      }
      lastRight = x + it.width;
    }
    if (it.hasEOL && cur) {
      lines.push(cur);
      cur = null;
    }
  }
  if (cur) lines.push(cur);
  return lines.map((l) => ({ ...l, text: l.text.replace(/\s+/g, ' ').trim() })).filter((l) => l.text);
}

/** Lines → heading / paragraph blocks. */
function linesToBlocks(lines: Line[]): Block[] {
  const chars = new Map<number, number>();
  for (const l of lines) chars.set(Math.round(l.size), (chars.get(Math.round(l.size)) ?? 0) + l.text.length);
  const body = [...chars.entries()].sort((a, b) => b[1] - a[1])[0]?.[0] ?? 12;
  const headingSizes = [...new Set(lines.filter((l) => l.size >= body * 1.25 && l.text.length <= 200).map((l) => Math.round(l.size)))].sort((a, b) => b - a);
  const blocks: Block[] = [];
  let para: Line[] = [];
  const flush = (): void => {
    if (!para.length) return;
    let text = '';
    for (const l of para) text = !text ? l.text : text.endsWith('-') && /^[a-z]/.test(l.text) ? text.slice(0, -1) + l.text : `${text} ${l.text}`;
    blocks.push({ kind: 'paragraph', text, page: para[0]!.page });
    para = [];
  };
  for (const l of lines) {
    const rank = headingSizes.indexOf(Math.round(l.size));
    if (l.size >= body * 1.25 && rank >= 0) {
      flush();
      const prev = blocks[blocks.length - 1];
      // A heading wrapped over two lines: one heading.
      if (prev?.kind === 'heading' && prev.level === Math.min(rank + 1, 6) && prev.page === l.page) prev.text += ` ${l.text}`;
      else blocks.push({ kind: 'heading', text: l.text, level: Math.min(rank + 1, 6), page: l.page });
      continue;
    }
    const last = para[para.length - 1];
    if (last && (last.page !== l.page || last.y - l.y > Math.max(last.size, l.size) * 1.9 || l.y > last.y)) flush();
    para.push(l);
  }
  flush();
  return blocks;
}

export async function readPdf(bytes: Uint8Array, signal?: AbortSignal): Promise<ReadResult> {
  const lib = await loadPdfJs();
  // pdfjs may transfer (detach) the buffer it is given: hand it a copy.
  const task = lib.getDocument({ data: bytes.slice(), isEvalSupported: false, disableFontFace: true, useSystemFonts: false, verbosity: 0, stopAtErrors: false });
  let doc;
  try {
    doc = await task.promise;
  } catch (e) {
    throw new DocumentReadError('pdf', (e as Error).message);
  }
  try {
    const lines: Line[] = [];
    for (let p = 1; p <= doc.numPages; p++) {
      if (signal?.aborted) throw signal.reason;
      const page = await doc.getPage(p);
      const content = await page.getTextContent();
      lines.push(...pageLines((content.items as unknown[]).filter(isTextItem), p));
      page.cleanup();
    }
    return { format: 'pdf', blocks: linesToBlocks(lines), pages: doc.numPages };
  } catch (e) {
    if (signal?.aborted) throw e;
    throw new DocumentReadError('pdf', (e as Error).message);
  } finally {
    await doc.destroy();
  }
}
