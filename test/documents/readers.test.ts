/**
 * Readers: each format (txt, md, html, pdf, docx, csv, json) from small files
 * generated here → the blocks and structure hints we expect; format
 * detection by name and by content; corrupt input → a typed read error.
 */
import { describe, expect, it } from 'vitest';
import { DocumentReadError } from '../../core/documents/errors.ts';
import { detectFormat, readDocument } from '../../core/documents/readers/index.ts';
import { decodeHtmlEntities } from '../../core/documents/readers/html.ts';
import { parseCsv } from '../../core/documents/readers/tabular.ts';
import { makeDocx, makePdf, makeZip } from './fixtures.ts';

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
const simple = (r: { blocks: { kind: string; text: string; level?: number; page?: number }[] }): string[] =>
  r.blocks.map((b) => `${b.kind}${b.level ? b.level : ''}${b.page ? `@${b.page}` : ''}: ${b.text}`);

describe('document readers', () => {
  it('txt: paragraphs split at blank lines; BOM and CRLF handled', async () => {
    const r = await readDocument(enc('\ufeffFirst line\r\nstill first.\r\n\r\n\r\nSecond   paragraph.\n'), 'txt');
    expect(simple(r)).toEqual(['paragraph: First line\nstill first.', 'paragraph: Second paragraph.']);
    const utf16 = new Uint8Array([0xff, 0xfe, ...Array.from('Hé', (c) => [c.charCodeAt(0), 0]).flat()]);
    expect((await readDocument(utf16, 'txt')).blocks[0]!.text).toBe('Hé');
  });

  it('md: headings (ATX, setext), lists, code, tables, inline markup and front matter', async () => {
    const md = [
      '---', 'title: x', '---',
      '# Guide *intro*', '',
      'Read the [manual](http://x.y) and `run` **now**.',
      '', 'Install', '-------', '',
      '- step one', '- step two', '  continues', '',
      '```sh', 'npm i  weft', '```', '',
      '| a | b |', '|---|---|', '| 1 | 2 |', '',
      '> quoted text', '', '***', '[ref]: http://x',
    ].join('\n');
    const r = await readDocument(enc(md), 'md');
    expect(simple(r)).toEqual([
      'heading1: Guide intro',
      'paragraph: Read the manual and run now.',
      'heading2: Install',
      'list_item: step one',
      'list_item: step two\ncontinues',
      'code: npm i  weft',
      'table_row: a | b',
      'table_row: 1 | 2',
      'paragraph: quoted text',
    ]);
  });

  it('html: structure, entities, skipped script/style/head, title fallback, malformed markup', async () => {
    const html = `<!doctype html><html><head><title>The &amp; Title</title><style>p{x:1}</style></head>
      <body><script>if (a < b) document.write("<p>no</p>")</script>
      <h2>Part&nbsp;one</h2><p>Hello <b>bold</b> &lt;world&gt; &#233;&#x41;<br>next line</p>
      <ul><li>alpha</li><li>beta <i>gamma</i></li></ul>
      <table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td><p>1</p></td></tr></table>
      <pre>  keep
    spaces</pre><!-- comment --><div>tail 3 < 4</div></body></html>`;
    const r = await readDocument(enc(html), 'html');
    expect(simple(r)).toEqual([
      'heading1: The & Title',
      'heading2: Part one',
      'paragraph: Hello bold <world> éA\nnext line',
      'list_item: alpha',
      'list_item: beta gamma',
      'table_row: k | v',
      'table_row: a | 1',
      'code:   keep\n    spaces',
      'paragraph: tail 3 < 4',
    ]);
    expect(decodeHtmlEntities('&unknown; &#0; &hellip;')).toBe('&unknown; \ufffd …');
  });

  it('pdf: text per page, headings by font size, paragraphs by vertical gaps', async () => {
    const pdf = makePdf([
      { lines: [{ text: 'Annual Report', size: 24 }, { text: 'Revenue grew in the north (by 12%).', size: 12 }, { text: 'Costs stayed flat.', size: 12 }, { text: '', size: 12 }, { text: 'A second paragraph.', size: 12 }] },
      { lines: [{ text: 'Outlook', size: 18 }, { text: 'Next year looks stable.', size: 12 }] },
    ]);
    const r = await readDocument(pdf, 'pdf');
    expect(r.pages).toBe(2);
    expect(simple(r)).toEqual([
      'heading1@1: Annual Report',
      'paragraph@1: Revenue grew in the north (by 12%). Costs stayed flat.',
      'paragraph@1: A second paragraph.',
      'heading2@2: Outlook',
      'paragraph@2: Next year looks stable.',
    ]);
    await expect(readDocument(enc('%PDF-1.4 garbage'), 'pdf')).rejects.toBeInstanceOf(DocumentReadError);
  });

  it('docx: headings from Heading styles, paragraphs', async () => {
    const docx = makeDocx([{ text: 'Handbook', style: 'Heading1' }, { text: 'Welcome & hello.' }, { text: 'Leave', style: 'Heading2' }, { text: 'Ask your manager.' }]);
    const r = await readDocument(docx, 'docx');
    expect(simple(r)).toEqual(['heading1: Handbook', 'paragraph: Welcome & hello.', 'heading2: Leave', 'paragraph: Ask your manager.']);
    await expect(readDocument(makeZip({ 'a.txt': 'x' }), 'docx')).rejects.toBeInstanceOf(DocumentReadError);
  });

  it('csv: quoted fields, delimiter detection, header-labelled rows', async () => {
    expect(parseCsv('a,b\n"x, y","say ""hi"""\n\n1,\n')).toEqual([['a', 'b'], ['x, y', 'say "hi"'], ['1', '']]);
    const r = await readDocument(enc('name;city;note\nAda;London;"multi\nline"\nAlan;;x\n'), 'csv');
    expect(simple(r)).toEqual(['table_row: name: Ada | city: London | note: multi\nline', 'table_row: name: Alan | note: x']);
  });

  it('json: leaves as path: value lines, one block per record; JSON Lines; bad JSON fails', async () => {
    const r = await readDocument(enc('[{"id":1,"tags":["a","b"],"info":{"ok":true}},{"id":2,"text":"Long prose here."}]'), 'json');
    expect(simple(r)).toEqual(['paragraph: id: 1\ntags[0]: a\ntags[1]: b\ninfo.ok: true', 'paragraph: id: 2\ntext: Long prose here.']);
    const obj = await readDocument(enc('{"title":"T","body":{"p":"x"}}'), 'json');
    expect(simple(obj)).toEqual(['paragraph: title: T', 'paragraph: body.p: x']);
    expect(simple(await readDocument(enc('{"a":1}\n{"a":2}\n'), 'json'))).toEqual(['paragraph: a: 1', 'paragraph: a: 2']);
    await expect(readDocument(enc('{nope'), 'json')).rejects.toBeInstanceOf(DocumentReadError);
  });

  it('detects formats by extension, then by content', () => {
    expect(detectFormat('a.MD', enc('x'))).toBe('md');
    expect(detectFormat('r.pdf', enc('x'))).toBe('pdf');
    expect(detectFormat('blob', makePdf([{ lines: [{ text: 'x', size: 12 }] }]))).toBe('pdf');
    expect(detectFormat('blob', makeDocx([{ text: 'x' }]))).toBe('docx');
    expect(detectFormat('blob', makeZip({ 'a.txt': 'x' }))).toBeNull();
    expect(detectFormat('page', enc('  <!DOCTYPE html><p>x'))).toBe('html');
    expect(detectFormat('data', enc('{"a":1}'))).toBe('json');
    expect(detectFormat('notes', enc('just words'))).toBe('txt');
    expect(detectFormat('x.bin', new Uint8Array([0, 1, 2, 255]))).toBeNull();
    expect(detectFormat('legacy.doc', new Uint8Array([0xd0, 0xcf, 0x11, 0xe0, 0, 0]))).toBeNull();
  });
});
