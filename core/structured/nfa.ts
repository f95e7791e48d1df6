/**
 * Pattern AST → byte-level NFA (Thompson construction), plus trimming.
 *
 * States carry ε edges, byte-range edges and `call` edges (a call consumes a
 * whole value of another rule; only the native pushdown backend has them).
 * Each construction only adds edges out of its `from` state and into its `to`
 * state, so alternatives can share endpoints without extra ε states. `and`
 * nodes are built as standalone NFAs, determinized and intersected by product
 * construction (trimmed), then embedded as plain states; `obj` nodes use two
 * "before member i" states (nothing emitted yet / something emitted) so each
 * member appears once and commas are always right. After construction the NFA
 * is trimmed to states that are reachable and can still reach the final state:
 * that is what guarantees every non-empty DFA state has a completion (no dead
 * ends) — the property the token masks rely on.
 */
import type { Node } from './ast.ts';
import { type ByteSeq, type Ranges, utf8Sequences } from './charset.ts';
import { charge, TooLargeError } from './budget.ts';
import { Dfa } from './dfa.ts';

/** Thrown when an automaton exceeds its size budget; callers turn it into a request error. */

export const MAX_NFA_STATES = 400_000;

export class Nfa {
  /** Per state: ε targets. */
  readonly eps: number[][] = [];
  /** Per state: flat [lo, hi, to, ...] byte-range edges. */
  readonly edges: number[][] = [];
  /** Per state: flat [rule, to, ...] call edges. */
  readonly calls: number[][] = [];
  start = 0;
  final = 0;

  get size(): number {
    return this.eps.length;
  }

  add(): number {
    charge();
    if (this.eps.length >= MAX_NFA_STATES) throw new TooLargeError(`automaton larger than ${MAX_NFA_STATES} states`);
    this.eps.push([]);
    this.edges.push([]);
    this.calls.push([]);
    return this.eps.length - 1;
  }
}

/** Resolves rule names of `call` nodes to machine indices (native backend only). */
export type RuleIndex = (rule: string) => number;

const seqCache = new WeakMap<Ranges, ByteSeq[]>();

/** Builds an untrimmed NFA for `node`; call `trim` afterwards. */
export function buildNfa(node: Node, ruleIndex: RuleIndex | null): Nfa {
  const nfa = new Nfa();
  nfa.start = nfa.add();
  nfa.final = nfa.add();
  frag(nfa, node, nfa.start, nfa.final, ruleIndex);
  return nfa;
}

function chain(nfa: Nfa, bytes: ArrayLike<readonly [number, number]>, from: number, to: number): void {
  let cur = from;
  for (let i = 0; i < bytes.length; i++) {
    const nx = i === bytes.length - 1 ? to : nfa.add();
    const [lo, hi] = bytes[i]!;
    nfa.edges[cur]!.push(lo, hi, nx);
    cur = nx;
  }
}

