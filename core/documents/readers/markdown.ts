/**
 * Markdown → blocks, line by line (CommonMark's block structure, simplified):
 * ATX (`# Title`) and setext (underlined) headings, fenced code, list items
 * (with their continuation lines), block quotes, pipe tables (one block per
 * row, the separator row dropped), thematic breaks and paragraphs. Inline
 * markup is reduced to its visible text: links and images keep their text /
 * alt, emphasis, code spans and HTML tags lose their markers. Front matter
 * (a leading `---` … `---`) and link reference definitions are skipped.
 *
 * Why not a Markdown library: none is installed, and retrieval only needs the
 * text and its structure, not HTML.
 */
import { decodeHtmlEntities } from './html.ts';
import { push, decodeText, type Block, type ReadResult } from './blocks.ts';

/** Visible text of one line of inline Markdown. */
export function mdInline(s: string): string {
  return decodeHtmlEntities(
    s
      .replace(/!\[([^\]]*)\]\([^)]*\)/g, '$1') // images → alt
      .replace(/\[([^\]]+)\]\([^)]*\)/g, '$1') // links → text
      .replace(/\[([^\]]+)\]\[[^\]]*\]/g, '$1') // reference links
      .replace(/<(https?:\/\/[^>\s]+)>/g, '$1') // autolinks
      .replace(/<\/?[a-zA-Z][^>]*>/g, '') // inline HTML
      .replace(/(`+)(.+?)\1/g, '$2') // code spans
      .replace(/(\*\*|__)(?=\S)(.+?)(?<=\S)\1/g, '$2')
      .replace(/(^|[^\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?!\w)/g, '$1$2')
      .replace(/(^|[^\w])_(?=\S)([^_]+?)(?<=\S)_(?!\w)/g, '$1$2')
      .replace(/~~(.+?)~~/g, '$1')
      .replace(/\\([\\`*_{}[\]()#+\-.!|>~])/g, '$1'),
  );
}

const ATX = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const FENCE = /^ {0,3}(`{3,}|~{3,})/;
const LIST = /^(\s*)(?:[-*+]|\d{1,9}[.)])[ \t]+(.*)$/;
const HR = /^ {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$/;
const SETEXT = /^ {0,3}(=+|-+)[ \t]*$/;
const TABLE_SEP = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;
const LINK_DEF = /^ {0,3}\[[^\]]+\]:\s+\S/;

function tableCells(line: string): string[] {
  return line
    .trim()
    .replace(/^\||\|$/g, '')
    .split(/(?<!\\)\|/)
    .map((c) => mdInline(c.trim()))
    .filter(Boolean);
}

export function readMarkdown(bytes: Uint8Array): ReadResult {
  const lines = decodeText(bytes).split('\n');
  const blocks: Block[] = [];
  let i = 0;
  if (lines[0]?.trim() === '---') {
    const end = lines.findIndex((l, k) => k > 0 && /^(---|\.\.\.)\s*$/.test(l));
    if (end > 0) i = end + 1;
  }
  let para: string[] = [];
  let paraKind: 'paragraph' | 'list_item' = 'paragraph';
  const flush = (): void => {
    if (para.length) push(blocks, paraKind, para.map(mdInline).join('\n'));
    para = [];
    paraKind = 'paragraph';
  };
  for (; i < lines.length; i++) {
    const line = lines[i]!;
    const fence = FENCE.exec(line);
    if (fence) {
      flush();
      const close = new RegExp(`^ {0,3}${fence[1]![0] === '`' ? '`' : '~'}{${fence[1]!.length},}\\s*$`);
      const code: string[] = [];
      for (i++; i < lines.length && !close.test(lines[i]!); i++) code.push(lines[i]!);
      push(blocks, 'code', code.join('\n'));
      continue;
    }
    if (!line.trim()) {
      flush();
      continue;
    }
    const atx = ATX.exec(line);
    if (atx) {
      flush();
      push(blocks, 'heading', mdInline(atx[2] ?? ''), { level: atx[1]!.length });
      continue;
    }
    const setext = SETEXT.exec(line);
    if (setext && para.length && paraKind === 'paragraph') {
      const text = para.map(mdInline).join(' ');
      para = [];
      push(blocks, 'heading', text, { level: setext[1]![0] === '=' ? 1 : 2 });
      continue;
    }
    if (HR.test(line)) {
      flush();
      continue;
    }
    if (LINK_DEF.test(line) && !para.length) continue;
    if (line.includes('|') && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]!) && lines[i + 1]!.includes('-')) {
      flush();
      push(blocks, 'table_row', tableCells(line).join(' | '));
      for (i += 2; i < lines.length && lines[i]!.includes('|') && lines[i]!.trim(); i++) push(blocks, 'table_row', tableCells(lines[i]!).join(' | '));
      i--;
      continue;
    }
    const quote = /^ {0,3}>\s?(.*)$/.exec(line);
    const body = quote ? quote[1]! : line;
    const item = LIST.exec(body);
    if (item) {
      flush();
      paraKind = 'list_item';
      para.push(item[2]!);
      continue;
    }
    para.push(body.trim());
  }
  flush();
  return { format: 'md', blocks, pages: null };
}
