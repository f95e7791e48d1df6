/**
 * The `outlines` backend: an eagerly compiled regex-to-automaton token index.
 *
 * As in the outlines library: the constraint (a JSON Schema lowered to a
 * regular language, or a regex) becomes one byte DFA, fully determinized up
 * front; then for *every* DFA state the trie is walked once to record the
 * allowed tokens and the state each leads to. Decoding is table lookups only:
 * `mask()` returns the precomputed mask, `advance()` a binary search in the
 * state's sorted token list. Recursion cannot be expressed (the schema
 * compiler refuses it). Cost is paid at compile time: states × trie walk.
 */
import type { Node } from './ast.ts';
import { charge } from './budget.ts';
import { Dfa } from './dfa.ts';
import type { ConstraintState } from './index.ts';
import { buildNfa, trim } from './nfa.ts';
import { MaskPool, setBit, type TokenTrie } from './trie.ts';

const MAX_DFA_STATES = 20_000;

export class OutlinesIndex {
  readonly states: number;
  private readonly masks: Uint32Array[] = [];
  /** Per state: trie positions (see TokenTrie.posOf) of allowed tokens, ascending, and their next states. */
  private readonly pos: Int32Array[] = [];
  private readonly next: Int32Array[] = [];
  private readonly acc: boolean[] = [];
  private readonly done: boolean[] = [];
  readonly start: number;

  /** Returns null if the language is empty. */
  static build(root: Node, trie: TokenTrie): OutlinesIndex | null {
    const nfa = buildNfa(root, null);
    if (!trim(nfa, () => false)) return null;
    const dfa = new Dfa(nfa);
    dfa.complete(MAX_DFA_STATES);
    return new OutlinesIndex(dfa, trie);
  }

  private constructor(dfa: Dfa, private readonly trie: TokenTrie) {
    this.start = dfa.start;
    this.states = dfa.size;
    const rows = Array.from({ length: dfa.size }, (_, s) => dfa.stepAll(s));
    const { byte, depth, skip, tokStart, tokCount, tokens, nodes } = trie;
    const st = new Int32Array(trie.maxDepth + 1);
    const posBuf = new Int32Array(tokens.length);
    const nextBuf = new Int32Array(tokens.length);
    const pool = new MaskPool();
    for (let s = 0; s < dfa.size; s++) {
      const mask = new Uint32Array(trie.words);
      let n = 0;
      st[0] = s;
      for (let i = 0; i < nodes; ) {
        charge();
        const nx = rows[st[depth[i]! - 1]!]![byte[i]!]!;
        if (nx < 0) {
          i = skip[i]!;
          continue;
        }
        st[depth[i]!] = nx;
        for (let k = tokStart[i]!, e = k + tokCount[i]!; k < e; k++) {
          setBit(mask, tokens[k]!);
          posBuf[n] = k;
          nextBuf[n++] = nx;
        }
        i++;
      }
      const acc = dfa.accepting(s);
      if (acc) for (const t of trie.eos) setBit(mask, t);
      // Preorder visits trie positions in increasing order: the lists are sorted for free.
      this.pos.push(posBuf.slice(0, n));
      this.next.push(nextBuf.slice(0, n));
      this.masks.push(pool.intern(mask));
      this.acc.push(acc);
      this.done.push(acc && !dfa.hasBytes(s));
    }
  }

  begin(): ConstraintState {
    return new OutlinesState(this, this.trie);
  }

  mask(s: number): Uint32Array {
    return this.masks[s]!;
  }

  accepting(s: number): boolean {
    return this.acc[s]!;
  }

  complete(s: number): boolean {
    return this.done[s]!;
  }

  /** Next state after `token`, or -1. */
  step(s: number, token: number): number {
    const p = this.trie.posOf[token]!;
    const pos = this.pos[s]!;
    let lo = 0;
    let hi = pos.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const x = pos[mid]!;
      if (x === p) return this.next[s]![mid]!;
      if (x < p) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }
}

const DEAD = -1;
const ENDED = -2;

class OutlinesState implements ConstraintState {
  private s: number;
  private readonly zero: Uint32Array;

  constructor(
    private readonly index: OutlinesIndex,
    private readonly trie: TokenTrie,
  ) {
    this.s = index.start;
    this.zero = new Uint32Array(trie.words);
  }

  mask(): Uint32Array {
    return this.s >= 0 ? this.index.mask(this.s) : this.zero;
  }

  advance(token: number): void {
    if (this.s < 0) return;
    if (this.trie.eos.includes(token)) this.s = this.index.accepting(this.s) ? ENDED : DEAD;
    else this.s = this.index.step(this.s, token);
  }

  isComplete(): boolean {
    return this.s === ENDED || (this.s >= 0 && this.index.complete(this.s));
  }

  accepted(): boolean {
    return this.s === ENDED || (this.s >= 0 && this.index.accepting(this.s));
  }
}
