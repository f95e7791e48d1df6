/**
 * The tokenizer of Universal Sentence Encoder Lite, reproduced from the JavaScript the model
 * ships with (@energetic-ai/embeddings' tokenizer.ts / trie.ts, a port of the tfjs-models USE
 * tokenizer, itself a port of SentencePiece's EncodeAsIds): a unigram Viterbi search over
 * vocab.json, a list of [piece, log-probability] pairs whose index is the token id.
 *
 * Why reproduce rather than reuse core/tokenizer: the ids decide the embeddings, and the
 * package's encoder differs from real SentencePiece in ways that change ids. Every quirk is
 * kept on purpose:
 *  - the text is NFKC-normalized, every U+0020 space (only that one) becomes ▁, and one ▁ is
 *    prepended (not to the empty string, which encodes to []);
 *  - the first 6 pieces (unk, <s>, </s>, extra ids) are never matched; of duplicate pieces
 *    the last one wins (the trie overwrites);
 *  - a code point that starts no piece becomes unk (id 0, score 0, one code point), and
 *    consecutive unks are merged into one;
 *  - Viterbi visits the candidates of an end position by ascending start, and a candidate
 *    replaces the best when the best is still exactly 0 ("unset") or its score is >= it,
 *    so ties go to the later (shorter) piece;
 *  - the backward pass steps back by the chosen piece's String.length (UTF-16 units) while
 *    the lattice counts code points; no piece of this vocabulary is astral, so they agree.
 * The package slices the rest of the input at every position (quadratic in its length);
 * here the trie is walked in place: the same candidates in the same order, linear time.
 *
 * Implements core's Tokenizer so readers can tokenize / detokenize with it; USE has no
 * special tokens to add, no BOS / EOS and no chat template.
 */
import { InvalidRequestError, ModelFormatError } from '../../errors.ts';
import type { Tokenizer } from '../../tokenizer/tokenizer.ts';

/** vocab.json: [piece, score] by id. */
export type UseVocabulary = Array<[string, number]>;

/** Pieces the package never matches: unk, <s>, </s>, extra_token_id_1..3. */
export const USE_RESERVED_PIECES = 6;
export const USE_UNK_ID = 0;
const SEP = '\u2581';

interface TrieNode {
  children: Map<string, TrieNode>;
  /** Token id when a piece ends here, else -1. */
  id: number;
  score: number;
}

const newNode = (): TrieNode => ({ children: new Map(), id: -1, score: 0 });

/**
 * Validates vocab.json's content. A null score reads as 0: the package computes
 * `score + best` and null + x is x (the shipped vocab.json has seven such pieces, all with
 * ':', e.g. "://" and "▁:)"), so they rank as the likeliest pieces there are.
 */
export function parseUseVocabulary(raw: unknown): UseVocabulary {
  if (!Array.isArray(raw) || raw.length <= USE_RESERVED_PIECES) throw new ModelFormatError('vocab.json must be a list of [piece, score] pairs');
  return raw.map((e: unknown, i): [string, number] => {
    if (!Array.isArray(e) || typeof e[0] !== 'string' || !(e[1] === null || (typeof e[1] === 'number' && Number.isFinite(e[1])))) {
      throw new ModelFormatError(`vocab.json entry ${i} is not a [piece, score] pair`, { index: i });
    }
    return [e[0], (e[1] as number | null) ?? 0];
  });
}

export class UseTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly bosId = null;
  readonly eosIds: readonly number[] = [];
  readonly padId = null;
  readonly hasChatTemplate = false;
  private readonly root = newNode();
  private readonly ids = new Map<string, number>();

  constructor(private readonly vocab: UseVocabulary) {
    this.vocabSize = vocab.length;
    for (let i = USE_RESERVED_PIECES; i < vocab.length; i++) {
      const [piece, score] = vocab[i]!;
      let node = this.root;
      for (const sym of piece) {
        let next = node.children.get(sym);
        if (!next) node.children.set(sym, (next = newNode()));
        node = next;
      }
      if (node !== this.root) {
        node.id = i;
        node.score = score;
        this.ids.set(piece, i);
      }
    }
  }

  /** Token ids of `text` (USE adds no special tokens; `opts` is accepted for the interface). */
  encode(text: string, _opts?: { addSpecialTokens?: boolean }): number[] {
    if (typeof text !== 'string') throw new InvalidRequestError('invalid_input', 'text to tokenize must be a string');
    const normalized = text.normalize('NFKC');
    const input = normalized.length > 0 ? SEP + normalized.replace(/ /g, SEP) : normalized;
    const symbols = Array.from(input);
    const n = symbols.length;
    const best = new Float64Array(n + 1);
    const words = new Int32Array(n + 1);
    // Forward relaxation by ascending start: for each end position this visits its
    // candidates in the package's order (ascending start), and best[start] is final by then.
    for (let i = 0; i < n; i++) {
      let node = this.root.children.get(symbols[i]!);
      let matched = false;
      for (let j = i; j < n && node; j++) {
        if (node.id >= 0) {
          matched = true;
          this.relax(best, words, j + 1, node.score + best[i]!, node.id);
        }
        node = j + 1 < n ? node.children.get(symbols[j + 1]!) : undefined;
      }
      if (!matched) this.relax(best, words, i + 1, best[i]!, USE_UNK_ID); // unk: one symbol, score 0
    }
    const reversed: number[] = [];
    for (let at = n; at > 0; at -= this.vocab[words[at]!]![0].length) reversed.push(words[at]!);
    const out: number[] = [];
    let previousUnk = false;
    for (const id of reversed) {
      if (!(previousUnk && id === USE_UNK_ID)) out.push(id);
      previousUnk = id === USE_UNK_ID;
    }
    return out.reverse();
  }

  private relax(best: Float64Array, words: Int32Array, end: number, score: number, id: number): void {
    if (best[end] === 0 || score >= best[end]!) {
      best[end] = score;
      words[end] = id;
    }
  }

  /** Pieces joined, ▁ read as a space, the leading space dropped (as SentencePiece decodes). */
  decode(ids: readonly number[], opts: { skipSpecialTokens?: boolean } = {}): string {
    let s = '';
    for (const id of ids) {
      if (opts.skipSpecialTokens && this.isSpecial(id)) continue;
      s += this.pieceText(id);
    }
    return s.startsWith(' ') ? s.slice(1) : s;
  }

  tokenToId(t: string): number | undefined {
    if (t === this.vocab[USE_UNK_ID]?.[0]) return USE_UNK_ID;
    return this.ids.get(t);
  }

  idToToken(id: number): string | undefined {
    return Number.isInteger(id) ? this.vocab[id]?.[0] : undefined;
  }

  /** unk and the reserved control pieces. */
  isSpecial(id: number): boolean {
    return Number.isInteger(id) && id >= 0 && id < USE_RESERVED_PIECES;
  }

  tokenBytes(id: number): Uint8Array {
    return new TextEncoder().encode(this.pieceText(id));
  }

  applyChatTemplate(): string {
    throw new InvalidRequestError('no_chat_template', 'Universal Sentence Encoder Lite has no chat template');
  }

  private pieceText(id: number): string {
    return (this.idToToken(id) ?? '').replaceAll(SEP, ' ');
  }
}
