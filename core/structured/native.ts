/**
 * The `native` backend: a pushdown automaton over lazily determinized rules.
 *
 * Each rule (the root, every recursive $ref, the built-in "any value") is a
 * byte NFA whose `call` edges consume a whole value of another rule; its DFA
 * is built lazily. A parse configuration is a stack of frames (rule, DFA
 * state, parent), hash-consed so equal stacks are one id; a decoding state is
 * a set of stacks (ambiguity is rare but allowed). There is no depth limit.
 *
 * Masks are cached per (rule, DFA state) — the stack top — which is sound
 * because everything a token does *within* that frame (including calls it
 * opens and closes) does not depend on what is below. The walk from a frame
 * with a virtual bottom records (a) tokens fully consumed inside the frame
 * ("certain") and (b) tokens that would complete the frame and continue in
 * the caller ("uncertain", with the byte offset where the frame returns; only
 * bytes in the rule's FOLLOW set are considered). Per step, the mask is the
 * certain set plus the few uncertain tokens whose tail is re-checked against
 * the real stack. EOS is allowed only when the whole stack can accept.
 */
import { fail } from './ast.ts';
import { charge } from './budget.ts';
import { Dfa } from './dfa.ts';
import type { ConstraintState } from './index.ts';
import { FAR, shortestCompletions } from './distance.ts';
import type { Nfa } from './nfa.ts';
import type { GrammarAst } from './schema.ts';
import { type FirstCharSplit, oddBytes, PlainTable, plainShapesExcept, type Shapes, splitAtFirst } from './plain_table.ts';
import { type ClassExits, clearBit, type FlatTrie, hasBit, MaskPool, setBit, type TextClass, type TokenTrie } from './trie.ts';
import { BOTTOM, grown, ROOT, StackSpace } from './stack_space.ts';
import { followSets, grammarRules, type RuleNfas } from './rules.ts';

/** Most tokens walkExits steps one by one (tokens that leave a run after its first byte); past it, the trie walk. */
const MAX_EXIT_TOKENS = 3000;

/** Most ASCII characters a state may take its own way while the rest of plain text is one class (plainExceptRun). */
const MAX_PLAIN_ODD = 8;


/** What one mask computation collects. */
interface Walk {
  /** Largest frame-local completion distance of a state a token ended in. */
  maxAfter: number;
  readonly dist: (s: number) => number;
  readonly m: number;
  readonly callFree: boolean;
  readonly certain: Uint32Array;
  /** Flat (token, byte offset where the frame returns) pairs. */
  readonly unc: number[];
  /** The text class whose subtrees the walk settles without walking them, and its per-state table. */
  readonly cls: TextClass;
  readonly table: PlainTable;
}

/** How a frame's states move (NativeGrammar.moves). */
interface Moves {
  readonly step: (s: number, b: number) => number;
  readonly charStep: (s: number, shape: Shapes[number]) => number;
  readonly escapes: (s: number) => boolean;
}

interface LocalEntry {
  readonly certain: Uint32Array;
  /**
   * Upper bound on the frame-local completion distance after any certain
   * token (single-byte tokens; FAR if unknown): while the budget left covers
   * it plus the stack below, no certain token needs checking.
   */
  readonly maxAfter: number;
  /** Flat (token, byte offset where the frame returns) pairs. */
  readonly uncertain: Int32Array;
}

export class NativeGrammar {
  readonly machines: Dfa[];
  private readonly follow: Uint8Array[];
  private readonly local: StackSpace;
  private readonly entries = new Map<number, LocalEntry>();
  private readonly pool = new MaskPool();
  /** Rules whose NFA has no call edges (their DFA can be walked directly). */
  private readonly callFree: boolean[];

  /** Returns null if the language is empty. */
  static build(g: GrammarAst, trie: TokenTrie): NativeGrammar | null {
    const rules = grammarRules(g);
    return rules && NativeGrammar.fromRules(rules, trie);
  }

  /** The automata over a vocabulary, from rule NFAs (grammarRules; possibly built on another thread). */
  static fromRules(r: RuleNfas, trie: TokenTrie): NativeGrammar {
    return new NativeGrammar(r.nfas.map((n) => new Dfa(n)), r.nfas, (i) => r.names[i - 1] ?? '', trie);
  }

