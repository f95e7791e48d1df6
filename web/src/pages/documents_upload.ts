/**
 * The Documents page's upload card: a drop zone and a file picker (several
 * files at once), category / owners / identity fields and processing
 * options, then POST /api/v1/documents with each file's bytes in base64.
 * Every file is listed with the list the server put it in — accepted,
 * duplicate (with what it duplicates) or invalid (with the reason) — and
 * accepted ones are handed to the table, which follows their processing.
 */
import { field, fmtBytes, h, replace, type Child } from '../dom.ts';
import { identity, loadDocuments, setIdentity, splitList, toBase64, type LoadAnswer, type ReportedEntry } from './documents_api.ts';
import type { DocTable } from './documents_table.ts';
import { showError } from './documents_ui.ts';

/** Raw bytes per request (base64 adds a third; the server's default body limit is 64 MiB). A larger file goes alone. */
const BATCH_BYTES = 16 << 20;
/** Files per request (the server's default limit is 256). */
const BATCH_FILES = 64;
/** Upload lines kept on screen. */
const MAX_LINES = 100;
/** Sent when the category field is empty (the API requires one). */
export const DEFAULT_CATEGORY = 'default';

type Outcome = 'uploading' | 'accepted' | 'duplicate' | 'invalid' | 'error';

interface Line {
  file: File;
  li: HTMLLIElement;
}

/** Groups files into requests of at most BATCH_FILES files and BATCH_BYTES bytes (a bigger file alone). */
export function batches<T extends { size: number }>(files: readonly T[], maxBytes = BATCH_BYTES, maxFiles = BATCH_FILES): T[][] {
  const out: T[][] = [];
  let cur: T[] = [];
  let bytes = 0;
  for (const f of files) {
    if (cur.length && (cur.length >= maxFiles || bytes + f.size > maxBytes)) {
      out.push(cur);
      cur = [];
      bytes = 0;
    }
    cur.push(f);
    bytes += f.size;
  }
  if (cur.length) out.push(cur);
  return out;
}

