/**
 * The code-point set operations (linear merges over normalized range lists)
 * against a direct per-code-point evaluation, on random sets drawn near the
 * interesting boundaries (ASCII, the UTF-8 length steps, the surrogates, the
 * last scalar value): results must be normalized (sorted, disjoint,
 * non-adjacent, no surrogates) and hold exactly the right members.
 */
import { describe, expect, it } from 'vitest';
import { hasCp, intersect, MAX_CP, negate, type Ranges, ranges, single, subtract, union } from '../../core/structured/charset.ts';
import { rng } from './support.ts';

const ANCHORS = [0, 0x20, 0x7f, 0x80, 0x7ff, 0x800, 0xd7ff, 0xd800, 0xdfff, 0xe000, 0xffff, 0x10000, MAX_CP];

function randomSet(r: () => number): Ranges {
  const pairs: Array<[number, number]> = [];
  const n = Math.floor(r() * 6);
  for (let k = 0; k < n; k++) {
    const a = Math.max(0, Math.min(MAX_CP, ANCHORS[Math.floor(r() * ANCHORS.length)]! + Math.floor(r() * 9) - 4));
    pairs.push([a, Math.min(MAX_CP, a + Math.floor(r() * (r() < 0.2 ? 0x3000 : 6)))]);
  }
  return ranges(pairs);
}

/** The code points worth probing for these sets: every range end and its neighbours, and the anchors. */
function probes(...sets: Ranges[]): number[] {
  const out = new Set<number>(ANCHORS.flatMap((a) => [a - 1, a, a + 1]));
  for (const s of sets) for (const x of s) for (const d of [-1, 0, 1]) out.add(x + d);
  return [...out].filter((c) => c >= 0 && c <= MAX_CP);
}

function expectNormalized(s: Ranges): void {
  for (let i = 0; i < s.length; i += 2) {
    expect(s[i]!).toBeLessThanOrEqual(s[i + 1]!);
    if (i) expect(s[i]!).toBeGreaterThan(s[i - 1]! + 1);
    expect(s[i + 1]! < 0xd800 || s[i]! > 0xdfff).toBe(true);
  }
}

const surrogate = (c: number): boolean => c >= 0xd800 && c <= 0xdfff;

describe('code-point sets', () => {
  it('union, negate, intersect and subtract hold exactly the right members (500 random pairs)', () => {
    const r = rng(7);
    for (let k = 0; k < 500; k++) {
      const a = randomSet(r);
      const b = randomSet(r);
      const ops: Array<[Ranges, (c: number) => boolean]> = [
        [union(a, b), (c) => hasCp(a, c) || hasCp(b, c)],
        [union(a), (c) => hasCp(a, c)],
        [negate(a), (c) => !surrogate(c) && !hasCp(a, c)],
        [intersect(a, b), (c) => hasCp(a, c) && hasCp(b, c)],
        [subtract(a, b), (c) => hasCp(a, c) && !hasCp(b, c)],
      ];
      for (const [got, want] of ops) {
        expectNormalized(got);
        for (const c of probes(a, b, got)) expect(hasCp(got, c), `${JSON.stringify({ a, b, got, c })}`).toBe(want(c));
      }
    }
  });

  it('drops surrogates from a single code point and from ranges', () => {
    expect(single(0xd800)).toEqual([]);
    expect(ranges([[0xd700, 0xe100]])).toEqual([0xd700, 0xd7ff, 0xe000, 0xe100]);
    expect(negate([0, 0xd7ff])).toEqual([0xe000, MAX_CP]);
  });
});
