/**
 * Documents page (#/documents): upload files for retrieval (drag and drop
 * or a picker), follow each document through queued → reading → chunking →
 * embedding → ready | failed, search the ready ones, delete them. Talks to
 * the inference API's document routes (docs/documents.md).
 */
import { h } from '../dom.ts';
import { documentsTable } from './documents_table.ts';
import { searchCard } from './documents_search.ts';
import { uploadCard } from './documents_upload.ts';
import type { Page } from './page.ts';

export function documentsPage(): Page {
  const table = documentsTable();
  const el = h('div.page.documents-page', uploadCard(table), table.el, searchCard(table));
  // A file dropped next to the drop zone would make the browser open it and leave the app.
  // Prevent that, and show "no drop" outside the zone (the zone's own handlers ran first and set "copy").
  el.addEventListener('dragover', (e) => {
    if (e.defaultPrevented) return;
    e.preventDefault();
    if (e.dataTransfer) e.dataTransfer.dropEffect = 'none';
  });
  el.addEventListener('drop', (e) => e.preventDefault());
  return { el, show: () => table.show(), hide: () => table.hide() };
}
