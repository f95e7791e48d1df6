/**
 * KV bookkeeping of speculative rollback (KvCacheManager.truncate): blocks
 * that held rejected draft positions go back to the pool, registered
 * prefix-cache blocks (committed tokens only) are never dropped, and a block
 * registered after a rollback is keyed by the committed tokens.
 */
import { describe, expect, it } from 'vitest';
import { KvCacheManager } from '../../core/engine/kv_cache.ts';

describe('KvCacheManager.truncate', () => {
  it('returns the blocks past the kept tokens to the pool', () => {
    const kv = new KvCacheManager(16, 4);
    expect(kv.allocate('a', 6)).toBe(true); // 2 blocks
    expect(kv.allocate('a', 6 + 4)).toBe(true); // + verification slots: 3 blocks
    expect(kv.freeCount).toBe(13);
    kv.truncate('a', 7); // 2 drafts accepted of 4: positions 0..6 hold committed tokens
    expect(kv.blockTable('a')).toHaveLength(2);
    expect(kv.freeCount).toBe(14);
    kv.truncate('a', 8); // never grows
    expect(kv.blockTable('a')).toHaveLength(2);
    kv.free('a');
    expect(kv.freeCount).toBe(16);
  });

  it('keeps registered blocks, and prefix reuse sees only committed tokens', () => {
    const kv = new KvCacheManager(16, 4);
    const committed = [1, 2, 3, 4, 5, 6, 7, 8, 9];
    kv.attachPrefix('a', committed);
    expect(kv.allocate('a', 9 + 4)).toBe(true);
    kv.commit('a', committed, 8); // two full blocks registered
    kv.truncate('a', 1); // asks for less than what is registered: registered blocks stay
    expect(kv.blockTable('a')).toHaveLength(2);
    kv.free('a');
    // A new sequence with the same first 8 committed tokens reuses both blocks; another 2nd block does not match.
    expect(kv.attachPrefix('b', [...committed.slice(0, 8), 42])).toBe(8);
    expect(kv.attachPrefix('c', [1, 2, 3, 4, 5, 6, 7, 99, 42])).toBe(4);
    kv.free('b');
    kv.free('c');
    expect(kv.freeCount).toBe(16);
  });

  it('ignores unknown sequences', () => {
    const kv = new KvCacheManager(4, 4);
    kv.truncate('nobody', 0);
    expect(kv.freeCount).toBe(4);
  });
});