function frag(nfa: Nfa, n: Node, from: number, to: number, ri: RuleIndex | null): void {
  switch (n.t) {
    case 'none':
      return;
    case 'eps':
      nfa.eps[from]!.push(to);
      return;
    case 'cls': {
      let seqs = seqCache.get(n.set);
      if (!seqs) seqCache.set(n.set, (seqs = utf8Sequences(n.set)));
      for (const s of seqs) chain(nfa, s, from, to);
      return;
    }
    case 'lit':
      chain(nfa, Array.from(n.bytes, (b) => [b, b] as const), from, to);
      return;
    case 'seq': {
      let cur = from;
      n.items.forEach((it, i) => {
        const nx = i === n.items.length - 1 ? to : nfa.add();
        frag(nfa, it, cur, nx, ri);
        cur = nx;
      });
      return;
    }
    case 'alt':
      for (const it of n.items) frag(nfa, it, from, to, ri);
      return;
    case 'rep': {
      const { item, min, max } = n;
      let cur = from;
      for (let i = 0; i < min; i++) {
        const nx = i === min - 1 && max === min ? to : nfa.add();
        frag(nfa, item, cur, nx, ri);
        cur = nx;
      }
      if (max === min) {
        if (min === 0) nfa.eps[from]!.push(to);
        return;
      }
      if (max === Infinity) {
        const loop = nfa.add();
        nfa.eps[cur]!.push(loop);
        frag(nfa, item, loop, loop, ri);
        nfa.eps[loop]!.push(to);
        return;
      }
      for (let i = min; i < max; i++) {
        nfa.eps[cur]!.push(to);
        const nx = i === max - 1 ? to : nfa.add();
        frag(nfa, item, cur, nx, ri);
        cur = nx;
      }
      return;
    }
    case 'call': {
      if (!ri) throw new Error(`structured: rule reference "${n.rule}" in a call-free automaton`);
      nfa.calls[from]!.push(ri(n.rule), to);
      return;
    }
    case 'and':
      embedProduct(nfa, n.items, from, to);
      return;
    case 'diff':
      embedProduct(nfa, [n.item, n.minus], from, to, 1);
      return;
    case 'mod': {
      // States: `first` (no digit yet) and one per residue of the digits read so far, mod m.
      const first = nfa.add();
      nfa.eps[from]!.push(first);
      nfa.edges[from]!.push(0x2d, 0x2d, first);
      const res = Array.from({ length: n.m }, () => nfa.add());
      for (let d = 0; d <= 9; d++) nfa.edges[first]!.push(0x30 + d, 0x30 + d, res[d % n.m]!);
      res.forEach((s, r) => {
        for (let d = 0; d <= 9; d++) nfa.edges[s]!.push(0x30 + d, 0x30 + d, res[(r * 10 + d) % n.m]!);
      });
      nfa.eps[res[0]!]!.push(to);
      return;
    }
    case 'obj': {
      let b0 = from;
      let b1 = nfa.add();
      for (const p of n.props) {
        const entry = nfa.add();
        const n0 = nfa.add();
        const n1 = nfa.add();
        nfa.eps[b0]!.push(entry);
        frag(nfa, n.sep, b1, entry, ri);
        frag(nfa, p.kv, entry, n1, ri);
        if (!p.required) {
          nfa.eps[b0]!.push(n0);
          nfa.eps[b1]!.push(n1);
        }
        b0 = n0;
        b1 = n1;
      }
      if (n.extra) {
        const entry = nfa.add();
        nfa.eps[b0]!.push(entry);
        frag(nfa, n.sep, b1, entry, ri);
        frag(nfa, n.extra, entry, b1, ri);
      }
      nfa.eps[b0]!.push(to);
      nfa.eps[b1]!.push(to);
      return;
    }
  }
}

const MAX_PRODUCT_STATES = 60_000;

/** A negated component that has died: every continuation is outside its language. */
const GONE = -2;

/**
 * Intersection of call-free languages, determinized, trimmed and embedded
 * between from/to. Components from index `negFrom` on are complemented (the
 * product accepts where they do not): `diff` is [item, minus] with negFrom 1.
 */
function embedProduct(nfa: Nfa, items: readonly Node[], from: number, to: number, negFrom = items.length): void {
  const built = items.map((it) => {
    const sub = buildNfa(it, null);
    trim(sub, () => false);
    return new Dfa(sub);
  });
  if (built.slice(0, negFrom).some((d) => d.dead)) return;
  // An empty complemented language excludes nothing.
  const dfas = built.filter((d, k) => k < negFrom || !d.dead);
  const keyOf = (t: number[]): string => t.join(',');
  const tuples: number[][] = [dfas.map((d) => d.start)];
  const index = new Map([[keyOf(tuples[0]!), 0]]);
  const trans: Int32Array[] = [];
  const firsts: number[] = [];
  for (let b = 0; b < 256; b++) if (b === 0 || dfas.some((d) => d.cuts[b])) firsts.push(b);
  firsts.push(256);
  for (let i = 0; i < tuples.length; i++) {
    const tr = new Int32Array(256).fill(-1);
    const rows = dfas.map((d, k) => (tuples[i]![k]! === GONE ? null : d.stepAll(tuples[i]![k]!)));
    for (let c = 0; c + 1 < firsts.length; c++) {
      const b = firsts[c]!;
      const t: number[] = [];
      for (let k = 0; k < rows.length; k++) {
        const r = rows[k];
        // A trimmed DFA dies exactly when no continuation is in its language: a complemented one stays alive.
        const x = r ? r[b]! : GONE;
        if (x < 0 && k < negFrom) break;
        t.push(x < 0 ? GONE : x);
      }
      if (t.length < dfas.length) continue;
      const key = keyOf(t);
      let id = index.get(key);
      if (id === undefined) {
        charge();
        if (tuples.length >= MAX_PRODUCT_STATES) throw new TooLargeError('intersection automaton too large');
        id = tuples.length;
        tuples.push(t);
        index.set(key, id);
      }
      tr.fill(id, b, firsts[c + 1]!);
    }
    trans.push(tr);
  }
  const accept = tuples.map((t) => t.every((s, k) => (k < negFrom ? dfas[k]!.accepting(s) : s === GONE || !dfas[k]!.accepting(s))));
  // Co-reachability on the product (it is not implied by the components).
  const live = accept.slice();
  for (let changed = true; changed; ) {
    changed = false;
    for (let i = 0; i < tuples.length; i++) {
      if (live[i]) continue;
      const tr = trans[i]!;
      for (let b = 0; b < 256; b++) {
        if (tr[b]! >= 0 && live[tr[b]!]) {
          live[i] = changed = true;
          break;
        }
      }
    }
  }
  if (!live[0]) return;
  const ids = tuples.map((_, i) => (live[i] ? nfa.add() : -1));
  nfa.eps[from]!.push(ids[0]!);
  for (let i = 0; i < tuples.length; i++) {
    const s = ids[i]!;
    if (s < 0) continue;
    if (accept[i]) nfa.eps[s]!.push(to);
    const tr = trans[i]!;
    for (let b = 0; b < 256; ) {
      const t = tr[b]!;
      let e = b;
      while (e + 1 < 256 && tr[e + 1] === t) e++;
      if (t >= 0 && live[t]) nfa.edges[s]!.push(b, e, ids[t]!);
      b = e + 1;
    }
  }
}

