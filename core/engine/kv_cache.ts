/**
 * Paged KV-cache bookkeeping: a pool of fixed-size blocks, a block table per
 * sequence, and prefix caching. Pure logic, no GPU imports.
 *
 * Prefix caching: a block that is full is registered under the key
 * (parent block's key id, its tokens, salt) — exact, collision-free, and
 * bounded in size because the parent is named by a small integer id. A new
 * sequence whose prompt starts with registered blocks reuses them (refcount
 * +1) and only computes the rest. Blocks whose refcount drops to zero stay
 * registered but evictable, least-recently-freed first.
 */

/**
 * Prefix-cache salt: one string for every block, or per block from its token
 * range [start, end) (image-to-text: the content hashes of the images whose
 * placeholder tokens fall in the block, so equal placeholder ids of different
 * images never share KV).
 */
export type Salt = string | ((start: number, end: number) => string);

const saltAt = (salt: Salt, block: number, B: number): string => (typeof salt === 'string' ? salt : salt(block * B, (block + 1) * B));

export interface KvCacheStats {
  numBlocks: number;
  freeBlocks: number;
  /** Free blocks that still hold a registered prefix. */
  cachedBlocks: number;
  /** Prompt tokens served from the prefix cache since start. */
  prefixHitTokens: number;
  /** Prompt tokens looked up since start. */
  prefixQueryTokens: number;
}

export class KvCacheManager {
  private readonly refs: Int32Array;
  /** Key id of a registered full block, or -1. */
  private readonly blockKey: Int32Array;
  /** Free blocks in LRU order (Map keeps insertion order; first = oldest). */
  private readonly freeQueue = new Map<number, true>();
  private readonly keyToBlock = new Map<string, number>();
  private readonly keyIds = new Map<string, number>();
  /** Key id -> key, for eviction. Ids are never reused, so a stale parent id can only miss, never match wrongly. */
  private readonly keyString = new Map<number, string>();
  private nextKeyId = 0;
  private readonly tables = new Map<string, number[]>();
  /** Per sequence: key id of its last registered full block (the parent for the next), and how many are registered. */
  private readonly registered = new Map<string, { parent: number; count: number }>();
  private hitTokens = 0;
  private queryTokens = 0;

  constructor(
    readonly numBlocks: number,
    readonly blockSize: number,
    readonly prefixCaching = true,
  ) {
    this.refs = new Int32Array(numBlocks);
    this.blockKey = new Int32Array(numBlocks).fill(-1);
    for (let b = 0; b < numBlocks; b++) this.freeQueue.set(b, true);
  }

  get freeCount(): number {
    return this.freeQueue.size;
  }

  stats(): KvCacheStats {
    let cached = 0;
    for (const b of this.freeQueue.keys()) if (this.blockKey[b]! >= 0) cached++;
    return {
      numBlocks: this.numBlocks,
      freeBlocks: this.freeQueue.size,
      cachedBlocks: cached,
      prefixHitTokens: this.hitTokens,
      prefixQueryTokens: this.queryTokens,
    };
  }

  blockTable(seq: string): readonly number[] {
    return this.tables.get(seq) ?? [];
  }

  private keyFor(parent: number, tokens: readonly number[], salt: string): string {
    return `${parent}|${salt}|${tokens.join(',')}`;
  }

  /**
   * Finds the longest cached prefix of `tokens` made of full blocks and
   * attaches those blocks to `seq` (which must have no table yet). At least
   * one token is always left to compute so the step yields logits. Returns the
   * number of tokens covered.
   */
  attachPrefix(seq: string, tokens: readonly number[], salt: Salt = ''): number {
    if (this.tables.has(seq)) throw new Error(`kv: sequence ${seq} already has blocks`);
    const table: number[] = [];
    this.tables.set(seq, table);
    this.registered.set(seq, { parent: -1, count: 0 });
    if (!this.prefixCaching) return 0;
    const B = this.blockSize;
    const maxBlocks = Math.floor((tokens.length - 1) / B);
    let parent = -1;
    for (let i = 0; i < maxBlocks; i++) {
      const key = this.keyFor(parent, tokens.slice(i * B, (i + 1) * B), saltAt(salt, i, B));
      const block = this.keyToBlock.get(key);
      if (block === undefined) break;
      this.ref(block);
      table.push(block);
      parent = this.keyIds.get(key)!;
    }
    this.registered.set(seq, { parent, count: table.length });
    this.queryTokens += tokens.length;
    this.hitTokens += table.length * B;
    return table.length * B;
  }

