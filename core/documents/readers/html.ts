/**
 * HTML → blocks with a small tolerant scanner (no DOM, no dependency):
 * headings h1–h6 keep their level, li → list items, tr → table rows (cells
 * joined by " | "), pre → code (whitespace kept), other block elements
 * (p, div, section, blockquote, …) end a paragraph, br is a line break.
 * script / style / template / noscript / svg / head content is dropped
 * (the <title> becomes a level-1 heading when the body has none). Entities
 * are decoded (numeric, and the common named ones). Malformed markup never
 * throws: an unmatched `<` is text, unclosed elements end at the end.
 *
 * Also the DOCX reader's second half: mammoth turns DOCX into simple HTML.
 */
import { push, decodeText, type Block, type BlockKind, type ReadResult } from './blocks.ts';

const NAMED: Record<string, string> = {
  amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0', copy: '©', reg: '®', trade: '™',
  hellip: '…', mdash: '—', ndash: '–', lsquo: '‘', rsquo: '’', ldquo: '“', rdquo: '”', laquo: '«',
  raquo: '»', euro: '€', pound: '£', yen: '¥', cent: '¢', times: '×', divide: '÷', deg: '°', para: '¶',
  sect: '§', middot: '·', bull: '•', shy: '', zwj: '\u200d', zwnj: '\u200c', thinsp: '\u2009',
  ensp: '\u2002', emsp: '\u2003', iexcl: '¡', iquest: '¿', plusmn: '±', micro: 'µ', frac12: '½',
  frac14: '¼', frac34: '¾', larr: '←', rarr: '→', uarr: '↑', darr: '↓', check: '✓',
};

export function decodeHtmlEntities(s: string): string {
  if (!s.includes('&')) return s;
  return s.replace(/&(#[xX][0-9a-fA-F]{1,6}|#[0-9]{1,7}|[a-zA-Z][a-zA-Z0-9]{1,31});?/g, (m, e: string) => {
    if (e[0] === '#') {
      const cp = e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
      return cp > 0 && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff) ? String.fromCodePoint(cp) : '\ufffd';
    }
    return NAMED[e] ?? NAMED[e.toLowerCase()] ?? m;
  });
}

/** Elements whose content is not document text. */
const SKIP = new Set(['script', 'style', 'template', 'noscript', 'svg', 'math', 'iframe', 'object', 'canvas', 'select', 'textarea', 'button']);
/** Raw-text elements: their content is scanned for the closing tag only. */
const RAW = new Set(['script', 'style', 'textarea', 'title', 'xmp', 'noscript', 'template']);
const BLOCK = new Set([
  'p', 'div', 'section', 'article', 'aside', 'header', 'footer', 'main', 'nav', 'blockquote', 'figure',
  'figcaption', 'dl', 'dt', 'dd', 'ul', 'ol', 'table', 'thead', 'tbody', 'tfoot', 'caption', 'form',
  'fieldset', 'legend', 'address', 'details', 'summary', 'hr', 'body', 'html', 'center', 'menu',
]);
const VOID = new Set(['br', 'hr', 'img', 'input', 'meta', 'link', 'area', 'base', 'col', 'embed', 'param', 'source', 'track', 'wbr']);

const TAG = /<\/?([a-zA-Z][a-zA-Z0-9:-]*)((?:\s+[^\s"'>/=]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'=<>`]+))?)*)\s*\/?>/y;

export function readHtml(bytes: Uint8Array, format: 'html' | 'docx' = 'html'): ReadResult {
  return { format, blocks: htmlBlocks(decodeText(bytes)), pages: null };
}

/** The blocks of an HTML string. */
export function htmlBlocks(html: string): Block[] {
  const blocks: Block[] = [];
  let buf = '';
  let kind: BlockKind = 'paragraph';
  let level: number | undefined;
  let pre = 0;
  let cells = 0; // cells seen in the current table row
  let skip = 0; // depth inside SKIP elements
  let inHead = false;
  let title = '';

  const flush = (): void => {
    const text = kind === 'code' ? buf : buf.replace(/[ \t\r\f\v]+/g, ' ');
    push(blocks, kind, text, level !== undefined ? { level } : {});
    buf = '';
    kind = pre ? 'code' : 'paragraph';
    level = undefined;
  };
  const text = (t: string): void => {
    if (skip || inHead) return;
    buf += pre ? decodeHtmlEntities(t) : decodeHtmlEntities(t.replace(/\s+/g, ' '));
  };

  let i = 0;
  while (i < html.length) {
    const lt = html.indexOf('<', i);
    if (lt < 0) {
      text(html.slice(i));
      break;
    }
    if (lt > i) text(html.slice(i, lt));
    i = lt;
    if (html.startsWith('<!--', i)) {
      const end = html.indexOf('-->', i + 4);
      i = end < 0 ? html.length : end + 3;
      continue;
    }
    if (html.startsWith('<![CDATA[', i)) {
      const end = html.indexOf(']]>', i + 9);
      text(html.slice(i + 9, end < 0 ? html.length : end));
      i = end < 0 ? html.length : end + 3;
      continue;
    }
    if (html[i + 1] === '!' || html[i + 1] === '?') {
      const end = html.indexOf('>', i);
      i = end < 0 ? html.length : end + 1;
      continue;
    }
    TAG.lastIndex = i;
    const m = TAG.exec(html);
    if (!m) {
      text('<');
      i++;
      continue;
    }
    i = TAG.lastIndex;
    const name = m[1]!.toLowerCase();
    const closing = m[0][1] === '/';
    const selfClosing = m[0].endsWith('/>');

    if (!closing && RAW.has(name)) {
      const close = new RegExp(`</${name}`, 'gi'); // not toLowerCase(): it can change string lengths
      close.lastIndex = i;
      const end = close.exec(html)?.index ?? -1;
      const content = html.slice(i, end < 0 ? html.length : end);
      if (name === 'title' && !title) title = decodeHtmlEntities(content.replace(/\s+/g, ' ').trim());
      if (name === 'textarea' && !skip && !inHead) buf += ` ${decodeHtmlEntities(content)} `;
      i = end < 0 ? html.length : html.indexOf('>', end) + 1 || html.length;
      continue;
    }
    if (name === 'head') {
      inHead = !closing;
      continue;
    }
    if (SKIP.has(name)) {
      if (!selfClosing && !VOID.has(name)) skip = Math.max(0, skip + (closing ? -1 : 1));
      continue;
    }
    if (skip || inHead) continue;

    if (name === 'br') {
      buf += '\n';
    } else if (/^h[1-6]$/.test(name)) {
      flush();
      if (!closing) {
        kind = 'heading';
        level = Number(name[1]);
      }
    } else if (name === 'li') {
      flush();
      if (!closing) kind = 'list_item';
    } else if (name === 'tr') {
      flush();
      cells = 0;
      if (!closing) kind = 'table_row';
    } else if (name === 'td' || name === 'th') {
      if (!closing && cells++ > 0) buf += ' | ';
      else if (closing) buf += ' ';
    } else if (name === 'pre') {
      flush();
      pre = Math.max(0, pre + (closing ? -1 : 1));
      kind = pre ? 'code' : 'paragraph';
    } else if (BLOCK.has(name)) {
      if (kind !== 'table_row' || name === 'table') flush();
    } else if (!VOID.has(name) && !closing) {
      // inline element: nothing to do (its text flows on)
    }
  }
  flush();
  if (title && !blocks.some((b) => b.kind === 'heading' && b.level === 1)) blocks.unshift({ kind: 'heading', text: title, level: 1 });
  return blocks;
}
