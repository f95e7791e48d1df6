/**
 * A byte trie of a vocabulary, flattened in preorder.
 *
 * Mask computation walks this trie together with an automaton: a token whose
 * prefix already dies is skipped with its whole subtree (`skip[i]` is the
 * index just past node i's subtree), and tokens sharing a prefix share the
 * automaton steps for it. Nodes are typed arrays (byte, depth, token range),
 * so a walk over a 150k-token vocabulary is a tight loop without allocation.
 * Special, empty and unknown ids are left out (never allowed); EOS ids are
 * kept aside and allowed by the backends in accepting states only. Built once
 * per vocabulary object (WeakMap).
 */
import type { VocabLike } from './index.ts';

/** Most tokens a plain-but-some-bytes class puts in its tail trie (plainExceptClass). */
const MAX_CLASS_TAILS = 48_000;

export class TokenTrie {
  readonly vocabSize: number;
  /** Mask length in u32 words: ceil(vocabSize / 32). */
  readonly words: number;
  readonly eos: readonly number[];
  /** singleByte[b] = 1 if the byte b alone is a token (shortest completions count in such tokens). */
  readonly singleByte = new Uint8Array(256);
  readonly nodes: number;
  readonly maxDepth: number;
  readonly byte: Uint8Array;
  readonly depth: Uint16Array;
  readonly skip: Int32Array;
  readonly tokStart: Int32Array;
  readonly tokCount: Int32Array;
  readonly tokens: Int32Array;
  /** Token id → its index in `tokens` (-1 if not in the trie). */
  readonly posOf: Int32Array;
  /** Bytes of every trie token (undefined for special / empty ones). */
  readonly bytesOf: ReadonlyArray<Uint8Array | undefined>;
  /**
   * Plain text: whole UTF-8 characters, none of them a control character,
   * `"` or `\\` (what free JSON string content is made of).
   * `plainChars[id]` = a token's character count if it is plain, else -1.
   * Per trie node i, over the tokens under it, the bytes from node i on (the
   * token's suffix below i's parent): `sufMax[i]` / `sufMin[i]` = the most /
   * fewest characters of such a suffix when every one is plain, else -1. A
   * mask walk in a state that takes any plain character the same way for d
   * characters accepts a whole subtree with sufMax ≤ d without walking it
   * (native.ts). `tokAt[i]` = index in `tokens` of the first token at or
   * after node i in preorder, so node i's subtree holds
   * tokens[tokAt[i] .. tokAt[skip[i]]) (`tokAt[nodes]` = token count).
   */
  readonly plainChars: Int16Array;
  readonly sufMax: Int16Array;
  readonly sufMin: Int16Array;
  readonly tokAt: Int32Array;
  /** Largest plain token, or plain start of a token, in characters. */
  readonly maxPlain: number;
  /**
   * The tokens that are not plain, in a trie of what follows their plain
   * start (at least one byte), grouped by that start's character count:
   * group c is nodes tail.groupStart[c] .. tail.groupStart[c + 1]. From a
   * state that takes any plain character the same way, a mask walks only
   * this (a few thousand nodes) instead of the whole vocabulary.
   */
  readonly tail: FlatTrie;
  /** Token id → byte offset where its tail starts (tokens that are not plain). */
  readonly tailFrom: Int32Array;
  private readonly plainMasks: Uint32Array[] = [];
  /**
   * Per node i, over i and its subtree: the ASCII bytes that occur
   * (`asciiBelow[4i .. 4i + 4)`, a 128-bit set), whether a byte ≥ 0x80 does
   * (`highBelow[i]`), and the most / fewest bytes from i to the end of a token
   * (`reachMax[i]` / `reachMin[i]`, counting i). A subtree whose bytes all lie
   * in an ASCII set K is class text all the way down, so its class suffix
   * bounds are reachMax / reachMin: any set's skip test without per-set tables.
   */
  readonly asciiBelow: Uint32Array;
  /**
   * Every trie token's bytes in one buffer: token id t's are
   * flatBytes[flatStart[t] .. flatStart[t + 1]) (empty for ids not in the trie).
   * Scans over the whole vocabulary read this instead of 128k small arrays.
   */
  readonly flatBytes: Uint8Array;
  readonly flatStart: Int32Array;
  /** Byte → the root child node for it (-1: no token starts with it). */
  readonly rootChild = new Int32Array(256).fill(-1);
  readonly highBelow: Uint8Array;
  readonly reachMax: Int16Array;
  readonly reachMin: Int16Array;