  private constructor(machines: Dfa[], nfas: Nfa[], ruleName: (i: number) => string, private readonly trie: TokenTrie) {
    this.machines = machines;
    this.callFree = nfas.map((n) => n.calls.every((c) => c.length === 0));
    // Left recursion (a rule that can call itself before consuming a byte) would make closures infinite.
    const state = new Uint8Array(machines.length);
    const visit = (i: number): void => {
      if (state[i] === 2) return;
      if (state[i] === 1) fail('invalid_schema', `$ref "${ruleName(i)}" recurses into itself without consuming input`, ruleName(i).slice(1), '$ref');
      state[i] = 1;
      if (i > 0 && machines[i]!.accepting(machines[i]!.start)) fail('unsupported_schema_keyword', `rule "${ruleName(i)}" can match empty input`, ruleName(i).slice(1), '$ref');
      for (const [r] of machines[i]!.calls(machines[i]!.start)) visit(r);
      state[i] = 2;
    };
    machines.forEach((_, i) => visit(i));
    this.follow = followSets(machines, nfas);
    this.nfaDist = shortestCompletions(nfas, trie.singleByte);
    this.local = new StackSpace(machines, this.ruleDist);
    this.entry(0, machines[0]!.start); // warm the first mask
  }

  /**
   * Walks trie nodes lo..hi from `start`: tokens consumed inside the frame go
   * to `certain`, tokens that may leave it to `unc` (with the byte offset, plus
   * shift[token] when the trie holds token tails). `skipPlain`: subtrees of
   * plain text the current state takes as a whole are settled without a walk.
   */
  private walk(w: Walk, t: Omit<FlatTrie, 'groupStart'>, lo: number, hi: number, start: number, shift: Int32Array | null, skipPlain: boolean): void {
    const { byte, depth, skip, tokStart, tokCount, tokens } = t;
    const { tokAt } = this.trie;
    const { sufMax, sufMin, ascii, odd } = w.cls;
    const { asciiBelow, highBelow, reachMax, reachMin } = this.trie;
    const k0 = ascii ? ~ascii[0]! : 0;
    const k1 = ascii ? ~ascii[1]! : 0;
    const k2 = ascii ? ~ascii[2]! : 0;
    const k3 = ascii ? ~ascii[3]! : 0;
    // Whether node i's subtree is class text all the way down (its own byte first: most nodes fail there).
    const inClass = (i: number): boolean => {
      const b = byte[i]!;
      if (b >= 128 || (ascii![b >> 5]! & (1 << (b & 31))) === 0 || highBelow[i] !== 0) return false;
      const o = i * 4;
      return ((asciiBelow[o]! & k0) | (asciiBelow[o + 1]! & k1) | (asciiBelow[o + 2]! & k2) | (asciiBelow[o + 3]! & k3)) === 0;
    };
    const o0 = odd ? odd[0]! : 0;
    const o1 = odd ? odd[1]! : 0;
    const o2 = odd ? odd[2]! : 0;
    const o3 = odd ? odd[3]! : 0;
    // Plain text but a few ASCII bytes: whether none of them occurs in node i's subtree.
    const noOdd = (i: number): boolean => {
      if (!odd) return true;
      const o = i * 4;
      return ((asciiBelow[o]! & o0) | (asciiBelow[o + 1]! & o1) | (asciiBelow[o + 2]! & o2) | (asciiBelow[o + 3]! & o3)) === 0;
    };
    const { certain, unc, table } = w;
    const callFree = w.callFree;
    const fol = this.follow[w.m]!;
    const d = this.machines[w.m]!;
    const sp = this.local;
    const st = new Int32Array(t.maxDepth + 1);
    // Per walk depth: the plainInfo of st[depth].
    const pi = new Int32Array(t.maxDepth + 1);
    // Per walk depth: whether the path from the root is all class text (ASCII classes only): then a
    // subtree that ends within the root's class depth holds only tokens already in its bitset.
    const pk = new Uint8Array(t.maxDepth + 1);
    st[0] = start;
    if (skipPlain) pi[0] = table.info(start);
    const rootPd = pi[0]! >> 1;
    pk[0] = ascii && skipPlain ? 1 : 0;
    const record = (i: number, offset: number): void => {
      for (let j = i; j < skip[i]!; j++) {
        for (let k = tokStart[j]!, e = k + tokCount[j]!; k < e; k++) unc.push(tokens[k]!, offset + (shift ? shift[tokens[k]!]! : 0));
      }
    };
    for (let i = lo; i < hi; ) {
      const dd = depth[i]!;
      if (skipPlain) {
        // The class suffix bounds of the tokens under i, if all of them continue with class text from here.
        const info = pi[dd - 1]!;
        const pd = info >> 1;
        const sm = sufMax ? sufMax[i]! : reachMax[i]!;
        const settle = sm <= pd;
        const dead = (info & 1) !== 0 && (dd === 1 || (sufMin ? sufMin[i]! : reachMin[i]!) > pd);
        // The class test last: it is the costly part for ASCII sets, and most nodes need neither case.
        if ((settle || dead) && (sufMax ? sm >= 0 && noOdd(i) : inClass(i))) {
          if (settle) {
            // All of them stay inside the frame (at the root: already in the bitset).
            if (dd > 1 && !(pk[dd - 1] === 1 && dd - 1 + sm <= rootPd)) {
              for (let k = tokAt[i]!, e = tokAt[skip[i]!]!; k < e; k++) setBit(certain, tokens[k]!);
              const md = w.table.maxDist(st[dd - 1]!, sm, w.dist);
              if (md > w.maxAfter) w.maxAfter = md;
            }
          }
          // Otherwise none can go past pd characters, and none leaves the frame on the way.
          i = skip[i]!;
          continue;
        }
      }
      const cur = st[dd - 1]!;
      const b = byte[i]!;
      charge();
      let nx: number;
      if (callFree) {
        // A rule without calls: walk its DFA directly (escapes happen in accepting states).
        if (fol[b] && d.accepting(cur)) record(i, dd - 1);
        // Tails (shift set) start with the few bytes that end plain text: one transition each from
        // the chain's states, not their whole rows (a counted string's row would intern a state
        // per UTF-8 lead byte). Deeper, whole rows: a state with many live bytes pays less so.
        nx = shift && dd === 1 ? d.step(cur, b) : d.stepAll(cur)[b]!;
      } else {
        if (fol[b] && sp.closure(cur).escapes) record(i, dd - 1);
        nx = shift && dd === 1 ? sp.stepOne(cur, b) : sp.step(cur, b); // as above
      }
      if (nx < 0) {
        i = skip[i]!;
        continue;
      }
      st[dd] = nx;
      if (skipPlain) pi[dd] = table.info(nx);
      pk[dd] = pk[dd - 1] === 1 && b < 128 && (ascii![b >> 5]! & (1 << (b & 31))) !== 0 ? 1 : 0;
      if (tokCount[i]! > 0) {
        const da = w.dist(nx);
        if (da > w.maxAfter) w.maxAfter = da;
      }
      for (let k = tokStart[i]!, e = k + tokCount[i]!; k < e; k++) setBit(certain, tokens[k]!);
      i++;
    }
  }

