/**
 * The Documents page's search card: query text, top-k and a category
 * filter → POST /api/v1/documents/search; the ranked chunks with their
 * cosine scores, headings, pages and documents, the query's words marked.
 */
import { h, replace, type Child } from '../dom.ts';
import { searchDocuments, splitList, type SearchHit } from './documents_api.ts';
import type { DocTable } from './documents_table.ts';
import { showError } from './documents_ui.ts';

/** `text` with every occurrence of the query's words (2+ letters) in <mark>; plain text nodes otherwise. */
export function highlight(text: string, query: string): Child[] {
  const words = [...new Set(query.toLowerCase().match(/[\p{L}\p{N}]{2,}/gu) ?? [])].sort((a, b) => b.length - a.length);
  if (!words.length) return [text];
  const re = new RegExp(`(${words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')})`, 'giu');
  return text.split(re).map((part, i) => (i % 2 ? h('mark', part) : part));
}

export function searchCard(table: DocTable): HTMLElement {
  const query = h('input#doc-query', { type: 'search', placeholder: 'What are you looking for?', required: true, maxLength: 16384 });
  const topK = h('input#doc-topk', { type: 'number', min: 1, max: 100, value: '5' });
  const category = h('input#doc-search-category', { placeholder: 'all categories' });
  const go = h('button#doc-search-btn.primary', { type: 'submit' }, 'Search');
  const error = h('div#doc-search-error.error.errbox');
  const meta = h('span#doc-search-meta.muted.small');
  const results = h('ol#doc-results.hits');

  const hit = (r: SearchHit, rank: number, q: string): HTMLElement => {
    const c = r.chunk;
    const where = [`chunk ${c.index}`, c.heading, c.page !== null ? `page ${c.page}` : null, `${c.tokens} tokens`].filter(Boolean).join(' · ');
    const follow = table.has(r.document.doc_id) ? null : h('button.link', { type: 'button', title: 'Add this document to the table above' }, 'Track');
    follow?.addEventListener('click', () => (table.track(r.document.doc_id, r.document.name), follow.remove()));
    return h(
      'li.hit',
      { dataset: { docId: r.document.doc_id, rank: String(rank) } },
      h('div.rank', `#${rank}`),
      h(
        'div.hit-body',
        h(
          'div.hit-head',
          h('span.score', { title: 'cosine similarity' }, r.score.toFixed(3)),
          h('span.scorebar', h('span', { style: { width: `${Math.max(0, Math.min(1, r.score)) * 100}%` } })),
          h('strong.hit-doc', r.document.name),
          h('span.badge', r.document.category),
          r.document.owners.length ? h('span.muted.small', `owners: ${r.document.owners.join(', ')}`) : null,
          follow,
        ),
        h('div.small.muted', where),
        h('div.chunk-text', highlight(c.text, q)),
      ),
    );
  };

  const form = h(
    'form#doc-search.search-form',
    h('label.field.grow', h('span', 'Query'), query),
    h('label.field.topk', h('span', 'Top k'), topK),
    h('label.field', h('span', 'Category'), category),
    go,
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = query.value.trim();
    if (!q) return;
    const body: { query: string; top_k: number; category?: string[] } = { query: q, top_k: Number(topK.value) || 5 };
    const cats = splitList(category.value);
    if (cats.length) body.category = cats;
    go.disabled = true;
    const t0 = performance.now();
    void searchDocuments(body)
      .then(({ results: hits }) => {
        showError(error, null);
        meta.textContent = `${hits.length} chunk${hits.length === 1 ? '' : 's'} · ${Math.round(performance.now() - t0)} ms`;
        if (!hits.length) return replace(results, h('li.none.muted', 'Nothing found. Only documents in the ready state are searched.'));
        replace(
          results,
          hits.map((r, i) => hit(r, i + 1, q)),
        );
      })
      .catch((err: unknown) => {
        showError(error, err);
        meta.textContent = '';
        replace(results);
      })
      .finally(() => (go.disabled = false));
  });

  return h('section.card#doc-search-card', h('div.row.spread', h('h2', 'Search'), meta), form, error, results);
}