/**
 * Removes every state that is unreachable from `start` or cannot reach `final`
 * (a call edge counts only if its rule is productive). Returns false if the
 * language is empty.
 */
export function trim(nfa: Nfa, productive: (rule: number) => boolean): boolean {
  const n = nfa.size;
  const fwd = new Uint8Array(n);
  const stack = [nfa.start];
  fwd[nfa.start] = 1;
  const visit = (t: number): void => {
    if (!fwd[t]) {
      fwd[t] = 1;
      stack.push(t);
    }
  };
  while (stack.length) {
    const s = stack.pop()!;
    for (const t of nfa.eps[s]!) visit(t);
    const e = nfa.edges[s]!;
    for (let k = 2; k < e.length; k += 3) visit(e[k]!);
    const c = nfa.calls[s]!;
    for (let k = 0; k < c.length; k += 2) if (productive(c[k]!)) visit(c[k + 1]!);
  }
  // Predecessors of the reachable states, as one CSR table (offsets per state into `preds`).
  const off = new Int32Array(n + 1);
  const each = (f: (s: number, t: number) => void): void => {
    for (let s = 0; s < n; s++) {
      if (!fwd[s]) continue;
      for (const t of nfa.eps[s]!) f(s, t);
      const e = nfa.edges[s]!;
      for (let k = 2; k < e.length; k += 3) f(s, e[k]!);
      const c = nfa.calls[s]!;
      for (let k = 0; k < c.length; k += 2) if (productive(c[k]!)) f(s, c[k + 1]!);
    }
  };
  each((_, t) => off[t + 1]!++);
  for (let s = 0; s < n; s++) off[s + 1]! += off[s]!;
  const preds = new Int32Array(off[n]!);
  const fill = off.slice(0, n);
  each((s, t) => (preds[fill[t]!++] = s));
  const live = new Uint8Array(n);
  if (fwd[nfa.final]) {
    live[nfa.final] = 1;
    stack.push(nfa.final);
  }
  while (stack.length) {
    const s = stack.pop()!;
    for (let k = off[s]!; k < off[s + 1]!; k++) {
      const p = preds[k]!;
      if (fwd[p] && !live[p]) {
        live[p] = 1;
        stack.push(p);
      }
    }
  }
  for (let s = 0; s < n; s++) {
    if (!live[s]) {
      if (nfa.eps[s]!.length) nfa.eps[s] = [];
      if (nfa.edges[s]!.length) nfa.edges[s] = [];
      if (nfa.calls[s]!.length) nfa.calls[s] = [];
      continue;
    }
    // Lists whose targets all stay are kept as they are (most of them).
    const ep = nfa.eps[s]!;
    if (!ep.every((t) => live[t])) nfa.eps[s] = ep.filter((t) => live[t]);
    const e = nfa.edges[s]!;
    let keep = true;
    for (let k = 2; k < e.length && keep; k += 3) keep = live[e[k]!] === 1;
    if (!keep) {
      const ne: number[] = [];
      for (let k = 0; k < e.length; k += 3) if (live[e[k + 2]!]) ne.push(e[k]!, e[k + 1]!, e[k + 2]!);
      nfa.edges[s] = ne;
    }
    const c = nfa.calls[s]!;
    if (c.length) {
      const nc: number[] = [];
      for (let k = 0; k < c.length; k += 2) if (productive(c[k]!) && live[c[k + 1]!]) nc.push(c[k]!, c[k + 1]!);
      nfa.calls[s] = nc;
    }
  }
  return live[nfa.start] === 1;
}