  /**
   * The tokens that leave an ASCII run (walk() does the same through the trie):
   * a token starting with c run bytes is run from chain[c] on its remaining
   * bytes. A bucket (c, next byte) whose byte neither continues nor leaves
   * the frame from chain[c] is skipped whole, so only the tokens that really
   * step out of the run (a '.', a closing quote) are stepped byte by byte;
   * those starting outside the run (c = 0) are walked as their trie subtree.
   * Returns false, having added nothing, when more than MAX_EXIT_TOKENS would
   * be stepped one by one (the caller walks the whole trie instead).
   */
  private walkExits(w: Walk, ex: ClassExits, chain: Int32Array): boolean {
    const { certain, unc } = w;
    const { flatBytes, flatStart, rootChild, skip, tokens } = this.trie;
    const { start, ranges } = ex;
    const fol = this.follow[w.m]!;
    const { step, escapes } = this.moves(w.m, w.callFree);
    // The live buckets first: stepping tokens one by one pays only while few of them leave the run
    // (a '.' or a closing quote); when many do, the trie walk shares their prefixes instead.
    const live: number[] = [];
    let work = 0;
    for (let c = 0; c < chain.length; c++) {
      const s0 = chain[c]!;
      const leaves = escapes(s0);
      for (let x = 0; x < 256; x++) {
        const lo = start[c * 256 + x]!;
        const hi = start[c * 256 + x + 1]!;
        if (lo === hi || (step(s0, x) < 0 && !(leaves && fol[x]))) continue;
        live.push(c, x);
        if (c > 0) for (let r = lo; r < hi; r++) work += ranges[2 * r + 1]! - ranges[2 * r]!;
      }
    }
    if (work > MAX_EXIT_TOKENS) return false;
    for (let k = 0; k < live.length; k += 2) {
      const c = live[k]!;
      const x = live[k + 1]!;
      const s0 = chain[c]!;
      if (c === 0) {
        // Every token starting with x: one subtree of the trie, walked with its shared prefixes.
        const node = rootChild[x]!;
        this.walk(w, this.trie, node, skip[node]!, s0, null, true);
        continue;
      }
      for (let r = start[c * 256 + x]!, re = start[c * 256 + x + 1]!; r < re; r++) for (let q = ranges[2 * r]!, e = ranges[2 * r + 1]!; q < e; q++) {
        const t = tokens[q]!;
        const from = flatStart[t]!;
        const to = flatStart[t + 1]!;
        charge();
        let s = s0;
        for (let o = from + c; o < to && s >= 0; o++) {
          const b = flatBytes[o]!;
          if (fol[b] && escapes(s)) unc.push(t, o - from);
          s = step(s, b);
        }
        if (s >= 0) {
          setBit(certain, t);
          const da = w.dist(s);
          if (da > w.maxAfter) w.maxAfter = da;
        }
      }
    }
    return true;
  }

