/**
 * CSV and JSON → blocks.
 *
 * CSV (RFC 4180: quoted fields, doubled quotes, newlines inside quotes): the
 * delimiter is detected from the first line (`,` `;` tab `|`); the first row
 * is the header, and every data row becomes one `table_row` block written as
 * "column: value | column: value" (empty cells left out), so a chunk holding
 * a row still says what each value is.
 *
 * JSON (also JSON Lines): every leaf becomes a "path: value" line; each
 * element of a top-level array (or each top-level key of an object) is one
 * block, so records stay together when chunking. Long strings (prose inside
 * JSON) are kept whole.
 */
import { DocumentReadError } from '../errors.ts';
import { decodeText, push, type Block, type ReadResult } from './blocks.ts';

export function parseCsv(text: string, delimiter?: string): string[][] {
  const first = text.slice(0, text.indexOf('\n') < 0 ? text.length : text.indexOf('\n'));
  const d = delimiter ?? [',', ';', '\t', '|'].map((c) => [c, first.split(c).length] as const).sort((a, b) => b[1] - a[1])[0]![0];
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i += 2;
          continue;
        }
        quoted = false;
      } else field += c;
      i++;
      continue;
    }
    if (c === '"' && field.trim() === '') {
      quoted = true;
      field = '';
    } else if (c === d) {
      row.push(field);
      field = '';
    } else if (c === '\n') {
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
    } else field += c;
    i++;
  }
  if (field !== '' || row.length) {
    row.push(field);
    rows.push(row);
  }
  return rows.filter((r) => r.some((f) => f.trim() !== ''));
}

export function readCsv(bytes: Uint8Array): ReadResult {
  const rows = parseCsv(decodeText(bytes));
  const blocks: Block[] = [];
  const header = (rows[0] ?? []).map((h, k) => h.trim() || `column ${k + 1}`);
  for (const r of rows.slice(1)) {
    const cells = r.map((v, k) => [header[k] ?? `column ${k + 1}`, v.trim()] as const).filter(([, v]) => v !== '');
    push(blocks, 'table_row', cells.map(([h, v]) => `${h}: ${v}`).join(' | '));
  }
  if (rows.length === 1) push(blocks, 'table_row', header.join(' | '));
  return { format: 'csv', blocks, pages: null };
}

function leafLines(v: unknown, path: string, out: string[]): void {
  if (v === null || typeof v !== 'object') {
    const s = typeof v === 'string' ? v : JSON.stringify(v);
    out.push(path ? `${path}: ${s}` : s);
    return;
  }
  if (Array.isArray(v)) {
    v.forEach((x, k) => leafLines(x, `${path}[${k}]`, out));
    return;
  }
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) leafLines(x, path ? `${path}.${k}` : k, out);
}

function parseJsonOrLines(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    const lines = text.split('\n').filter((l) => l.trim());
    if (lines.length > 1) {
      try {
        return lines.map((l) => JSON.parse(l) as unknown);
      } catch {
        // fall through to the original error
      }
    }
    throw new DocumentReadError('json', (e as Error).message);
  }
}

export function readJson(bytes: Uint8Array): ReadResult {
  const v = parseJsonOrLines(decodeText(bytes));
  const blocks: Block[] = [];
  const record = (x: unknown, path: string): void => {
    const lines: string[] = [];
    leafLines(x, path, lines);
    push(blocks, 'paragraph', lines.join('\n'));
  };
  if (Array.isArray(v)) v.forEach((x) => record(x, ''));
  else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) record(x, k);
  else record(v, '');
  return { format: 'json', blocks, pages: null };
}
