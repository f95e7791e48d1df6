/**
 * Rule NFAs as flat typed arrays, so a compile worker can hand them to the
 * reader's thread as transferables (no per-state objects to clone). Per NFA,
 * three CSR tables: ε targets, byte edges [lo, hi, to], calls [rule, to].
 */
import type { RuleNfas } from './rules.ts';
import { Nfa } from './nfa.ts';

export interface PackedRules {
  readonly names: string[];
  /** Per NFA: [start, final, size]. */
  readonly heads: Int32Array;
  /** Per NFA: offsets (size + 1) then data, for ε, edges and calls. */
  readonly tables: Int32Array[];
}

function csr(rows: readonly (readonly number[])[]): Int32Array {
  const n = rows.length;
  const total = rows.reduce((a, r) => a + r.length, 0);
  const out = new Int32Array(n + 1 + total);
  let o = n + 1;
  for (let q = 0; q < n; q++) {
    out[q] = o;
    out.set(rows[q]!, o);
    o += rows[q]!.length;
  }
  out[n] = o;
  return out;
}

function rowsOf(t: Int32Array, n: number): number[][] {
  const rows: number[][] = [];
  for (let q = 0; q < n; q++) rows.push(Array.from(t.subarray(t[q]!, t[q + 1]!)));
  return rows;
}

export function packRules(r: RuleNfas): PackedRules {
  const heads = new Int32Array(r.nfas.length * 3);
  const tables: Int32Array[] = [];
  r.nfas.forEach((n, i) => {
    heads.set([n.start, n.final, n.size], i * 3);
    tables.push(csr(n.eps), csr(n.edges), csr(n.calls));
  });
  return { names: r.names, heads, tables };
}

export function unpackRules(p: PackedRules): RuleNfas {
  const nfas: Nfa[] = [];
  for (let i = 0; i < p.heads.length / 3; i++) {
    const n = new Nfa();
    const size = p.heads[i * 3 + 2]!;
    n.start = p.heads[i * 3]!;
    n.final = p.heads[i * 3 + 1]!;
    for (const row of rowsOf(p.tables[i * 3]!, size)) n.eps.push(row);
    for (const row of rowsOf(p.tables[i * 3 + 1]!, size)) n.edges.push(row);
    for (const row of rowsOf(p.tables[i * 3 + 2]!, size)) n.calls.push(row);
    nfas.push(n);
  }
  return { nfas, names: p.names };
}

/** The buffers to transfer. */
export const transferables = (p: PackedRules): ArrayBuffer[] => [p.heads.buffer as ArrayBuffer, ...p.tables.map((t) => t.buffer as ArrayBuffer)];
