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

/** What a charStep returns when it cannot tell without stepping the character's bytes one by one. */
export const STEP_BYTES = -3;

export class Dfa {
  private readonly sets: Int32Array[] = [];
  /** Set hash → first state with it; `chain[id]` → the next state with the same hash (-1: none). */
  private readonly index = new Map<number, number>();
  private readonly chain: number[] = [];
  /** NFA state q → the DFA state whose set is exactly {q} (most sets are one state; UNKNOWN: none yet). */
  private readonly byOne: Int32Array;
  private readonly rows: Int32Array[] = [];
  /** Rows are views into shared blocks: one 1 KB ArrayBuffer per state made most of a first mask's time. */
  private block = new Int32Array(0);
  private blockUsed = 0;
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
    this.byOne = new Int32Array(nfa.size).fill(UNKNOWN);
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
    if (out.length === 1) return Int32Array.of(out[0]!);
    return Int32Array.from(out).sort();
  }

  private intern(set: Int32Array): number {
    let id: number;
    if (set.length === 1) {
      id = this.byOne[set[0]!]!;
      if (id !== UNKNOWN) return id;
      id = this.sets.length;
      this.byOne[set[0]!] = id;
    } else {
      const h = hashSet(set);
      const first = this.index.get(h);
      for (let x = first ?? -1; x >= 0; x = this.chain[x]!) if (sameSet(this.sets[x]!, set)) return x;
      id = this.sets.length;
      // New states go first in their hash's list: the list is walked whole on a miss anyway.
      this.chain[id] = first ?? -1;
      this.index.set(h, id);
    }
    charge();
    this.sets.push(set);
    this.chain[id] ??= -1;
    this.rows.push(this.newRow());
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

  /** A 256-entry row of UNKNOWN, carved from a shared block (blocks double up to 1 MB). */
  private newRow(): Int32Array {
    if (this.blockUsed + 256 > this.block.length) {
      this.block = new Int32Array(Math.min(256 * 1024, Math.max(256 * 16, this.block.length * 2))).fill(UNKNOWN);
      this.blockUsed = 0;
    }
    const row = this.block.subarray(this.blockUsed, this.blockUsed + 256);
    this.blockUsed += 256;
    return row;
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

  /**
   * The state one whole character of `shape` (a byte range per UTF-8 byte)
   * leads to from `s` when all its byte sequences lead to the same one; -1
   * when one dies or they disagree. Worked out on the NFA sets, one byte class
   * at a time: the states between the character's bytes are never interned
   * (a counted string's first mask made about 16 of them per count, each with
   * a 256-entry row, only to learn that every character moves the count on).
   * `bytesOnly`: STEP_BYTES when a set between the bytes is final or calls.
   */
  charStep(s: number, shape: ReadonlyArray<readonly [number, number]>, bytesOnly = false): number {
    let set = this.sets[s]!;
    // The state so far while it is a known one (-1 after a byte worked out on sets alone).
    let cur = s;
    for (let i = 0; i < shape.length; i++) {
      // bytesOnly (a frame of a pushdown rule): between the bytes, no state may end the rule or
      // call another, which would let the bytes after it be taken elsewhere.
      if (i > 0 && bytesOnly && !this.onlyBytes(set)) return STEP_BYTES;
      const [lo, hi] = shape[i]!;
      if (cur >= 0 && this.full[cur]) {
        // A state whose row is built: read it.
        const row = this.rows[cur]!;
        const t = row[lo]!;
        if (t < 0) return -1;
        for (let b = lo + 1; b <= hi; b++) if (row[b] !== t) return -1;
        cur = t;
        set = this.sets[t]!;
        continue;
      }
      cur = -1;
      const next = this.moveRange(set, lo, hi);
      if (next === null) return -1;
      set = next;
    }
    return cur >= 0 ? cur : this.intern(set);
  }

  /** Whether none of the NFA states `set` is final or has a call edge. */
  private onlyBytes(set: Int32Array): boolean {
    for (const q of set) if (q === this.nfa.final || this.nfa.calls[q]!.length > 0) return false;
    return true;
  }

  /**
   * The ε-closed set every byte lo..hi leads to from the NFA states `set`;
   * null if one dies or they disagree. One pass over the edges fills the byte
   * classes' target lists; classes with the same list move alike, so the
   * closure is taken once (lists that differ are closed and compared).
   */
  private moveRange(set: Int32Array, lo: number, hi: number): Int32Array | null {
    const c0 = this.classOf[lo]!;
    const c1 = this.classOf[hi]!;
    const buckets = this.buckets;
    for (const q of set) {
      const e = this.nfa.edges[q]!;
      for (let k = 0; k < e.length; k += 3) {
        const a = Math.max(c0, this.classOf[e[k]!]!);
        const z = Math.min(c1, this.classOf[e[k + 1]!]!);
        for (let c = a; c <= z; c++) buckets[c]!.push(e[k + 2]!);
      }
    }
    let result: Int32Array | null = null;
    let dead = false;
    for (let c = c0; c <= c1 && !dead; c++) {
      const tg = buckets[c]!;
      if (tg.length === 0) dead = true;
      else if (c > c0 && sameList(tg, buckets[c0]!)) continue;
      else {
        const t = this.closure(tg);
        if (result === null) result = t;
        else if (!sameSet(result, t)) dead = true;
      }
    }
    for (let c = c0; c <= c1; c++) buckets[c]!.length = 0;
    return dead ? null : result;
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

/** FNV-1a over a set's members (sorted NFA state ids). */
function hashSet(set: Int32Array): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < set.length; i++) h = Math.imul(h ^ set[i]!, 0x01000193);
  return h;
}

/** Equal lists of NFA states, in the same order (targets gathered in one edge pass). */
function sameList(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function sameSet(a: Int32Array, b: Int32Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
