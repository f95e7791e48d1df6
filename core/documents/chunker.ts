/**
 * Chunkers: blocks → chunks whose sizes are measured in tokens of the
 * embedder's tokenizer (`chunk_units`), consecutive chunks sharing up to
 * `chunk_overlap` tokens.
 *
 * Text is cut into pieces — a run of whitespace plus one word (or one CJK
 * character) — and a chunk is a run of whole pieces, so its text is an exact
 * slice of the document (no decode round trip: WordPiece lower-cases, BPE
 * re-spaces). A piece's token count is the tokenizer's count for it in
 * context — after a word, with the block separator before it — or, for a
 * chunk's first piece, on its own (contextCounter; counts are cached). A
 * chunk's `tokens` is the sum over its pieces, which equals tokenizing the
 * chunk whenever tokenization does not merge across whitespace: WordPiece
 * (BERT), SentencePiece (USE-Lite), and byte-level BPE but for rare merges. A single piece
 * longer than chunk_units (a 400-character URL) is cut by characters.
 *
 * Overlap: a chunk that had to end because the next text did not fit starts
 * the next chunk with the longest run of its last pieces whose tokens sum to
 * at most chunk_overlap. So the overlap is ≤ chunk_overlap and falls short of
 * it by less than one piece's tokens.
 *
 * `tokens` mode: plain windows over the whole text, blocks joined by blank
 * lines. `structure` mode: a heading starts a new chunk (no overlap across
 * sections; stacked headings stay together with the text under them), a
 * block that does not fit the rest of the current chunk but fits a chunk of
 * its own starts the next chunk (cut between paragraphs, not inside one),
 * and a paragraph longer than a chunk is cut between sentences, then between
 * pieces. Each chunk records the heading path in force ("Guide > Install")
 * and the page it starts on.
 */
import type { Block } from './readers/blocks.ts';
import type { ChunkerName } from './types.ts';

/** Token counting of the embedder's tokenizer (special tokens excluded). */
export interface TokenCounter {
  count(text: string): number;
}

export interface ChunkerOptions {
  mode: ChunkerName;
  units: number;
  overlap: number;
}

export interface Chunk {
  index: number;
  text: string;
  tokens: number;
  heading: string | null;
  page: number | null;
}

interface Piece {
  text: string;
  /** Budgeted tokens: max(ctx, first). */
  tokens: number;
  /** Tokens after a word, separator included (see contextCounter). */
  ctx: number;
  /** Tokens as the first piece of a chunk (leading whitespace and separator dropped). */
  first: number;
  /** Joins this piece to the previous one in a chunk (block separators; '' inside a block). */
  sep: string;
  heading: string | null;
  page: number | null;
  isHeading: boolean;
}

const WORD = /\s*(?:[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Thai}\p{sc=Lao}\p{sc=Khmer}\p{sc=Myanmar}]|[^\s\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Thai}\p{sc=Lao}\p{sc=Khmer}\p{sc=Myanmar}]+)/gu;
const SENTENCE_END = /[.!?…。！？]+["'”’)\]]*(?=\s)/gu;

/** Caches per-piece counts (words repeat a lot). */
export function cachedCounter(c: TokenCounter, max = 100_000): TokenCounter {
  const cache = new Map<string, number>();
  return {
    count(text) {
      let n = cache.get(text);
      if (n === undefined) {
        n = c.count(text);
        if (cache.size >= max) cache.clear();
        cache.set(text, n);
      }
      return n;
    },
  };
}

/** The word in-context counts are measured after (see contextCounter). */
const ANCHOR = 'a';

/**
 * Token counts of a piece as it counts inside a chunk, not on its own: `ctx` after a word
 * (count(ANCHOR + piece) − count(ANCHOR)), `first` at the start of a chunk (its text without
 * leading whitespace). They differ where whitespace is not free: SentencePiece with a dummy
 * prefix (USE-Lite: " river" alone is ▁ ▁river, two tokens, but one after a word; a
 * blank line costs tokens), byte-level BPE (newlines are tokens). For WordPiece both are the
 * piece's own count.
 */
function contextCounter(c: TokenCounter): (text: string) => { ctx: number; first: number } {
  const base = c.count(ANCHOR);
  return (text) => ({ ctx: Math.max(0, c.count(ANCHOR + text) - base), first: c.count(text.trimStart()) });
}

/** Sentences of a paragraph; their concatenation is the paragraph. */
export function splitSentences(text: string): string[] {
  const out: string[] = [];
  let start = 0;
  for (const m of text.matchAll(SENTENCE_END)) {
    const end = m.index + m[0].length;
    out.push(text.slice(start, end));
    start = end;
  }
  if (start < text.length) out.push(text.slice(start));
  return out;
}

/** Cuts `text` into parts of at most `units` tokens, by characters (never inside a surrogate pair). */
function hardSplit(text: string, units: number, counter: TokenCounter): string[] {
  const out: string[] = [];
  let rest = text;
  while (rest.length > 1 && counter.count(rest) > units) {
    let lo = 1;
    let hi = rest.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (counter.count(rest.slice(0, mid)) <= units) lo = mid;
      else hi = mid - 1;
    }
    const c = rest.charCodeAt(lo);
    if (lo > 1 && c >= 0xdc00 && c <= 0xdfff) lo--;
    out.push(rest.slice(0, lo));
    rest = rest.slice(lo);
  }
  out.push(rest);
  return out;
}

