/**
 * Shortest completions, for "complete within the budget": per NFA state of
 * every rule, the fewest bytes to the rule's final state, counting only bytes
 * that are single tokens of the vocabulary (so the figure is also a sound
 * upper bound on the tokens needed: those bytes one token each). A call edge
 * costs the callee's shortest complete value. Rules call each other, so the
 * per-rule shortest paths (Dijkstra backwards from the final state) are
 * iterated to a fixpoint over the callees' costs.
 *
 * A DFA state's distance is the least over its NFA states (any of them
 * completing completes the DFA), a stack's is the sum over its frames.
 */
import type { Nfa } from './nfa.ts';

/** No completion through single-byte tokens. */
export const FAR = 0x3fffffff;

/** dist[rule][nfa state] in single-byte tokens; FAR if unreachable that way. */
export function shortestCompletions(nfas: readonly Nfa[], singleByte: Uint8Array): Int32Array[] {
  // usable[b+1] - usable[lo] > 0 iff some byte in [lo, b] is a single token.
  const usable = new Int32Array(257);
  for (let b = 0; b < 256; b++) usable[b + 1] = usable[b]! + (singleByte[b] ? 1 : 0);
  const reverse = nfas.map(reverseEdges);
  const complete = new Int32Array(nfas.length).fill(FAR);
  const dist: Int32Array[] = new Array<Int32Array>(nfas.length);
  // A worklist, callees first: a rule is searched again only when a rule it calls got a
  // shorter complete value, so an acyclic call graph searches each rule once (the root, often
  // most of the grammar's states, was searched once per round before).
  const callers: number[][] = nfas.map(() => []);
  nfas.forEach((n, r) => {
    for (const c of n.calls) for (let k = 0; k < c.length; k += 2) if (!callers[c[k]!]!.includes(r)) callers[c[k]!]!.push(r);
  });
  const queue = calleesFirst(nfas);
  const queued = new Uint8Array(nfas.length).fill(1);
  // The same bound as rounds over every rule: values only decrease, along chains of at most
  // nfas.length rules.
  let budget = (nfas.length + 1) * nfas.length;
  while (queue.length && budget-- > 0) {
    const r = queue.shift()!;
    queued[r] = 0;
    const n = nfas[r]!;
    dist[r] = dijkstra(n, reverse[r]!, complete, usable);
    const c = dist[r]![n.start]!;
    if (c >= complete[r]!) continue;
    complete[r] = c;
    for (const q of callers[r]!) if (!queued[q]) (queued[q] = 1), queue.push(q);
  }
  return dist;
}

/** Rule indices in post-order of the call graph from every rule: callees before their callers. */
function calleesFirst(nfas: readonly Nfa[]): number[] {
  const seen = new Uint8Array(nfas.length);
  const order: number[] = [];
  const visit = (r: number): void => {
    if (seen[r]) return;
    seen[r] = 1;
    for (const c of nfas[r]!.calls) for (let k = 0; k < c.length; k += 2) visit(c[k]!);
    order.push(r);
  };
  for (let r = 0; r < nfas.length; r++) visit(r);
  return order;
}

/**
 * Predecessor edges, as one CSR table: state t's are entries off[t] .. off[t+1]
 * of `edge`, each 4 ints [from, kind, a, b]; kind 0 = ε, 1 = bytes a..b, 2 =
 * call of rule a.
 */
interface Reverse {
  readonly off: Int32Array;
  readonly edge: Int32Array;
}

function reverseEdges(n: Nfa): Reverse {
  const off = new Int32Array(n.size + 1);
  for (let q = 0; q < n.size; q++) {
    for (const t of n.eps[q]!) off[t + 1]!++;
    const e = n.edges[q]!;
    for (let k = 2; k < e.length; k += 3) off[e[k]! + 1]!++;
    const c = n.calls[q]!;
    for (let k = 1; k < c.length; k += 2) off[c[k]! + 1]!++;
  }
  for (let q = 0; q < n.size; q++) off[q + 1]! += off[q]!;
  const edge = new Int32Array(4 * off[n.size]!);
  const at = off.slice(0, n.size);
  const put = (t: number, q: number, kind: number, a: number, b: number): void => {
    const i = 4 * at[t]!++;
    edge[i] = q;
    edge[i + 1] = kind;
    edge[i + 2] = a;
    edge[i + 3] = b;
  };
  for (let q = 0; q < n.size; q++) {
    for (const t of n.eps[q]!) put(t, q, 0, 0, 0);
    const e = n.edges[q]!;
    for (let k = 0; k < e.length; k += 3) put(e[k + 2]!, q, 1, e[k]!, e[k + 1]!);
    const c = n.calls[q]!;
    for (let k = 0; k < c.length; k += 2) put(c[k + 1]!, q, 2, c[k]!, 0);
  }
  return { off, edge };
}

function dijkstra(n: Nfa, rev: Reverse, complete: Int32Array, usable: Int32Array): Int32Array {
  const dist = new Int32Array(n.size).fill(FAR);
  const heap = new MinHeap();
  const { off, edge } = rev;
  dist[n.final] = 0;
  heap.push(0, n.final);
  while (heap.size) {
    const d = heap.topKey();
    const t = heap.pop();
    if (d > dist[t]!) continue;
    for (let i = 4 * off[t]!, end = 4 * off[t + 1]!; i < end; i += 4) {
      const q = edge[i]!;
      const kind = edge[i + 1]!;
      let w: number;
      if (kind === 0) w = 0;
      else if (kind === 1) w = usable[edge[i + 3]! + 1]! - usable[edge[i + 2]!]! > 0 ? 1 : FAR;
      else w = complete[edge[i + 2]!]!;
      if (w >= FAR) continue;
      const nd = Math.min(FAR, d + w);
      if (nd < dist[q]!) {
        dist[q] = nd;
        heap.push(nd, q);
      }
    }
  }
  return dist;
}

/** A binary min-heap of (key, value) pairs. */
class MinHeap {
  private readonly keys: number[] = [];
  private readonly vals: number[] = [];

  get size(): number {
    return this.keys.length;
  }

  push(k: number, v: number): void {
    const { keys, vals } = this;
    let i = keys.length;
    keys.push(k);
    vals.push(v);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (keys[p]! <= k) break;
      keys[i] = keys[p]!;
      vals[i] = vals[p]!;
      i = p;
    }
    keys[i] = k;
    vals[i] = v;
  }

  topKey(): number {
    return this.keys[0]!;
  }

  /** Removes the least pair; returns its value (read its key with topKey first). */
  pop(): number {
    const { keys, vals } = this;
    const top = vals[0]!;
    const k = keys.pop()!;
    const v = vals.pop()!;
    const n = keys.length;
    if (n) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const c = l + 1 < n && keys[l + 1]! < keys[l]! ? l + 1 : l;
        if (keys[c]! >= k) break;
        keys[i] = keys[c]!;
        vals[i] = vals[c]!;
        i = c;
      }
      keys[i] = k;
      vals[i] = v;
    }
    return top;
  }
}
