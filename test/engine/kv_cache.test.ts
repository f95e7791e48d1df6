import { describe, expect, it } from 'vitest';
import { KvCacheManager } from '../../core/engine/kv_cache.ts';

const range = (a: number, b: number): number[] => Array.from({ length: b - a }, (_, i) => a + i);

describe('KvCacheManager', () => {
  it('allocates blocks on demand and returns them all on free', () => {
    const kv = new KvCacheManager(8, 4);
    expect(kv.allocate('a', 5)).toBe(true); // 2 blocks
    expect(kv.blockTable('a')).toHaveLength(2);
    expect(kv.allocate('a', 8)).toBe(true); // still 2
    expect(kv.blockTable('a')).toHaveLength(2);
    expect(kv.allocate('a', 9)).toBe(true); // 3
    expect(kv.freeCount).toBe(5);
    expect(kv.allocate('b', 21)).toBe(false); // needs 6
    expect(kv.freeCount).toBe(5);
    kv.free('a');
    expect(kv.freeCount).toBe(8);
  });

  it('reuses full prompt blocks across sequences and always leaves a token to compute', () => {
    const kv = new KvCacheManager(16, 4);
    const prompt = range(100, 110); // 10 tokens: 2 full blocks
    expect(kv.attachPrefix('a', prompt)).toBe(0);
    kv.allocate('a', 10);
    kv.commit('a', prompt, 10);
    const again = [...prompt.slice(0, 8), 7, 7, 7];
    expect(kv.attachPrefix('b', again)).toBe(8);
    expect(kv.blockTable('b')).toEqual(kv.blockTable('a').slice(0, 2));
    // A prompt equal to the cached blocks keeps its last token to compute.
    expect(kv.attachPrefix('c', prompt.slice(0, 8))).toBe(4);
    kv.free('a');
    kv.free('b');
    kv.free('c');
    expect(kv.freeCount).toBe(16);
    expect(kv.stats().cachedBlocks).toBe(2);
  });

  it('distinguishes prefixes by parent chain and salt', () => {
    const kv = new KvCacheManager(16, 2);
    const p1 = [1, 2, 3, 4, 5];
    kv.attachPrefix('a', p1);
    kv.allocate('a', 5);
    kv.commit('a', p1, 5);
    // Same second block, different first block: no reuse of the second.
    expect(kv.attachPrefix('b', [9, 9, 3, 4, 5])).toBe(0);
    expect(kv.attachPrefix('c', p1, 'image:abc')).toBe(0);
    expect(kv.attachPrefix('d', p1)).toBe(4);
  });

  it('evicts least-recently-freed cached blocks when the pool is short', () => {
    const kv = new KvCacheManager(4, 2);
    const p = [1, 2, 3, 4, 5];
    kv.attachPrefix('a', p);
    kv.allocate('a', 5);
    kv.commit('a', p, 5);
    kv.free('a');
    expect(kv.stats().cachedBlocks).toBe(2);
    kv.attachPrefix('x', [8, 8, 8, 8, 8, 8, 8, 8]);
    expect(kv.allocate('x', 8)).toBe(true); // needs all 4: evicts the cached ones
    expect(kv.stats().cachedBlocks).toBe(0);
    kv.free('x');
    expect(kv.attachPrefix('y', p)).toBe(0);
  });

  it('can be switched off', () => {
    const kv = new KvCacheManager(8, 2, false);
    kv.attachPrefix('a', [1, 2, 3]);
    kv.allocate('a', 3);
    kv.commit('a', [1, 2, 3], 3);
    expect(kv.attachPrefix('b', [1, 2, 3])).toBe(0);
  });
});
