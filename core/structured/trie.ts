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

export class TokenTrie {
  readonly vocabSize: number;
  /** Mask length in u32 words: ceil(vocabSize / 32). */
  readonly words: number;
  readonly eos: readonly number[];
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
      let key = '';
      for (let i = 0; i < b.length; i += 4096) key += String.fromCharCode(...b.subarray(i, i + 4096));
      entries.push({ id, key });
    }
    this.bytesOf = bytesOf;
    entries.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.id - b.id));
    const total = entries.reduce((n, e) => n + e.key.length, 0);
    const byte = new Uint8Array(total);
    const depth = new Uint16Array(total);
    const skip = new Int32Array(total);
    const tokStart = new Int32Array(total).fill(-1);
    const tokCount = new Int32Array(total);
    const tokens = new Int32Array(entries.length);
    let n = 0;
    let nt = 0;
    let maxDepth = 0;
    const path: number[] = [];
    let prev = '';
    for (const { id, key } of entries) {
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
    this.nodes = n;
    this.maxDepth = maxDepth;
    this.byte = byte.slice(0, n);
    this.depth = depth.slice(0, n);
    this.skip = skip.slice(0, n);
    this.tokStart = tokStart.slice(0, n);
    this.tokCount = tokCount.slice(0, n);
    this.tokens = tokens;
    this.posOf = new Int32Array(V).fill(-1);
    tokens.forEach((id, k) => (this.posOf[id] = k));
  }
}

export const setBit = (m: Uint32Array, t: number): void => {
  m[t >>> 5]! |= 1 << (t & 31);
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