  private static readonly cache = new WeakMap<VocabLike, TokenTrie>();

  static for(vocab: VocabLike): TokenTrie {
    let t = TokenTrie.cache.get(vocab);
    if (!t) TokenTrie.cache.set(vocab, (t = new TokenTrie(vocab)));
    return t;
  }

  private constructor(vocab: VocabLike) {
    const V = vocab.vocabSize;
    this.vocabSize = V;
    this.words = Math.ceil(V / 32);
    this.eos = [...new Set(vocab.eosIds)].filter((id) => Number.isInteger(id) && id >= 0 && id < V);
    const eosSet = new Set(this.eos);
    const bytesOf: Array<Uint8Array | undefined> = new Array(V);
    const entries: Array<{ id: number; key: string }> = [];
    for (let id = 0; id < V; id++) {
      if (eosSet.has(id) || vocab.isSpecial(id)) continue;
      let b: Uint8Array | undefined;
      try {
        b = vocab.tokenBytes(id);
      } catch {
        continue; // a hole in the id space: never allowed
      }
      if (!b || b.length === 0) continue;
      bytesOf[id] = b;
      if (b.length === 1) this.singleByte[b[0]!] = 1;
      let key = '';
      for (let i = 0; i < b.length; i += 4096) key += String.fromCharCode(...b.subarray(i, i + 4096));
      entries.push({ id, key });
    }
    this.bytesOf = bytesOf;
    entries.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.id - b.id));
    const main = flatten(entries.map((e) => ({ ...e, group: 0 })), 1);
    const n = main.nodes;
    const tokens = main.tokens;
    this.nodes = n;
    this.maxDepth = main.maxDepth;
    this.byte = main.byte;
    this.depth = main.depth;
    this.skip = main.skip;
    this.tokStart = main.tokStart;
    this.tokCount = main.tokCount;
    this.tokens = tokens;
    this.posOf = new Int32Array(V).fill(-1);
    tokens.forEach((id, k) => (this.posOf[id] = k));
    this.plainChars = new Int16Array(V).fill(-1);
    const sufMax = new Int16Array(n).fill(-2); // -2: no token seen yet
    const sufMin = new Int16Array(n).fill(0x7fff);
    const tokAt = new Int32Array(n + 1);
    let maxPlain = 0;
    // Preorder again, with the path of nodes per depth, to fold every token's suffix counts into its path.
    const walk: number[] = [];
    for (let i = 0, k = 0; i <= n; i++) {
      tokAt[i] = k;
      if (i === n) break;
      walk.length = this.depth[i]! - 1;
      walk.push(i);
      for (let e = k + this.tokCount[i]!; k < e; k++) {
        const id = tokens[k]!;
        const cnt = suffixChars(bytesOf[id]!);
        this.plainChars[id] = cnt[0]!;
        if (cnt[0]! > maxPlain) maxPlain = cnt[0]!;
        for (let d = 0; d < walk.length; d++) {
          const node = walk[d]!;
          const c = cnt[d]!;
          if (c < 0 || sufMax[node] === -1) sufMax[node] = -1;
          else {
            if (c > sufMax[node]!) sufMax[node] = c;
            if (c < sufMin[node]!) sufMin[node] = c;
          }
        }
      }
    }
    // The tail trie: every token that is not plain, keyed by how many plain characters it starts with, then the rest of its bytes.
    const tails: Array<{ id: number; key: string; group: number }> = [];
    this.tailFrom = new Int32Array(V);
    for (const id of tokens) {
      if (this.plainChars[id]! >= 0) continue;
      const b = bytesOf[id]!;
      let o = 0;
      let c = 0;
      for (let len; o < b.length && (len = plainCharAt(b, o)) > 0; o += len) c++;
      this.tailFrom[id] = o;
      let key = '';
      for (let i = o; i < b.length; i += 4096) key += String.fromCharCode(...b.subarray(i, Math.min(b.length, i + 4096)));
      tails.push({ id, key, group: c });
      if (c > maxPlain) maxPlain = c;
    }
    tails.sort((a, b) => a.group - b.group || (a.key < b.key ? -1 : a.key > b.key ? 1 : a.id - b.id));
    this.tail = flatten(tails, maxPlain + 1);
    this.maxPlain = maxPlain;
    this.sufMax = sufMax;
    this.sufMin = sufMin;
    this.tokAt = tokAt;
    for (let i = 0; i < n; i = this.skip[i]!) this.rootChild[this.byte[i]!] = i;
    this.flatStart = new Int32Array(V + 1);
    for (let id = 0; id < V; id++) this.flatStart[id + 1] = this.flatStart[id]! + (bytesOf[id]?.length ?? 0);
    this.flatBytes = new Uint8Array(this.flatStart[V]!);
    for (let id = 0; id < V; id++) if (bytesOf[id]) this.flatBytes.set(bytesOf[id]!, this.flatStart[id]!);
    // Subtree summaries, children before parents (reverse preorder).
    const below = new Uint32Array(n * 4);
    const high = new Uint8Array(n);
    const reachMax = new Int16Array(n);
    const reachMin = new Int16Array(n).fill(0x7fff);
    for (let i = n - 1; i >= 0; i--) {
      const b = this.byte[i]!;
      if (b < 128) below[i * 4 + (b >> 5)]! |= 1 << (b & 31);
      else high[i] = 1;
      if (this.tokCount[i]! > 0) (reachMax[i] = 1), (reachMin[i] = 1);
      for (let j = i + 1; j < this.skip[i]!; j = this.skip[j]!) {
        for (let w = 0; w < 4; w++) below[i * 4 + w]! |= below[j * 4 + w]!;
        high[i] = high[i]! | high[j]!;
        reachMax[i] = Math.max(reachMax[i]!, Math.min(0x7fff, reachMax[j]! + 1));
        reachMin[i] = Math.min(reachMin[i]!, reachMin[j]! + 1);
      }
    }
    this.asciiBelow = below;
    this.highBelow = high;
    this.reachMax = reachMax;
    this.reachMin = reachMin;
    // Every JSON string's first mask takes one of these: build them with the vocabulary, not on a request's step.
    this.plainUpTo(0);
  }

  /** Plain text as a TextClass (the walk's skip tables). */
  get plainClass(): TextClass {
    return (this.plainCls ??= {
      sufMax: this.sufMax,
      sufMin: this.sufMin,
      ascii: null,
      maxLen: this.maxPlain,
      upTo: (n) => this.plainUpTo(n),
      tail: { trie: this.tail, from: this.tailFrom, maxPrefix: this.maxPlain },
    });
  }

  private plainCls: TextClass | undefined;
  private readonly classes = new Map<string, TextClass>();

  /**
   * The TextClass of a set of ASCII bytes (`k[b]` = 1 for b < 128), one
   * character per byte: the walk tests subtrees against the set with the
   * per-node summaries (asciiBelow); here only the tokens made of class bytes
   * alone, by length, are gathered (a walk of the class's part of the trie,
   * well under a millisecond for 128k tokens). At most 32 sets kept.
   */
  asciiClass(k: Uint8Array): TextClass {
    const ascii = new Uint32Array(4);
    for (let b = 0; b < 128; b++) if (k[b] === 1) ascii[b >> 5]! |= 1 << (b & 31);
    const key = ascii.join(',');
    let c = this.classes.get(key);
    if (c) return c;
    const { byte, depth, skip, tokStart, tokCount, tokens, tokAt } = this;
    // One walk of the class's part of the trie. Tokens made only of class bytes: their whole path is
    // in the class. The first node off the class below a class path (an exit: c class bytes, then
    // byte x) roots the tokens that leave the class there: tokens[tokAt[i] .. tokAt[skip[i]]).
    const byLen: number[][] = [[]];
    const exitNodes: number[] = [];
    let maxPrefix = 0;
    for (let i = 0; i < this.nodes; ) {
      const b = byte[i]!;
      if (b >= 128 || k[b] !== 1) {
        exitNodes.push(i);
        i = skip[i]!;
        continue;
      }
      if (depth[i]! > maxPrefix) maxPrefix = depth[i]!;
      const d = Math.min(0x7fff, depth[i]!);
      if (tokCount[i]! > 0) {
        while (byLen.length <= d) byLen.push([]);
        for (let t = tokStart[i]!, e = t + tokCount[i]!; t < e; t++) byLen[d]!.push(tokens[t]!);
      }
      i++;
    }
    const maxLen = byLen.length - 1;
    const upTo = lengthMasks(byLen, this.words);
    let exits: ClassExits | undefined;
    const buildExits = (): ClassExits => {
      // Exit subtrees bucketed by (c, x) with a counting sort; a bucket lists token-index ranges.
      const buckets = (maxPrefix + 1) * 256;
      const start = new Int32Array(buckets + 1);
      for (const i of exitNodes) start[(depth[i]! - 1) * 256 + byte[i]! + 1]!++;
      for (let q = 0; q < buckets; q++) start[q + 1]! += start[q]!;
      const fill = start.slice(0, buckets);
      const ranges = new Int32Array(2 * start[buckets]!);
      for (const i of exitNodes) {
        const at = fill[(depth[i]! - 1) * 256 + byte[i]!]!++;
        ranges[2 * at] = tokAt[i]!;
        ranges[2 * at + 1] = tokAt[skip[i]!]!;
      }
      return { start, ranges };
    };
    c = { sufMax: null, sufMin: null, ascii, maxLen, upTo, maxPrefix, exits: () => (exits ??= buildExits()) };
    if (this.classes.size >= 32) this.classes.delete(this.classes.keys().next().value!);
    this.classes.set(key, c);
    return c;
  }

  /**
   * The TextClass of plain text but a few ASCII bytes (`odd[b]` = 1): the
   * class of a state that takes every plain character alike except those (a
   * pattern's letters in free text). Subtrees are tested with the plain
   * tables plus asciiBelow against the odd set; the class tokens (plain, no
   * odd byte) by character count are gathered in one scan of the vocabulary.
   * Shares the 32 kept sets with asciiClass.
   */
  plainExceptClass(odd: Uint8Array): TextClass {
    const set = new Uint32Array(4);
    for (let b = 0; b < 128; b++) if (odd[b] === 1) set[b >> 5]! |= 1 << (b & 31);
    const key = `plain-${set.join(',')}`;
    let c = this.classes.get(key);
    if (c) return c;
    let maxLen = 0;
    let maxPrefix = 0;
    const byLen: number[][] = [[]];
    // The other tokens (id, class characters they start with), for a trie of what follows their class start.
    const tailIds: number[] = [];
    const from = new Int32Array(this.vocabSize);
    const { flatBytes, flatStart, tokens } = this;
    for (let k = 0; k < tokens.length; k++) {
      const id = tokens[k]!;
      const start = flatStart[id]!;
      const len = flatStart[id + 1]! - start;
      // The class start: the plain start up to the first odd byte (ASCII, so never inside a
      // character); its characters are its bytes that do not continue one.
      const plainEnd = this.plainChars[id]! >= 0 ? len : this.tailFrom[id]!;
      let o = 0;
      let n = 0;
      for (; o < plainEnd; o++) {
        const x = flatBytes[start + o]!;
        if (x < 128 && odd[x] === 1) break;
        if ((x & 0xc0) !== 0x80) n++;
      }
      if (n > maxPrefix) maxPrefix = n;
      if (o === len) {
        while (byLen.length <= n) byLen.push([]);
        byLen[n]!.push(id);
        if (n > maxLen) maxLen = n;
        continue;
      }
      from[id] = o;
      tailIds.push(id, n);
    }
    // A tail trie costs about 2 ms per thousand tokens, once per vocabulary and set; past the
    // bound (a common letter) masks walk the vocabulary trie with this class's skips instead.
    let tail: TextClass['tail'];
    if (tailIds.length / 2 <= MAX_CLASS_TAILS) {
      const tails: Array<{ id: number; key: string; group: number }> = [];
      for (let k = 0; k < tailIds.length; k += 2) {
        const id = tailIds[k]!;
        let key = '';
        for (let i = flatStart[id]! + from[id]!, e = flatStart[id + 1]!; i < e; i += 4096) key += String.fromCharCode(...flatBytes.subarray(i, Math.min(e, i + 4096)));
        tails.push({ id, key, group: tailIds[k + 1]! });
      }
      tails.sort((a, b) => a.group - b.group || (a.key < b.key ? -1 : a.key > b.key ? 1 : a.id - b.id));
      tail = { trie: flatten(tails, maxPrefix + 1), from, maxPrefix };
    }
    c = { sufMax: this.sufMax, sufMin: this.sufMin, ascii: null, odd: set, maxLen, upTo: lengthMasks(byLen, this.words), tail };
    if (this.classes.size >= 32) this.classes.delete(this.classes.keys().next().value!);
    this.classes.set(key, c);
    return c;
  }

  /** Bitset of the plain tokens of at most `chars` characters (read-only; all lengths built on first use, cumulatively). */
  plainUpTo(chars: number): Uint32Array {
    if (this.plainMasks.length === 0) {
      const byLen: number[][] = Array.from({ length: this.maxPlain + 1 }, () => []);
      for (let id = 0; id < this.vocabSize; id++) if (this.plainChars[id]! >= 0) byLen[this.plainChars[id]!]!.push(id);
      let m = new Uint32Array(this.words);
      for (const ids of byLen) {
        m = m.slice();
        for (const id of ids) setBit(m, id);
        this.plainMasks.push(m);
      }
    }
    return this.plainMasks[Math.max(0, Math.min(chars, this.maxPlain))]!;
  }
}