  /**
   * splitAtFirst's case, free text after the first character: plain tokens are
   * settled from the bitsets and the others walked on their tails from the
   * chain (as for free text); then the tokens starting with an odd byte, which
   * both steps took as free text, are cleared and walked whole from the state.
   */
  private walkSplit(w: Walk, split: FirstCharSplit): void {
    const trie = this.trie;
    const { chain, odd } = split;
    // A plain token of k characters ends in chain[k]: live for k < chain.length.
    w.certain.set(trie.plainClass.upTo(chain.length - 1));
    for (let c = 1; c < chain.length; c++) w.maxAfter = Math.max(w.maxAfter, w.dist(chain[c]!));
    const g = trie.tail.groupStart;
    for (let c = 0; c < chain.length; c++) if (g[c]! < g[c + 1]!) this.walk(w, trie.tail, g[c]!, g[c + 1]!, chain[c]!, trie.tailFrom, false);
    const { rootChild, skip, tokAt, tokens, flatBytes, flatStart } = trie;
    const isOdd = new Uint8Array(256);
    for (const b of odd) isOdd[b] = 1;
    for (const b of odd) {
      const node = rootChild[b]!;
      if (node >= 0) for (let k = tokAt[node]!, e = tokAt[skip[node]!]!; k < e; k++) clearBit(w.certain, tokens[k]!);
    }
    const unc = w.unc;
    let kept = 0;
    for (let k = 0; k < unc.length; k += 2) {
      if (isOdd[flatBytes[flatStart[unc[k]!]!]!]) continue;
      unc[kept++] = unc[k]!;
      unc[kept++] = unc[k + 1]!;
    }
    unc.length = kept;
    for (const b of odd) {
      const node = rootChild[b]!;
      if (node >= 0) this.walk(w, trie, node, skip[node]!, chain[0]!, null, true);
    }
  }

  /** Per rule, per NFA state: fewest single-byte tokens to the rule's end (distance.ts). */
  private readonly nfaDist: Int32Array[];
  private readonly dfaDist: Int32Array[] = [];

  /** Fewest single-byte tokens completing a frame of rule m in DFA state s (FAR: none that way). */
  readonly ruleDist = (m: number, s: number): number => {
    let row = this.dfaDist[m] ?? (this.dfaDist[m] = new Int32Array(64).fill(-1));
    if (s >= row.length) this.dfaDist[m] = row = grown(row, s);
    let d = row[s]!;
    if (d < 0) {
      d = FAR;
      const nd = this.nfaDist[m]!;
      for (const q of this.machines[m]!.members(s)) d = Math.min(d, nd[q]!);
      row[s] = d;
    }
    return d;
  };

  private readonly classTables = new Map<string, PlainTable>();

  /**
   * How a frame of rule m moves, per byte, per whole character, and whether a
   * state may leave the frame: on its DFA (call-free rules) or on stack sets.
   */
  private moves(m: number, callFree: boolean): Moves {
    const d = this.machines[m]!;
    const sp = this.local;
    return callFree
      ? { step: (x, b) => d.stepAll(x)[b]!, charStep: (x, sh) => d.charStep(x, sh), escapes: (x) => d.accepting(x) }
      : { step: (x, b) => sp.step(x, b), charStep: (x, sh) => sp.charStep(x, sh), escapes: (x) => sp.closure(x).escapes };
  }

