/**
 * Subset construction over a trimmed byte NFA, lazily (native) or eagerly
 * (outlines, products).
 *
 * A DFA state is the ε-closed set of NFA states, interned by key; byte
 * transitions are filled on demand into a 256-entry row (-2 = not computed,
 * -1 = dead). Because the NFA is trimmed, every non-empty set can still reach
 * acceptance, so "transition exists" is exactly "token prefix stays live".
 * Call edges (pushdown rules) are not ε: a state lists its calls grouped by
 * rule together with the DFA state to resume in after the callee returns.
 */
import { charge, TooLargeError } from './budget.ts';
import type { Nfa } from './nfa.ts';

const UNKNOWN = -2;

export class Dfa {
  private readonly sets: Int32Array[] = [];
  private readonly index = new Map<string, number>();
  private readonly rows: Int32Array[] = [];
  private readonly acc: boolean[] = [];
  /** Whether the row of a state is fully computed. */
  private readonly full: boolean[] = [];
  private readonly bytesOut: boolean[] = [];
  private readonly callCache: Array<Array<[number, number]> | undefined> = [];
  private readonly mark: Uint32Array;
  private stamp = 0;
  readonly start: number;
  /** True when the language is empty (start set is empty). */
  readonly dead: boolean;

  /** Byte equivalence classes: bytes no edge range tells apart share a class. */
  private readonly classOf = new Uint8Array(256);
  private readonly classFirst: number[] = [];
  /** cuts[b] = 1 if byte b starts a new class (cuts[256] may be set too). */
  readonly cuts = new Uint8Array(257);
  private readonly buckets: number[][] = [];
  /** NFA state q → DFA state of closure({q}) (UNKNOWN until needed). */
  private readonly single: Int32Array;

  constructor(readonly nfa: Nfa) {
    this.mark = new Uint32Array(nfa.size);
    const cut = this.cuts;
    for (const e of nfa.edges) for (let k = 0; k < e.length; k += 3) cut[e[k]!] = cut[e[k + 1]! + 1] = 1;
    for (let b = 0, c = -1; b < 256; b++) {
      if (b === 0 || cut[b]) this.classFirst.push(b), c++;
      this.classOf[b] = c;
    }
    for (let c = 0; c < this.classFirst.length; c++) this.buckets.push([]);
    this.single = new Int32Array(nfa.size).fill(UNKNOWN);
    const s = this.closure([nfa.start]);
    this.dead = s.length === 0 || (nfa.eps[nfa.start]!.length === 0 && nfa.edges[nfa.start]!.length === 0 && nfa.calls[nfa.start]!.length === 0 && nfa.start !== nfa.final);
    this.start = this.intern(s);
  }

  get size(): number {
    return this.sets.length;
  }

  accepting(s: number): boolean {
    return this.acc[s]!;
  }

  /** True if some byte can be consumed from `s` (calls not counted). */
  hasBytes(s: number): boolean {
    return this.bytesOut[s]!;
  }

  /** NFA states of DFA state `s`. */
  members(s: number): Int32Array {
    return this.sets[s]!;
  }

  private closure(seed: Iterable<number>): Int32Array {
    const st = ++this.stamp;
    const out: number[] = [];
    const stack: number[] = [];
    for (const q of seed) {
      if (this.mark[q] !== st) {
        this.mark[q] = st;
        stack.push(q);
      }
    }
    while (stack.length) {
      const q = stack.pop()!;
      out.push(q);
      for (const t of this.nfa.eps[q]!) {
        if (this.mark[t] !== st) {
          this.mark[t] = st;
          stack.push(t);
        }
      }
    }
    return Int32Array.from(out).sort();
  }

  private intern(set: Int32Array): number {
    const key = set.join(',');
    let id = this.index.get(key);
    if (id !== undefined) return id;
    charge();
    id = this.sets.length;
    this.sets.push(set);
    this.index.set(key, id);
    this.rows.push(new Int32Array(256).fill(UNKNOWN));
    this.full.push(false);
    let acc = false;
    let out = false;
    for (const q of set) {
      if (q === this.nfa.final) acc = true;
      if (this.nfa.edges[q]!.length) out = true;
    }
    this.acc.push(acc);
    this.bytesOut.push(out);
    this.callCache.push(undefined);
    return id;
  }

  private target(targets: number[]): number {
    if (targets.length === 0) return -1;
    const set = this.closure(targets);
    return set.length ? this.intern(set) : -1;
  }

  step(s: number, b: number): number {
    const row = this.rows[s]!;
    const hit = row[b]!;
    if (hit !== UNKNOWN) return hit;
    const targets: number[] = [];
    for (const q of this.sets[s]!) {
      const e = this.nfa.edges[q]!;
      for (let k = 0; k < e.length; k += 3) if (b >= e[k]! && b <= e[k + 1]!) targets.push(e[k + 2]!);
    }
    const t = this.target(targets);
    this.rows[s]![b] = t;
    return t;
  }

  /** The full 256-entry row of `s` (computed per byte class at once). */
  stepAll(s: number): Int32Array {
    const row = this.rows[s]!;
    if (this.full[s]) return row;
    this.full[s] = true;
    charge();
    const buckets = this.buckets;
    const touched: number[] = [];
    for (const q of this.sets[s]!) {
      const e = this.nfa.edges[q]!;
      for (let k = 0; k < e.length; k += 3) {
        for (let c = this.classOf[e[k]!]!, last = this.classOf[e[k + 1]!]!; c <= last; c++) {
          if (buckets[c]!.length === 0) touched.push(c);
          buckets[c]!.push(e[k + 2]!);
        }
      }
    }
    row.fill(-1);
    let memo: Map<string, number> | null = null;
    for (const c of touched) {
      const tg = buckets[c]!;
      let t: number;
      if (tg.length === 1) {
        t = this.single[tg[0]!]!;
        if (t === UNKNOWN) this.single[tg[0]!] = t = this.target(tg);
      } else {
        const key = tg.join(',');
        memo ??= new Map();
        const hit = memo.get(key);
        if (hit === undefined) memo.set(key, (t = this.target(tg)));
        else t = hit;
      }
      tg.length = 0;
      row.fill(t, this.classFirst[c]!, c + 1 < this.classFirst.length ? this.classFirst[c + 1]! : 256);
    }
    return row;
  }

  /** Calls available from `s`: [rule, DFA state to resume in after the callee returns]. */
  calls(s: number): ReadonlyArray<[number, number]> {
    const hit = this.callCache[s];
    if (hit) return hit;
    const byRule = new Map<number, number[]>();
    for (const q of this.sets[s]!) {
      const c = this.nfa.calls[q]!;
      for (let k = 0; k < c.length; k += 2) {
        const list = byRule.get(c[k]!) ?? [];
        list.push(c[k + 1]!);
        byRule.set(c[k]!, list);
      }
    }
    const out: Array<[number, number]> = [];
    for (const [rule, tg] of byRule) {
      const t = this.target(tg);
      if (t >= 0) out.push([rule, t]);
    }
    this.callCache[s] = out;
    return out;
  }

  /** Determinizes everything reachable by bytes (and call returns); throws past `limit` states. */
  complete(limit: number): void {
    for (let s = 0; s < this.sets.length; s++) {
      if (this.sets.length > limit) throw new TooLargeError(`automaton has more than ${limit} DFA states`);
      this.stepAll(s);
      this.calls(s);
    }
  }
}