  private ref(block: number): void {
    if (this.refs[block] === 0) this.freeQueue.delete(block);
    this.refs[block]!++;
  }

  /** Blocks needed to hold `totalTokens` for `seq` beyond what it has. */
  blocksNeeded(seq: string, totalTokens: number): number {
    const have = this.tables.get(seq)?.length ?? 0;
    return Math.max(0, Math.ceil(totalTokens / this.blockSize) - have);
  }

  /** Grows `seq`'s table to hold `totalTokens`; false (and no change) if the pool is short. */
  allocate(seq: string, totalTokens: number): boolean {
    const need = this.blocksNeeded(seq, totalTokens);
    if (need > this.freeQueue.size) return false;
    let table = this.tables.get(seq);
    if (!table) {
      table = [];
      this.tables.set(seq, table);
      this.registered.set(seq, { parent: -1, count: 0 });
    }
    for (let i = 0; i < need; i++) {
      const block = this.freeQueue.keys().next().value as number;
      this.freeQueue.delete(block);
      const k = this.blockKey[block]!;
      if (k >= 0) {
        // Evict the oldest cached prefix block: it will be overwritten.
        const key = this.keyString.get(k)!;
        this.keyToBlock.delete(key);
        this.keyIds.delete(key);
        this.keyString.delete(k);
        this.blockKey[block] = -1;
      }
      this.refs[block] = 1;
      table.push(block);
    }
    return true;
  }

  /**
   * Registers `seq`'s blocks that became full now that `tokens` (its whole
   * known token list) are computed up to `computed`.
   */
  commit(seq: string, tokens: readonly number[], computed: number, salt: Salt = ''): void {
    if (!this.prefixCaching) return;
    const table = this.tables.get(seq);
    const reg = this.registered.get(seq);
    if (!table || !reg) return;
    const B = this.blockSize;
    const full = Math.min(Math.floor(computed / B), table.length);
    for (let i = reg.count; i < full; i++) {
      const key = this.keyFor(reg.parent, tokens.slice(i * B, (i + 1) * B), saltAt(salt, i, B));
      let id = this.keyIds.get(key);
      if (id === undefined) {
        id = this.nextKeyId++;
        this.keyString.set(id, key);
        this.keyIds.set(key, id);
      }
      const block = table[i]!;
      if (!this.keyToBlock.has(key) && this.blockKey[block]! < 0) {
        this.keyToBlock.set(key, block);
        this.blockKey[block] = id;
      }
      reg.parent = id;
      reg.count = i + 1;
    }
  }

  /**
   * Shrinks `seq`'s table to the blocks that hold its first `keepTokens`
   * tokens (speculative decoding drops the KV of rejected draft positions).
   * Registered blocks are never dropped: they hold committed tokens only, and
   * callers keep at least the committed ones.
   */
  truncate(seq: string, keepTokens: number): void {
    const table = this.tables.get(seq);
    if (!table) return;
    const keep = Math.max(Math.ceil(keepTokens / this.blockSize), this.registered.get(seq)?.count ?? 0);
    while (table.length > keep) {
      const b = table.pop()!;
      if (--this.refs[b]! === 0) this.freeQueue.set(b, true);
    }
  }

  /** Releases `seq`'s blocks; cached ones stay reusable until evicted. */
  free(seq: string): void {
    const table = this.tables.get(seq);
    if (!table) return;
    // Free in reverse so a sequence's tail blocks are evicted before its head.
    for (let i = table.length - 1; i >= 0; i--) {
      const b = table[i]!;
      if (--this.refs[b]! === 0) this.freeQueue.set(b, true);
    }
    this.tables.delete(seq);
    this.registered.delete(seq);
  }
}