/**
 * Cumulative bitsets of tokens by length: upTo(n) holds every token of
 * byLen[0..n] (n clamped to the longest; built on first use, read-only).
 */
function lengthMasks(byLen: readonly number[][], words: number): (len: number) => Uint32Array {
  const masks: Uint32Array[] = [];
  return (len) => {
    if (masks.length === 0) {
      let m = new Uint32Array(words);
      for (const ids of byLen) {
        m = m.slice();
        for (const id of ids) setBit(m, id);
        masks.push(m);
      }
    }
    return masks[Math.max(0, Math.min(len, byLen.length - 1))]!;
  };
}

/**
 * Per byte offset o of `b`: how many plain characters `b[o..]` is, or -1 if
 * it is not plain text (o inside a character, a control, `"`, `\\`, invalid
 * UTF-8). Counts are capped at 32767.
 */
function suffixChars(b: Uint8Array): Int16Array {
  const cnt = new Int16Array(b.length + 1);
  for (let o = b.length - 1; o >= 0; o--) {
    const len = plainCharAt(b, o);
    cnt[o] = len > 0 && cnt[o + len]! >= 0 ? Math.min(0x7fff, cnt[o + len]! + 1) : -1;
  }
  return cnt;
}

/** Byte length of the plain character at b[o], or 0 if none starts there. */
function plainCharAt(b: Uint8Array, o: number): number {
  const x = b[o]!;
  if (x < 0x80) return x < 0x20 || x === 0x22 || x === 0x5c || x === 0x7f ? 0 : 1;
  const len = x >= 0xc2 && x <= 0xdf ? 2 : x >= 0xe0 && x <= 0xef ? 3 : x >= 0xf0 && x <= 0xf4 ? 4 : 0;
  if (len === 0 || o + len > b.length) return 0;
  for (let k = 1; k < len; k++) if ((b[o + k]! & 0xc0) !== 0x80) return 0;
  const y = b[o + 1]!;
  // Overlong, surrogate and out-of-range forms are not characters; U+0080–U+009F are (C1) controls.
  if ((x === 0xe0 && y < 0xa0) || (x === 0xed && y > 0x9f) || (x === 0xf0 && y < 0x90) || (x === 0xf4 && y > 0x8f) || (x === 0xc2 && y < 0xa0)) return 0;
  return len;
}
/**
 * A class of text (plain text, or a set of ASCII bytes) as the mask walk uses
 * it: per trie node the longest / shortest class suffix of the tokens under it
 * (-1 if some suffix is not all class text), and the tokens made only of class
 * text, by length in characters (cumulative bitsets, read-only). Plain text
 * has per-node tables (`sufMax` / `sufMin`); an ASCII set is the 128-bit set
 * `ascii`, tested against TokenTrie.asciiBelow (its bounds are then
 * reachMax / reachMin).
 */