export function uploadCard(table: DocTable): HTMLElement {
  const picker = h('input#doc-file.visually-hidden', { type: 'file', multiple: true });
  const zone = h(
    'div#doc-drop.dropzone',
    { tabIndex: 0, role: 'button', 'aria-label': 'Drop files here or choose files' },
    h('div.drop-icon', '⇪'),
    h('div.drop-title', 'Drop files here'),
    h('div.small.muted', 'or ', h('span.linkish', 'choose files'), ' (several at once)'),
    h('div.small.muted.formats', 'txt · md · html · pdf · docx · csv · json'),
    picker,
  );
  const category = h('input#doc-category', { placeholder: DEFAULT_CATEGORY, maxLength: 128 });
  const owners = h('input#doc-owners', { placeholder: 'none: visible to everyone' });
  const who = h('input#doc-identity', { placeholder: 'none', value: identity() });
  const reader = h('select#doc-reader', ...['auto', 'txt', 'md', 'html', 'pdf', 'docx', 'csv', 'json'].map((r) => h('option', { value: r }, r)));
  const chunker = h('select#doc-chunker', h('option', { value: 'structure' }, 'structure'), h('option', { value: 'tokens' }, 'tokens'));
  const units = h('input#doc-units', { type: 'number', min: 1, placeholder: '256' });
  const overlap = h('input#doc-overlap', { type: 'number', min: 0, placeholder: '32' });
  const error = h('div#doc-upload-error.error.errbox');
  const list = h('ul#doc-uploads.uploads');
  const clear = h('button.link', { type: 'button', onclick: () => (replace(list), (uploads.hidden = true)) }, 'Clear');
  const uploads = h('div#doc-uploads-box', { hidden: true }, h('div.row.spread.uploads-head', h('h3', 'Uploads'), clear), list);

  who.addEventListener('change', () => {
    setIdentity(who.value);
    table.reload();
  });

  const setLine = (l: Line, outcome: Outcome, ...detail: Child[]): void => {
    l.li.dataset.outcome = outcome;
    const cls = outcome === 'accepted' ? 'ok' : outcome === 'duplicate' ? 'wait' : outcome === 'uploading' ? 'idle' : 'bad';
    replace(l.li, h(`span.state.${cls}`, outcome), h('span.up-name', l.file.name), h('span.muted.small', fmtBytes(l.file.size)), h('span.up-detail.small', ...detail));
  };

  const report = (l: Line, where: keyof LoadAnswer, e: ReportedEntry): void => {
    const reason = e.reason ? h('code', e.reason) : null;
    if (where === 'accepted') {
      setLine(l, 'accepted', h('span.muted', `${e.format ?? ''} · id `), h('span.mono', e.doc_id ?? ''));
      if (e.doc_id) table.track(e.doc_id, l.file.name);
    } else if (where === 'duplicate') {
      const of = e.duplicate_of ?? '';
      const follow = of && !table.has(of) ? h('button.link', { type: 'button', onclick: () => (table.track(of, l.file.name), follow?.remove()) }, 'Track it') : null;
      setLine(l, 'duplicate', reason, ' of ', h('span.mono', of), follow);
    } else {
      setLine(l, 'invalid', reason, ' ', e.message ?? '');
    }
  };

  const send = async (lines: Line[]): Promise<void> => {
    const files = await Promise.all(
      lines.map(async (l) => {
        const bytes = toBase64(new Uint8Array(await l.file.arrayBuffer()));
        const o = splitList(owners.value);
        return { name: l.file.name, doc_id: null, bytes, path: '', category: category.value.trim() || DEFAULT_CATEGORY, owners: o.length ? o : null };
      }),
    );
    const body: Record<string, unknown> = { files };
    if (reader.value !== 'auto') body.reader = reader.value;
    if (chunker.value !== 'structure') body.chunker = chunker.value;
    if (units.value.trim()) body.chunk_units = Number(units.value);
    if (overlap.value.trim()) body.chunk_overlap = Number(overlap.value);
    const answer = await loadDocuments(body);
    for (const k of ['accepted', 'duplicate', 'invalid'] as const) for (const e of answer[k]) if (lines[e.index]) report(lines[e.index]!, k, e);
  };

  const upload = async (files: File[]): Promise<void> => {
    if (!files.length) return;
    showError(error, null);
    const lines = files.map((file) => ({ file, li: h('li') }));
    for (const l of [...lines].reverse()) list.prepend(l.li);
    while (list.children.length > MAX_LINES) list.lastElementChild?.remove();
    uploads.hidden = false;
    for (const l of lines) setLine(l, 'uploading', h('span.muted', 'reading and sending…'));
    // An empty file cannot be sent: its base64 is "", which the API reads as "no content given" (missing_content).
    for (const l of lines) if (l.file.size === 0) setLine(l, 'invalid', h('code', 'empty_file'), ' the file is empty (not sent)');
    const toSend = lines.filter((l) => l.file.size > 0);
    for (const group of batches(toSend.map((l) => ({ l, size: l.file.size })))) {
      const ls = group.map((g) => g.l);
      try {
        await send(ls);
      } catch (e) {
        // The request as a whole was refused (400/413/503) or never arrived: nothing of it was stored.
        showError(error, e);
        const code = (e as { code?: string }).code;
        for (const l of ls) setLine(l, 'error', 'not uploaded: the request was refused', code ? [' (', h('code', code), ')'] : null, ', see the error above');
      }
    }
  };

  picker.addEventListener('change', () => {
    const files = [...(picker.files ?? [])];
    picker.value = ''; // choosing the same file again fires change again
    void upload(files);
  });
  zone.addEventListener('click', (e) => {
    if (e.target !== picker) picker.click();
  });
  zone.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' || e.key === ' ') (e.preventDefault(), picker.click());
  });
  // dragenter/dragleave also fire for the zone's children: count them so the highlight does not flicker.
  let depth = 0;
  const hasFiles = (e: DragEvent): boolean => [...(e.dataTransfer?.types ?? [])].includes('Files');
  zone.addEventListener('dragenter', (e) => {
    if (!hasFiles(e)) return;
    e.preventDefault();
    depth++;
    zone.classList.add('over');
  });
  zone.addEventListener('dragover', (e) => {
    if (!hasFiles(e)) return;
    e.preventDefault(); // accept the drop
    if (e.dataTransfer) e.dataTransfer.dropEffect = 'copy';
  });
  zone.addEventListener('dragleave', () => {
    if (--depth <= 0) (depth = 0), zone.classList.remove('over');
  });
  zone.addEventListener('drop', (e) => {
    e.preventDefault();
    depth = 0;
    zone.classList.remove('over');
    void upload([...(e.dataTransfer?.files ?? [])]);
  });

  return h(
    'section.card#doc-upload',
    h('h2', 'Upload'),
    h(
      'div.upload-grid',
      zone,
      h(
        'div',
        h(
          'div.grid3',
          field('Category', category, `empty: “${DEFAULT_CATEGORY}”`),
          field('Owners', owners, 'comma-separated'),
          field('Act as owner', who, 'sent as x-weft-owner on every call'),
        ),
        h(
          'details#doc-options',
          h('summary', 'Processing options'),
          h(
            'div.grid4',
            field('Reader', reader, 'auto: by extension, then content'),
            field('Chunker', chunker, 'structure: headings, paragraphs'),
            field('Chunk size (tokens)', units, 'capped by the embedder'),
            field('Chunk overlap (tokens)', overlap, 'default: min(32, size / 8)'),
          ),
        ),
      ),
    ),
    error,
    uploads,
  );
}
