/**
 * The vocabulary-independent side of the native backend: a grammar's rules as
 * trimmed byte NFAs (what a compile worker builds) and the FOLLOW sets of the
 * rules' automata (which bytes may come right after a rule's value).
 */
import type { Dfa } from './dfa.ts';
import { buildNfa, type Nfa, trim } from './nfa.ts';
import type { GrammarAst } from './schema.ts';

/** A grammar's rules as trimmed byte NFAs: the root first, then every named rule (names[i - 1] is rule i's). */
export interface RuleNfas {
  readonly nfas: Nfa[];
  readonly names: string[];
}

/**
 * The vocabulary-independent part of a native compile: every rule's NFA,
 * trimmed to what can still complete; null if the language is empty. This is
 * the part whose work grows with the schema (expansions, character classes),
 * and what a compile worker runs off the reader's thread.
 */
export function grammarRules(g: GrammarAst): RuleNfas | null {
  const names = new Map<string, number>();
  const asts = [g.root];
  const ruleIndex = (name: string): number => {
    let i = names.get(name);
    if (i === undefined) {
      names.set(name, (i = asts.length));
      asts.push(g.rules.get(name)!);
    }
    return i;
  };
  const nfas: Nfa[] = [];
  for (let i = 0; i < asts.length; i++) nfas.push(buildNfa(asts[i]!, ruleIndex));
  const productive = new Uint8Array(nfas.length);
  for (let changed = true; changed; ) {
    changed = false;
    nfas.forEach((n, i) => {
      if (!productive[i] && reachesFinal(n, productive)) productive[i] = 1, (changed = true);
    });
  }
  if (!productive[0]) return null;
  for (const n of nfas) trim(n, (r) => productive[r] === 1);
  return { nfas, names: [...names.keys()] };
}

function reachesFinal(n: Nfa, productive: Uint8Array): boolean {
  const seen = new Uint8Array(n.size);
  const stack = [n.start];
  seen[n.start] = 1;
  while (stack.length) {
    const q = stack.pop()!;
    if (q === n.final) return true;
    const next = [...n.eps[q]!];
    const e = n.edges[q]!;
    for (let k = 2; k < e.length; k += 3) next.push(e[k]!);
    const c = n.calls[q]!;
    for (let k = 0; k < c.length; k += 2) if (productive[c[k]!]) next.push(c[k + 1]!);
    for (const t of next) if (!seen[t]) (seen[t] = 1), stack.push(t);
  }
  return false;
}

/** FOLLOW(rule): bytes that may come right after a complete value of the rule. */
export function followSets(machines: readonly Dfa[], nfas: readonly Nfa[]): Uint8Array[] {
  const first = machines.map(() => new Uint8Array(256));
  const firstDone = new Uint8Array(machines.length);
  const firstOf = (i: number): Uint8Array => {
    if (!firstDone[i]) {
      firstDone[i] = 1;
      const d = machines[i]!;
      const row = d.stepAll(d.start);
      for (let b = 0; b < 256; b++) if (row[b]! >= 0) first[i]![b] = 1;
      for (const [r] of d.calls(d.start)) firstOf(r).forEach((v, b) => v && (first[i]![b] = 1));
    }
    return first[i]!;
  };
  // Per call edge: the callee, the bytes that can follow it inside the caller, and whether the caller may end there.
  const sites: Array<{ callee: number; bytes: Uint8Array; caller: number; ends: boolean }> = [];
  nfas.forEach((n, caller) => {
    for (let q = 0; q < n.size; q++) {
      const c = n.calls[q]!;
      for (let k = 0; k < c.length; k += 2) {
        const bytes = new Uint8Array(256);
        let ends = false;
        const seen = new Set([c[k + 1]!]);
        const stack = [c[k + 1]!];
        while (stack.length) {
          const r = stack.pop()!;
          if (r === n.final) ends = true;
          const e = n.edges[r]!;
          for (let x = 0; x < e.length; x += 3) bytes.fill(1, e[x]!, e[x + 1]! + 1);
          const cc = n.calls[r]!;
          for (let x = 0; x < cc.length; x += 2) firstOf(cc[x]!).forEach((v, b) => v && (bytes[b] = 1));
          for (const t of n.eps[r]!) if (!seen.has(t)) seen.add(t), stack.push(t);
        }
        sites.push({ callee: c[k]!, bytes, caller, ends });
      }
    }
  });
  const follow = machines.map(() => new Uint8Array(256));
  for (let changed = true; changed; ) {
    changed = false;
    for (const s of sites) {
      const f = follow[s.callee]!;
      const add = (v: number, b: number): void => {
        if (v && !f[b]) (f[b] = 1), (changed = true);
      };
      s.bytes.forEach(add);
      if (s.ends) follow[s.caller]!.forEach(add);
    }
  }
  return follow;
}