  /**
   * The ASCII bytes that `root` takes alike (to one live state), when there
   * are enough of them to matter, with their text class and per-state table;
   * null otherwise.
   */
  private asciiRun(m: number, callFree: boolean, root: number): { cls: TextClass; table: PlainTable } | null {
    const { step, charStep, escapes } = this.moves(m, callFree);
    const count = new Map<number, number>();
    for (let b = 0; b < 128; b++) {
      const t = step(root, b);
      if (t >= 0) count.set(t, (count.get(t) ?? 0) + 1);
    }
    let best = -1;
    let most = 0;
    for (const [t, n] of count) if (n > most) (best = t), (most = n);
    if (most < 8) return null;
    const k = new Uint8Array(128);
    for (let b = 0; b < 128; b++) if (step(root, b) === best) k[b] = 1;
    const shapes: Array<Array<readonly [number, number]>> = [];
    for (let b = 0; b < 128; b++) if (k[b] && !k[b - 1]) shapes.push([[b, b]]);
    for (const sh of shapes) while (sh[0]![1] + 1 < 128 && k[sh[0]![1] + 1]) sh[0] = [sh[0]![0], sh[0]![1] + 1];
    const cls = this.trie.asciiClass(k);
    const key = `${m},${callFree ? 1 : 0},${k.join('')}`;
    let table = this.classTables.get(key);
    if (!table) {
      table = new PlainTable(step, escapes, this.trie.maxDepth, shapes, charStep);
      this.classTables.set(key, table);
    }
    return { cls, table };
  }

  /**
   * When `root` takes every plain character alike but a few ASCII ones (free
   * text in a pattern: `.*z`, `.*ab+c.*` under a length), the class of plain
   * text without them and its per-state table, if root takes some of it
   * alike; null otherwise.
   */
  private plainExceptRun(m: number, callFree: boolean, root: number): { cls: TextClass; table: PlainTable } | null {
    const { step, charStep, escapes } = this.moves(m, callFree);
    const r = oddBytes(step, root, MAX_PLAIN_ODD, charStep);
    if (!r || r.odd.length === 0) return null;
    const key = `${m},${callFree ? 1 : 0},except ${r.odd.join(',')}`;
    let table = this.classTables.get(key);
    if (!table) {
      table = new PlainTable(step, escapes, this.trie.maxPlain, plainShapesExcept(r.odd), charStep);
      this.classTables.set(key, table);
    }
    if (table.info(root) === 0) return null;
    const odd = new Uint8Array(128);
    for (const b of r.odd) odd[b] = 1;
    return { cls: this.trie.plainExceptClass(odd), table };
  }

  private readonly plainDfa: Array<PlainTable | undefined> = [];
  private plainSets: PlainTable | undefined;

  /** How states take plain text: per call-free rule (its DFA) or for the grammar's stack space. */
  private plainTable(m: number, callFree: boolean): PlainTable {
    const cap = this.trie.maxPlain;
    if (callFree) {
      const d = this.machines[m]!;
      return (this.plainDfa[m] ??= new PlainTable((x, b) => d.stepAll(x)[b]!, (x) => d.accepting(x), cap, undefined, (x, sh) => d.charStep(x, sh)));
    }
    const sp = this.local;
    return (this.plainSets ??= new PlainTable((x, b) => sp.step(x, b), (x) => sp.closure(x).escapes, cap, undefined, (x, sh) => sp.charStep(x, sh)));
  }

  begin(): ConstraintState {
    return new NativeState(this, this.trie);
  }

