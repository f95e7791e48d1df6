/**
 * Stop strings over a stream of text deltas. Text that could still turn into
 * a stop string is held back (never emitted and then retracted); once a stop
 * string appears, everything from its start on is dropped.
 */
export class StopMatcher {
  private held = '';
  /** The stop string that matched, once one has. */
  matched: string | null = null;

  constructor(private readonly stops: readonly string[]) {}

  /** Feeds a delta; returns the text that is safe to emit now. */
  push(delta: string): string {
    if (this.matched !== null) return '';
    if (this.stops.length === 0) return delta;
    const text = this.held + delta;
    let cut = -1;
    for (const s of this.stops) {
      const i = text.indexOf(s);
      if (i >= 0 && (cut < 0 || i < cut)) {
        cut = i;
        this.matched = s;
      }
    }
    if (cut >= 0) {
      this.held = '';
      return text.slice(0, cut);
    }
    // Hold back the longest suffix that is a proper prefix of some stop string.
    let keep = 0;
    for (const s of this.stops) {
      for (let n = Math.min(s.length - 1, text.length); n > keep; n--) {
        if (text.endsWith(s.slice(0, n))) {
          keep = n;
          break;
        }
      }
    }
    this.held = text.slice(text.length - keep);
    return text.slice(0, text.length - keep);
  }

  /** At the end of generation: releases held text (no stop matched). */
  flush(): string {
    const t = this.matched === null ? this.held : '';
    this.held = '';
    return t;
  }
}

/**
 * Tokens banned by no_repeat_ngram_size n (HF NoRepeatNGramLogitsProcessor):
 * any token that would complete an n-gram already present in `ids`.
 */
export function bannedNgramTokens(ids: readonly number[], n: number): number[] {
  if (n <= 0 || ids.length + 1 < n) return [];
  const prefix = ids.slice(ids.length - (n - 1));
  const banned: number[] = [];
  for (let i = 0; i + n <= ids.length; i++) {
    let match = true;
    for (let j = 0; j < n - 1; j++) {
      if (ids[i + j] !== prefix[j]) {
        match = false;
        break;
      }
    }
    if (match) banned.push(ids[i + n - 1]!);
  }
  return banned;
}
