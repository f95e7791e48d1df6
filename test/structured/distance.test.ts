/**
 * Shortest completions (distance.ts): the worklist that searches a rule again
 * only when a rule it calls got shorter gives exactly the fixpoint of
 * searching every rule in rounds until nothing changes, on the rules of every
 * corpus schema (recursive and mutually recursive ones included) and of
 * hand-made mutual recursion, with the byte-fallback vocabulary (every byte a
 * token) and with only some bytes single tokens.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { FAR, shortestCompletions } from '../../core/structured/distance.ts';
import { compileRules } from '../../core/structured/index.ts';
import type { Nfa } from '../../core/structured/nfa.ts';

const dir = fileURLToPath(new URL('./schemas/', import.meta.url));
const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();

/** The round-based fixpoint: Bellman-Ford over rules, every rule searched each round (plain Dijkstra per rule). */
function roundsReference(nfas: readonly Nfa[], single: Uint8Array): Int32Array[] {
  const complete = new Int32Array(nfas.length).fill(FAR);
  let dist: Int32Array[] = [];
  for (let round = 0; round <= nfas.length; round++) {
    dist = nfas.map((n) => {
      const d = new Int32Array(n.size).fill(FAR);
      d[n.final] = 0;
      // Relax to a fixpoint (small NFAs): d[q] = min over edges of weight + d[target].
      for (let changed = true; changed; ) {
        changed = false;
        for (let q = 0; q < n.size; q++) {
          let best = d[q]!;
          for (const t of n.eps[q]!) best = Math.min(best, d[t]!);
          const e = n.edges[q]!;
          for (let k = 0; k < e.length; k += 3) {
            let ok = false;
            for (let b = e[k]!; b <= e[k + 1]! && !ok; b++) ok = single[b] === 1;
            if (ok) best = Math.min(best, 1 + d[e[k + 2]!]!);
          }
          const c = n.calls[q]!;
          for (let k = 0; k < c.length; k += 2) best = Math.min(best, complete[c[k]!]! + d[c[k + 1]!]!);
          best = Math.min(best, FAR);
          if (best < d[q]!) (d[q] = best), (changed = true);
        }
      }
      return d;
    });
    let changed = false;
    nfas.forEach((n, r) => {
      const c = dist[r]![n.start]!;
      if (c < complete[r]!) (complete[r] = c), (changed = true);
    });
    if (!changed) break;
  }
  return dist;
}

const everyByte = new Uint8Array(256).fill(1);
// Only digits, brackets, braces, quotes, commas, colons and lowercase letters as single tokens.
const someBytes = new Uint8Array(256);
for (const ch of '0123456789[]{}",:abcdefghijklmnopqrstuvwxyz') someBytes[ch.charCodeAt(0)] = 1;

describe('shortest completions: the worklist equals the round-based fixpoint', () => {
  it.each(files)('%s', (file) => {
    const schema = JSON.parse(readFileSync(dir + file, 'utf8')) as unknown;
    const { nfas } = compileRules({ kind: 'json_schema', schema }, 'none', false);
    if (nfas.some((n) => n.size > 4000)) return; // the reference relaxes in O(size^2)
    for (const single of [everyByte, someBytes]) {
      const got = shortestCompletions(nfas, single);
      const want = roundsReference(nfas, single);
      expect(got.map((d) => Array.from(d))).toEqual(want.map((d) => Array.from(d)));
    }
  });

  it('mutual recursion whose costs settle over several rules', () => {
    // a = "[" b? "]" ; b = a ("," a)* | "x" : shortest b is "x" (1), shortest a is "[]" (2).
    const schema = {
      $defs: {
        a: { type: 'array', items: { $ref: '#/$defs/b' } },
        b: { anyOf: [{ $ref: '#/$defs/a' }, { const: 'x' }] },
      },
      $ref: '#/$defs/a',
    };
    const { nfas } = compileRules({ kind: 'json_schema', schema }, 'none', false);
    const got = shortestCompletions(nfas, everyByte);
    expect(got.map((d) => Array.from(d))).toEqual(roundsReference(nfas, everyByte).map((d) => Array.from(d)));
    expect(got[0]![nfas[0]!.start]).toBe(2); // "[]"
  });
});