  /** Mask data for a frame in state (m, s), independent of the stack below it. */
  entry(m: number, s: number): LocalEntry {
    const key = m * 0x4000000 + s;
    const hit = this.entries.get(key);
    if (hit) return hit;
    const trie = this.trie;
    const sp = this.local;
    const callFree = this.callFree[m]!;
    let table = this.plainTable(m, callFree);
    let cls = trie.plainClass;
    const dist = callFree ? (x: number): number => this.ruleDist(m, x) : (x: number): number => sp.dist(x);
    const root = callFree ? s : sp.set([sp.frame(m, s, BOTTOM)]);
    let info = table.info(root);
    let split: FirstCharSplit | null = null;
    if (info === 0) {
      // Free text after its first character (an open object's key)?
      const { step, escapes, charStep } = this.moves(m, callFree);
      split = splitAtFirst(table, step, escapes, root, trie.maxPlain, charStep);
      // Not free text: maybe a run of some ASCII set (a format's or pattern's characters) taken alike.
      const k = split ? null : (this.plainExceptRun(m, callFree, root) ?? this.asciiRun(m, callFree, root));
      if (k) {
        table = k.table;
        cls = k.cls;
        info = table.info(root);
      }
    }
    const pd = info >> 1;
    const w: Walk = { m, callFree, certain: new Uint32Array(trie.words), unc: [], dist, maxAfter: 0, cls, table };
    // Class tokens short enough to stay inside the frame from the start: one precomputed bitset.
    if (pd > 0) {
      w.certain.set(cls.upTo(pd));
      w.maxAfter = Math.max(w.maxAfter, table.maxDist(root, Math.min(pd, cls.maxLen), dist));
    }
    // Free text (any plain character taken the same way, as long as any token's plain start or
    // never past pd characters, no escape on the way): only the tokens that are not plain need a
    // walk, from the state their plain start leads to.
    const tail = cls.tail;
    const chain = tail && (pd >= tail.maxPrefix || info & 1) ? table.chain(root, Math.min(pd, tail.maxPrefix)) : null;
    // The same for a run of an ASCII set (a counted format or pattern: each count is its own
    // state, so first masks are frequent): the tokens that leave the set, bucketed by how many
    // set bytes they start with and the byte after, are run from the state that many bytes lead to.
    const runMax = cls.maxPrefix;
    const runChain = !chain && runMax !== undefined && info !== 0 && (pd >= runMax || info & 1) ? table.chain(root, Math.min(pd, runMax)) : null;
    const exits = runChain && cls.exits ? cls.exits() : null;
    if (split) {
      this.walkSplit(w, split);
    } else if (chain && tail) {
      const g = tail.trie.groupStart;
      for (let c = 0; c < chain.length; c++) if (g[c]! < g[c + 1]!) this.walk(w, tail.trie, g[c]!, g[c + 1]!, chain[c]!, tail.from, false);
    } else if (!(exits && runChain && this.walkExits(w, exits, runChain))) {
      this.walk(w, trie, 0, trie.nodes, root, null, info !== 0);
    }
    const { certain, unc } = w;
    const kept: number[] = [];
    for (let k = 0; k < unc.length; k += 2) if (!hasBit(certain, unc[k]!)) kept.push(unc[k]!, unc[k + 1]!);
    const e: LocalEntry = { certain: this.pool.intern(certain), uncertain: Int32Array.from(kept), maxAfter: w.maxAfter };
    this.entries.set(key, e);
    return e;
  }
}

const DEAD = -1;
const ENDED = -3;

class NativeState implements ConstraintState {
  private readonly space: StackSpace;
  private cur: number;
  private lastId = -10;
  private lastMask: Uint32Array;

  constructor(
    private readonly g: NativeGrammar,
    private readonly trie: TokenTrie,
  ) {
    this.space = new StackSpace(g.machines, g.ruleDist);
    this.cur = this.space.set([this.space.frame(0, g.machines[0]!.start, ROOT)]);
    this.lastMask = new Uint32Array(trie.words);
  }

  /** Tokens left in the request's budget (budget()), undefined: no budget applies. */
  private left: number | undefined;
  private wasForced = false;
  /** Tokens the last free mask took from frames' uncertain lists (checked against the real stack). */
  private lastUnc: number[] = [];
  private filteredKey = '';
  private filtered: Uint32Array | null = null;

  budget(remaining: number): void {
    this.left = remaining;
  }

  completion(): number {
    if (this.cur === ENDED) return 0;
    return this.cur < 0 ? FAR : this.space.dist(this.cur);
  }

  forced(): boolean {
    return this.wasForced;
  }

