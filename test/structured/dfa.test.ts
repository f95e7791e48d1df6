/**
 * Subset construction on random byte NFAs: the lazily built DFA accepts
 * exactly what a direct NFA simulation accepts, on every string of up to 5
 * bytes over a small alphabet, whether it is built byte by byte (`step`) or
 * row by row (`stepAll`); and interning gives one DFA state per distinct set
 * of NFA states (sets are looked up by hash: equal sets must meet, different
 * ones must never be merged).
 */
import { describe, expect, it } from 'vitest';
import { Dfa } from '../../core/structured/dfa.ts';
import { Nfa } from '../../core/structured/nfa.ts';

/** Bytes the random NFAs use: a few single bytes and the edges of one range. */
const ALPHABET = [0x41, 0x42, 0x43, 0x61, 0x62, 0xc3];

function randomNfa(seed: number, states: number): Nfa {
  let r = seed >>> 0;
  const rand = (n: number): number => ((r = (Math.imul(r, 1103515245) + 12345) >>> 0) >>> 8) % n;
  const nfa = new Nfa();
  for (let i = 0; i < states; i++) nfa.add();
  nfa.start = 0;
  nfa.final = states - 1;
  for (let q = 0; q < states; q++) {
    for (let k = rand(4); k > 0; k--) {
      const lo = ALPHABET[rand(ALPHABET.length)]!;
      // Ranges of one byte, and a few wide ones that cover several alphabet bytes.
      const hi = rand(4) === 0 ? Math.min(255, lo + 0x21) : lo;
      nfa.edges[q]!.push(lo, hi, rand(states));
    }
    if (rand(3) === 0) nfa.eps[q]!.push(rand(states));
  }
  return nfa;
}

/** Whether the NFA accepts `bytes` (ε-closures computed directly, no DFA). */
function nfaAccepts(nfa: Nfa, bytes: number[]): boolean {
  const close = (set: Set<number>): Set<number> => {
    const stack = [...set];
    while (stack.length) for (const t of nfa.eps[stack.pop()!]!) if (!set.has(t)) set.add(t), stack.push(t);
    return set;
  };
  let cur = close(new Set([nfa.start]));
  for (const b of bytes) {
    const next = new Set<number>();
    for (const q of cur) {
      const e = nfa.edges[q]!;
      for (let k = 0; k < e.length; k += 3) if (b >= e[k]! && b <= e[k + 1]!) next.add(e[k + 2]!);
    }
    cur = close(next);
  }
  return cur.has(nfa.final);
}

function* strings(len: number): Generator<number[]> {
  yield [];
  if (len === 0) return;
  for (const s of strings(len - 1)) if (s.length === len - 1) for (const b of ALPHABET) yield [...s, b];
}

const ALL = [...strings(1), ...strings(2), ...strings(3), ...strings(4), ...strings(5)].filter((s, i, a) => a.findIndex((t) => t.join() === s.join()) === i);

const acceptedCounts: number[] = [];

describe('lazy subset construction', () => {
  for (const [seed, states] of [[1, 4], [2, 6], [3, 8], [4, 12], [5, 16], [6, 24], [7, 30], [8, 40]] as const) {
    it(`random NFA ${seed} (${states} states): accepts what the NFA accepts, one DFA state per set`, () => {
      const nfa = randomNfa(seed * 7919, states);
      const byByte = new Dfa(nfa);
      const byRow = new Dfa(nfa);
      const run = (d: Dfa, bytes: number[], row: boolean): boolean => {
        let s = d.start;
        for (const b of bytes) {
          s = row ? d.stepAll(s)[b]! : d.step(s, b);
          if (s < 0) return false;
        }
        return d.accepting(s);
      };
      let accepted = 0;
      for (const s of ALL) {
        const want = nfaAccepts(nfa, s);
        if (want) accepted++;
        expect(run(byByte, s, false)).toBe(want);
        expect(run(byRow, s, true)).toBe(want);
      }
      for (const d of [byByte, byRow]) {
        const keys = Array.from({ length: d.size }, (_, i) => d.members(i).join(','));
        expect(new Set(keys).size).toBe(keys.length);
      }
      // The complete construction reaches the same sets however it got there.
      byByte.complete(100_000);
      byRow.complete(100_000);
      const sets = (d: Dfa): string[] => Array.from({ length: d.size }, (_, i) => d.members(i).join(',')).sort();
      expect(sets(byByte)).toEqual(sets(byRow));
      acceptedCounts.push(accepted);
    });
  }
  it('charStep: where every byte sequence of a character leads, as stepping each one finds, interning only that state', () => {
    const shapes: Array<Array<readonly [number, number]>> = [[[0x41, 0x43]], [[0x41, 0x41]], [[0x61, 0x62]], [[0xc3, 0xc3], [0x41, 0x62]], [[0x41, 0x62], [0x41, 0x43]], [[0x40, 0xc3]]];
    const sequences = (shape: Array<readonly [number, number]>): number[][] =>
      shape.reduce<number[][]>((acc, [lo, hi]) => acc.flatMap((p) => Array.from({ length: hi - lo + 1 }, (_, k) => [...p, lo + k])), [[]]);
    let moved = 0;
    let refused = 0;
    for (let seed = 1; seed <= 40; seed++) {
      const nfa = randomNfa(seed * 104729, 4 + (seed % 20));
      const d = new Dfa(nfa);
      d.complete(100_000);
      // A byte path to every state, to reach the same sets in an automaton built lazily (whose
      // charStep works on NFA sets; d's reads its rows).
      const path: number[][] = [[]];
      for (let s = 0; s < d.size; s++) for (let b = 0; b < 256; b++) if (d.step(s, b) >= 0) path[d.step(s, b)] ??= [...path[s]!, b];
      const lazy = new Dfa(nfa);
      const members = (x: Dfa, s: number): string | null => (s < 0 ? null : x.members(s).join(','));
      for (let s = 0; s < d.size; s++) {
        const l = path[s]!.reduce((x, b) => lazy.step(x, b), lazy.start);
        for (const shape of shapes) {
          const ends = new Set(sequences(shape).map((bytes) => bytes.reduce((x, b) => (x < 0 ? -1 : d.step(x, b)), s)));
          const want = ends.size === 1 ? [...ends][0]! : -1;
          expect(d.charStep(s, shape)).toBe(want);
          expect(members(lazy, lazy.charStep(l, shape))).toBe(members(d, want));
          if (want >= 0) moved++;
          else refused++;
        }
      }
      // On a fresh automaton: a two-byte character adds at most the state it ends in.
      const fresh = new Dfa(nfa);
      const before = fresh.size;
      fresh.charStep(fresh.start, [[0xc3, 0xc3], [0x41, 0x62]]);
      expect(fresh.size - before).toBeLessThanOrEqual(1);
    }
    expect(moved).toBeGreaterThan(20);
    expect(refused).toBeGreaterThan(20);
  });

  it('the random NFAs are not trivial: most accept some strings and reject others', () => {
    expect(acceptedCounts.filter((n) => n > 0 && n < ALL.length).length).toBeGreaterThanOrEqual(acceptedCounts.length / 2);
  });
});