export interface TextClass {
  readonly sufMax: Int16Array | null;
  readonly sufMin: Int16Array | null;
  readonly ascii: Uint32Array | null;
  /** Plain text but these ASCII bytes (a 128-bit set; with the plain sufMax / sufMin): a subtree is class text when plain and none of them occurs in it. */
  readonly odd?: Uint32Array;
  /** Longest token made only of class text, in characters. */
  readonly maxLen: number;
  /**
   * Plain classes: the tokens that are not class text, in a trie of what
   * follows their class start (at least one byte), grouped by that start's
   * character count; `from[id]` = the byte offset where a token's tail
   * starts; `maxPrefix` = the longest class start of any token, in characters.
   */
  readonly tail?: { readonly trie: FlatTrie; readonly from: Int32Array; readonly maxPrefix: number };
  upTo(chars: number): Uint32Array;
  /** ASCII classes: the longest run of class bytes any token starts with (whole class tokens included). */
  readonly maxPrefix?: number;
  /** ASCII classes: the other tokens by class prefix length and next byte (built on first use). */
  readonly exits?: () => ClassExits;
}

/**
 * Tokens that leave an ASCII class, bucketed by class prefix length c and next
 * byte x: bucket c·256 + x is the token-index ranges
 * `tokens[ranges[2r] .. ranges[2r + 1])` for r in start[c·256 + x] .. start[c·256 + x + 1].
 */
