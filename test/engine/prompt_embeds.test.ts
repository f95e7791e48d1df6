/**
 * Image-to-text plumbing, pure logic: EmbedCollector picks the feature rows of the
 * prompt positions a (chunked) step computes and maps them to step token indices;
 * imageSalt keys only the KV blocks that overlap an image by that image's hash, so
 * the KvCacheManager shares a text prefix but never a block of another image.
 */
import { describe, expect, it } from 'vitest';
import { KvCacheManager } from '../../core/engine/kv_cache.ts';
import { EmbedCollector, imageSalt } from '../../core/engine/prompt_embeds.ts';
import type { PromptEmbeds } from '../../core/engine/scheduler.ts';

/** Rows of width 2 whose values name their position: row for position p = [p, -p]. */
function embeds(positions: number[]): PromptEmbeds {
  return { positions: Uint32Array.from(positions), rows: Float32Array.from(positions.flatMap((p) => [p, -p])), width: 2 };
}

describe('EmbedCollector', () => {
  it('takes the rows inside each scheduled chunk, at their step token indices', () => {
    const e = embeds([3, 4, 5, 9]);
    const c = new EmbedCollector();
    c.add(e, 0, 4, 0); // positions 0..3 -> step tokens 0..3: position 3 only
    c.add(embeds([1]), 7, 3, 4); // another sequence, positions 7..9: no row
    c.add(e, 4, 6, 7); // positions 4..9 as step tokens 7..12: 4, 5, 9
    const got = c.inputs();
    expect(Array.from(got.embedAt!)).toEqual([3, 7, 8, 12]);
    expect(Array.from(got.embedRows!)).toEqual([3, -3, 4, -4, 5, -5, 9, -9]);
  });

  it('gives nothing for decode steps past the prompt', () => {
    const c = new EmbedCollector();
    c.add(embeds([1, 2]), 40, 1, 0);
    expect(c.inputs()).toEqual({});
  });
});

describe('imageSalt with the KV cache', () => {
  const B = 4;
  // BOS, 2 text tokens, image (4 placeholders, id 9) at 3..6, text 7..9: blocks [0,4) [4,8) [8,12)
  const tokens = [1, 5, 6, 9, 9, 9, 9, 7, 8, 2, 3];
  const spans = (h: string): { start: number; length: number; hash: string }[] => [{ start: 3, length: 4, hash: h }];

  it('keys blocks overlapping an image by its hash, text-only blocks by nothing', () => {
    const salt = imageSalt(spans('A'));
    expect(typeof salt).toBe('function');
    const f = salt as (s: number, e: number) => string;
    expect([f(0, 4), f(4, 8), f(8, 12)]).toEqual(['A', 'A', '']);
    expect(imageSalt([])).toBe('');
  });

  it('reuses blocks of the same image, never of another', () => {
    const kv = new KvCacheManager(16, B);
    kv.attachPrefix('a', tokens, imageSalt(spans('A')));
    kv.allocate('a', tokens.length);
    kv.commit('a', tokens, tokens.length, imageSalt(spans('A')));
    kv.free('a');
    expect(kv.attachPrefix('same', tokens, imageSalt(spans('A')))).toBe(8);
    expect(kv.attachPrefix('other', tokens, imageSalt(spans('B')))).toBe(0);
    // A prompt whose image starts later shares the text-only first block.
    const later = [1, 5, 6, 4, 9, 9, 9, 9, 7, 8, 2];
    expect(kv.attachPrefix('later', later, imageSalt([{ start: 4, length: 4, hash: 'B' }]))).toBe(0); // block 0 differs in tokens
  });

  it('shares a text-only prefix block in front of different images', () => {
    const kv = new KvCacheManager(16, B);
    const t = [1, 5, 6, 7, 9, 9, 9, 9, 8, 2]; // image at 4..7: block 0 is text only
    const sa = imageSalt([{ start: 4, length: 4, hash: 'A' }]);
    kv.attachPrefix('a', t, sa);
    kv.allocate('a', t.length);
    kv.commit('a', t, t.length, sa);
    kv.free('a');
    expect(kv.attachPrefix('b', t, imageSalt([{ start: 4, length: 4, hash: 'B' }]))).toBe(4);
    expect(kv.attachPrefix('a2', t, sa)).toBe(8);
  });
});