  /**
   * The mask; with a budget, narrowed to tokens after which the value can
   * still be completed within the tokens left (each token ends in a state
   * whose shortest completion in single-byte tokens fits), so an output cut
   * by the budget still parses. Entries bound how far a certain token can
   * move the completion away (maxAfter), so most steps check no token; close
   * to the end every allowed token is run on the stack.
   */
  mask(): Uint32Array {
    const free = this.free();
    const left = this.left;
    if (left === undefined || this.cur < 0) return free;
    const sp = this.space;
    const ub = sp.dist(this.cur);
    if (ub >= FAR || ub > left) return free; // cannot be helped: not narrowed
    let worst = 0;
    for (const f of sp.members(this.cur)) {
      const [m, s] = sp.top(f);
      worst = Math.max(worst, this.g.entry(m, s).maxAfter + sp.below(f));
    }
    const all = worst > left - 1;
    if (!all && this.lastUnc.length === 0) return free;
    const key = `${this.cur},${left}`;
    if (key === this.filteredKey && this.filtered) return this.filtered;
    const out = free.slice();
    let cleared = false;
    const check = (t: number): void => {
      if (this.trie.eos.includes(t)) return;
      const bytes = this.trie.bytesOf[t]!;
      let x = this.cur;
      for (let i = 0; i < bytes.length && x >= 0; i++) x = sp.step(x, bytes[i]!);
      if (x < 0 || sp.dist(x) > left - 1) {
        out[t >>> 5]! &= ~(1 << (t & 31));
        cleared = true;
      }
    };
    if (all) {
      for (let w = 0; w < out.length; w++) {
        for (let bits = out[w]!; bits; bits &= bits - 1) check(w * 32 + (31 - Math.clz32(bits & -bits)));
      }
    } else {
      for (const t of this.lastUnc) check(t);
    }
    if (cleared) this.wasForced = true;
    this.filteredKey = key;
    return (this.filtered = out);
  }

  /** The mask without a budget, cached per state. */
  private free(): Uint32Array {
    if (this.cur === this.lastId) return this.lastMask;
    this.lastId = this.cur;
    this.lastUnc = [];
    if (this.cur < 0) return (this.lastMask = new Uint32Array(this.trie.words));
    const sp = this.space;
    const members = sp.members(this.cur);
    const acceptsRoot = sp.closure(this.cur).acceptsRoot;
    const entries = Array.from(members, (f) => {
      const [m, s, p] = sp.top(f);
      return { e: this.g.entry(m, s), p };
    });
    if (entries.length === 1 && !acceptsRoot && (entries[0]!.p < 0 || entries[0]!.e.uncertain.length === 0)) {
      return (this.lastMask = entries[0]!.e.certain); // shared, read-only
    }
    const out = new Uint32Array(this.trie.words);
    for (const { e } of entries) for (let w = 0; w < out.length; w++) out[w]! |= e.certain[w]!;
    for (const { e, p } of entries) {
      if (p < 0) continue;
      const u = e.uncertain;
      const below = sp.set([p]);
      for (let k = 0; k < u.length; k += 2) {
        const t = u[k]!;
        if (!hasBit(out, t) && this.suffixOk(below, this.trie.bytesOf[t]!, u[k + 1]!)) setBit(out, t), this.lastUnc.push(t);
      }
    }
    if (acceptsRoot) for (const t of this.trie.eos) setBit(out, t);
    return (this.lastMask = out);
  }

  /** Whether the stack set `below` (what lies under a frame that returns) takes bytes[from..]. */
  private suffixOk(below: number, bytes: Uint8Array, from: number): boolean {
    let s = below;
    for (let i = from; i < bytes.length && s >= 0; i++) s = this.space.step(s, bytes[i]!);
    return s >= 0;
  }

  advance(token: number): void {
    if (this.cur < 0) return;
    if (this.trie.eos.includes(token)) {
      this.cur = this.space.closure(this.cur).acceptsRoot ? ENDED : DEAD;
      return;
    }
    const bytes = this.trie.bytesOf[token];
    if (!bytes) {
      this.cur = DEAD;
      return;
    }
    let s = this.cur;
    for (let i = 0; i < bytes.length && s >= 0; i++) s = this.space.step(s, bytes[i]!);
    this.cur = s;
  }

  isComplete(): boolean {
    if (this.cur === ENDED) return true;
    if (this.cur < 0) return false;
    const c = this.space.closure(this.cur);
    return c.acceptsRoot && !c.bytes;
  }

  accepted(): boolean {
    return this.cur === ENDED || (this.cur >= 0 && this.space.closure(this.cur).acceptsRoot);
  }
}