export function chunkBlocks(blocks: readonly Block[], counter: TokenCounter, opts: ChunkerOptions): Chunk[] {
  const { units, overlap, mode } = opts;
  if (!(units >= 1) || !(overlap >= 0) || overlap * 2 > units) throw new RangeError(`bad chunk settings: units ${units}, overlap ${overlap}`);
  const count = cachedCounter(counter);
  const inContext = contextCounter(count);
  const chunks: Chunk[] = [];
  let cur: Piece[] = [];
  let curTokens = 0;
  let fresh = 0; // pieces of cur not carried over as overlap
  let path: string[] = [];

  const emit = (): void => {
    if (fresh === 0) return;
    const text = cur.map((p, i) => (i === 0 ? p.text.trimStart() : p.sep + p.text)).join('').trimEnd();
    // The section the chunk's content belongs to: its first non-heading piece's (a chunk of headings only: its last).
    const at = cur.find((p) => !p.isHeading) ?? cur[cur.length - 1]!;
    // Exact where tokenization is additive over words: the first piece as a chunk start, the rest in context.
    const tokens = cur.reduce((n, p, i) => n + (i === 0 ? p.first : p.ctx), 0);
    if (text) chunks.push({ index: chunks.length, text, tokens, heading: at.heading, page: at.page });
  };
  /** Ends the current chunk; with `carry`, the next one starts with its last ≤ overlap tokens. */
  const flush = (carry: boolean): void => {
    emit();
    let keep = 0;
    let kept = 0;
    if (carry && fresh > 0) {
      for (let i = cur.length - 1; i >= 0 && kept + cur[i]!.tokens <= overlap; i--) {
        kept += cur[i]!.tokens;
        keep++;
      }
    }
    cur = keep ? cur.slice(cur.length - keep) : [];
    curTokens = kept;
    fresh = 0;
  };
  /** Adds pieces that should stay in one chunk when possible (a sentence, a row, a heading). */
  const addGroup = (group: Piece[]): void => {
    const tokens = group.reduce((s, p) => s + p.tokens, 0);
    if (tokens > units) {
      for (const p of group) addGroup([p]);
      return;
    }
    if (curTokens + tokens > units) {
      flush(true);
      if (curTokens + tokens > units) flush(false);
    }
    cur.push(...group);
    curTokens += tokens;
    fresh += group.length;
  };
  const piecesOf = (text: string, sep: string, isHeading: boolean, page: number | null): Piece[] => {
    const heading = path.length ? path.join(' > ') : null;
    const out: Piece[] = [];
    for (const m of text.matchAll(WORD)) {
      for (const part of hardSplit(m[0], units, count)) {
        const psep = out.length ? '' : sep;
        const { ctx, first } = inContext(psep + part);
        // Packing budgets the larger count, so a chunk is within chunk_units whichever piece starts it.
        out.push({ text: part, tokens: Math.max(ctx, first), ctx, first, sep: psep, heading, page, isHeading });
      }
    }
    return out;
  };

  let prevKind: Block['kind'] | null = null;
  for (const b of blocks) {
    const sep = prevKind === null ? '' : b.kind === prevKind && (b.kind === 'list_item' || b.kind === 'table_row') ? '\n' : '\n\n';
    prevKind = b.kind;
    const page = b.page ?? null;
    if (b.kind === 'heading') path = [...path.slice(0, Math.min(Math.max(b.level ?? 1, 1), 6) - 1), b.text.replace(/\s+/g, ' ')];
    if (mode === 'tokens') {
      for (const p of piecesOf(b.text, sep, false, page)) addGroup([p]);
      continue;
    }
    if (b.kind === 'heading') {
      // A new section: no chunk spans two, and no overlap crosses into it.
      if (cur.slice(cur.length - fresh).some((p) => !p.isHeading)) flush(false);
      else if (fresh === 0) flush(false);
      addGroup(piecesOf(b.text, fresh ? '\n' : sep, true, page));
      continue;
    }
    const parts = b.kind === 'paragraph' ? splitSentences(b.text) : b.kind === 'code' ? b.text.split(/(?=\n)/) : [b.text];
    const groups = parts.map((t, k) => piecesOf(t, k === 0 ? sep : '', false, page)).filter((g) => g.length);
    const blockTokens = groups.reduce((s, g) => s + g.reduce((t, p) => t + p.tokens, 0), 0);
    const afterHeading = cur.length > 0 && cur[cur.length - 1]!.isHeading;
    if (fresh > 0 && !afterHeading && curTokens + blockTokens > units && blockTokens <= units) flush(true);
    for (const g of groups) addGroup(g);
  }
  emit();
  return chunks;
}