export interface ClassExits {
  readonly start: Int32Array;
  readonly ranges: Int32Array;
}

/** A byte trie in preorder, optionally split in groups (each its own forest). */
export interface FlatTrie {
  readonly nodes: number;
  readonly maxDepth: number;
  readonly byte: Uint8Array;
  readonly depth: Uint16Array;
  readonly skip: Int32Array;
  readonly tokStart: Int32Array;
  readonly tokCount: Int32Array;
  readonly tokens: Int32Array;
  /** Group g holds nodes groupStart[g] .. groupStart[g + 1]. */
  readonly groupStart: Int32Array;
}

/** Flattens keyed tokens sorted by (group, key) into a preorder trie; keys are non-empty byte strings. */
function flatten(entries: ReadonlyArray<{ id: number; key: string; group: number }>, groups: number): FlatTrie {
  const total = entries.reduce((n, e) => n + e.key.length, 0);
  const byte = new Uint8Array(total);
  const depth = new Uint16Array(total);
  const skip = new Int32Array(total);
  const tokStart = new Int32Array(total).fill(-1);
  const tokCount = new Int32Array(total);
  const tokens = new Int32Array(entries.length);
  const groupStart = new Int32Array(groups + 1);
  let n = 0;
  let nt = 0;
  let maxDepth = 0;
  const path: number[] = [];
  let prev = '';
  let group = 0;
  for (const { id, key, group: g } of entries) {
    if (g !== group) {
      while (path.length) skip[path.pop()!] = n;
      for (let x = group + 1; x <= g; x++) groupStart[x] = n;
      group = g;
      prev = '';
    }
    let l = 0;
    const lim = Math.min(prev.length, key.length);
    while (l < lim && prev.charCodeAt(l) === key.charCodeAt(l)) l++;
    while (path.length > l) skip[path.pop()!] = n;
    for (let d = l; d < key.length; d++) {
      byte[n] = key.charCodeAt(d);
      depth[n] = d + 1;
      path.push(n++);
    }
    const node = path[path.length - 1]!;
    if (tokStart[node]! < 0) tokStart[node] = nt;
    tokCount[node]!++;
    tokens[nt++] = id;
    maxDepth = Math.max(maxDepth, key.length);
    prev = key;
  }
  while (path.length) skip[path.pop()!] = n;
  for (let x = group + 1; x <= groups; x++) groupStart[x] = n;
  return {
    nodes: n,
    maxDepth,
    byte: byte.slice(0, n),
    depth: depth.slice(0, n),
    skip: skip.slice(0, n),
    tokStart: tokStart.slice(0, n),
    tokCount: tokCount.slice(0, n),
    tokens,
    groupStart,
  };
}

export const setBit = (m: Uint32Array, t: number): void => {
  m[t >>> 5]! |= 1 << (t & 31);
};
export const clearBit = (m: Uint32Array, t: number): void => {
  m[t >>> 5]! &= ~(1 << (t & 31));
};
export const hasBit = (m: Uint32Array, t: number): boolean => (m[t >>> 5]! & (1 << (t & 31))) !== 0;

/** Interns equal masks (many automaton states allow exactly the same tokens) to save memory. */
export class MaskPool {
  private readonly byHash = new Map<number, Uint32Array[]>();

  intern(m: Uint32Array): Uint32Array {
    let h = 0x811c9dc5;
    for (let i = 0; i < m.length; i++) h = Math.imul(h ^ m[i]!, 16777619);
    const list = this.byHash.get(h);
    if (!list) {
      this.byHash.set(h, [m]);
      return m;
    }
    for (const x of list) {
      let eq = true;
      for (let i = 0; i < m.length && eq; i++) eq = x[i] === m[i];
      if (eq) return x;
    }
    list.push(m);
    return m;
  }
}
