/**
 * Streaming detokenization: turn generated ids into text one token at a time.
 *
 * Uses the TGI/vLLM scheme: keep a small window of ids, where
 * `[prefixOffset, readOffset)` is the context already emitted and
 * `[readOffset, end)` is pending. Each push decodes the window and emits
 * `decode(window) - decode(context)`. The context keeps decoder effects that
 * depend on neighbours right (SentencePiece drops the leading space of the
 * first token only; without context every word would lose its space). Text is
 * held back while the pending bytes end inside a UTF-8 character that a later
 * token can still complete (an emoji split over byte-fallback or byte-level
 * tokens), but definitively invalid bytes are released as U+FFFD exactly as a
 * one-shot decode would produce them. The window is a few tokens, so each
 * push is O(1) amortized; the concatenated output equals
 * `decode(allIds)` for the same `skipSpecialTokens`.
 */
import type { Tokenizer } from './tokenizer.ts';
import { endsWithIncompleteUtf8 } from './bytes.ts';

/** How many prompt ids to keep as initial context (vLLM uses the same 5). */
const INITIAL_CONTEXT = 5;

export interface IncrementalDecoderOptions {
  /** Drop special tokens (as `decode(..., {skipSpecialTokens: true})`). Default false, like `decode`. */
  skipSpecialTokens?: boolean;
  /** Ids already in the sequence (the prompt); only used as context, never emitted. */
  prefixIds?: number[];
}

export class IncrementalDecoder {
  private readonly skip: boolean;
  /** Window of ids; everything before index 0 has been emitted and dropped. */
  private window: number[] = [];
  /** Start of pending ids inside `window` (context is `window[0, read)`). */
  private read = 0;
  /** decode(window[0, read)), cached between pushes. */
  private contextText = '';

  constructor(
    private readonly tok: Tokenizer,
    opts: IncrementalDecoderOptions = {},
  ) {
    this.skip = opts.skipSpecialTokens ?? false;
    const prefix = (opts.prefixIds ?? []).filter((id) => !(this.skip && tok.isSpecial(id)));
    this.window = prefix.slice(Math.max(0, prefix.length - INITIAL_CONTEXT));
    this.read = this.window.length;
    this.contextText = this.decodeRange(0, this.read);
  }

  /** Add one generated id; returns the newly completed text (possibly ''). */
  push(id: number): string {
    // Validate eagerly so a bad id fails at the call that introduced it.
    this.tok.tokenBytes(id);
    if (this.skip && this.tok.isSpecial(id)) return '';
    this.window.push(id);
    const text = this.decodeRange(0, this.window.length);
    if (text.length <= this.contextText.length) return '';
    if (text.endsWith('\uFFFD') && this.pendingIsIncomplete()) return '';
    const out = text.slice(this.contextText.length);
    // The pending ids become the next context.
    this.window = this.window.slice(this.read);
    this.read = this.window.length;
    this.contextText = this.decodeRange(0, this.read);
    return out;
  }

  /**
   * Emit whatever is still held back (an unfinished character becomes
   * U+FFFD). The flushed ids stay as context, so pushing may continue.
   */
  flush(): string {
    const text = this.decodeRange(0, this.window.length);
    const out = text.length > this.contextText.length ? text.slice(this.contextText.length) : '';
    this.window = this.window.slice(this.read);
    this.read = this.window.length;
    this.contextText = this.decodeRange(0, this.read);
    return out;
  }

  private decodeRange(start: number, end: number): string {
    if (end <= start) return '';
    return this.tok.decode(this.window.slice(start, end), { skipSpecialTokens: this.skip });
  }

  /** Do the pending ids end inside a UTF-8 sequence that later bytes could complete? */
  private pendingIsIncomplete(): boolean {
    const tail: number[] = [];
    for (let i = this.window.length - 1; i >= this.read && tail.length < 4; i--) {
      const b = this.tok.tokenBytes(this.window[i] as number);
      for (let j = b.length - 1; j >= 0 && tail.length < 4; j--) tail.push(b[j] as number);
    }
    tail.reverse();
    return endsWithIncompleteUtf8(tail);
  }
}
