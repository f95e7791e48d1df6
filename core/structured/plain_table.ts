/**
 * How the states of an automaton take runs of plain text (or of one ASCII
 * set): per state, how many such characters keep it on one chain of states,
 * and whether the chain is closed (native.ts settles whole subtrees of the
 * vocabulary trie with it).
 */

import { STEP_BYTES } from './dfa.ts';

/**
 * Byte ranges of every plain character (trie.ts): printable ASCII but `"` and
 * `\\`, then each UTF-8 length by lead byte, without overlong, surrogate or
 * C1-control forms.
 */
export type Shapes = ReadonlyArray<ReadonlyArray<readonly [number, number]>>;
export const PLAIN_SHAPES: Shapes = [
  [[0x20, 0x21]],
  [[0x23, 0x5b]],
  [[0x5d, 0x7e]],
  [[0xc2, 0xc2], [0xa0, 0xbf]],
  [[0xc3, 0xdf], [0x80, 0xbf]],
  [[0xe0, 0xe0], [0xa0, 0xbf], [0x80, 0xbf]],
  [[0xe1, 0xec], [0x80, 0xbf], [0x80, 0xbf]],
  [[0xed, 0xed], [0x80, 0x9f], [0x80, 0xbf]],
  [[0xee, 0xef], [0x80, 0xbf], [0x80, 0xbf]],
  [[0xf0, 0xf0], [0x90, 0xbf], [0x80, 0xbf], [0x80, 0xbf]],
  [[0xf1, 0xf3], [0x80, 0xbf], [0x80, 0xbf], [0x80, 0xbf]],
  [[0xf4, 0xf4], [0x80, 0x8f], [0x80, 0xbf], [0x80, 0xbf]],
];

/**
 * How the states of one automaton take plain text (cached per state).
 * info(s), packed as depth·2 + closed:
 * - depth: how many plain characters, of any kind and in any order, a walk
 *   can take from `s` while staying live (`cap` = as many as any token has).
 *   It follows a chain of states in which every plain character leads to the
 *   same next state (checked byte range by byte range), so every plain string
 *   of up to depth characters reaches the same live state;
 * - closed: the chain's last state starts no plain character and no state of
 *   the chain can leave the frame (`escapes`), so a plain string of more than
 *   depth characters is dead, whatever its bytes.
 */
export class PlainTable {
  /** State → the state every plain character leads to (-1: none; -2: not computed). */
  private nexts = new Int32Array(64).fill(-2);
  /** State → info (-1: not computed). */
  private infos = new Int32Array(64).fill(-1);

  constructor(
    private readonly step: (s: number, b: number) => number,
    private readonly escapes: (s: number) => boolean,
    private readonly cap: number,
    private readonly shapes: Shapes = PLAIN_SHAPES,
    /**
     * Where one whole character of a shape leads (Dfa.charStep, StackSpace.charStep), or
     * STEP_BYTES: spares interning the states between its bytes.
     */
    private readonly charStep?: (s: number, shape: Shapes[number]) => number,
  ) {}

  private grow(s: number): void {
    if (s < this.nexts.length) return;
    const n = Math.max(s + 1, this.nexts.length * 2);
    const a = new Int32Array(n).fill(-2);
    a.set(this.nexts);
    const b = new Int32Array(n).fill(-1);
    b.set(this.infos);
    this.nexts = a;
    this.infos = b;
  }

  next(s: number): number {
    this.grow(s);
    if (this.nexts[s] === -2) this.nexts[s] = plainStep(this.step, s, this.shapes, this.charStep);
    return this.nexts[s]!;
  }

  info(s: number): number {
    this.grow(s);
    if (this.infos[s]! >= 0) return this.infos[s]!;
    const path: number[] = [];
    const onPath = new Set<number>();
    let cur = s;
    // Follow the chain until a state with known info, a dead end, a cycle or `cap` states.
    for (;;) {
      this.grow(cur);
      if (this.infos[cur]! >= 0) break;
      if (onPath.has(cur)) {
        for (const x of path) this.infos[x] = this.cap * 2; // a cycle: unbounded
        return this.infos[s]!;
      }
      if (path.length > this.cap) return (this.infos[s] = this.cap * 2); // cap live steps from s: as many as any token has
      path.push(cur);
      onPath.add(cur);
      const nx = this.next(cur);
      if (nx < 0) {
        // The last state: closed if no plain lead byte is live from it.
        let closed = !this.escapes(cur);
        for (const shape of this.shapes) for (let b = shape[0]![0]; b <= shape[0]![1] && closed; b++) if (this.step(cur, b) >= 0) closed = false;
        this.infos[cur] = closed ? 1 : 0;
        path.pop();
        break;
      }
      cur = nx;
    }
    let after = this.infos[cur]!;
    for (let k = path.length - 1; k >= 0; k--) {
      const x = path[k]!;
      const depth = Math.min(this.cap, (after >> 1) + 1);
      after = this.infos[x] = depth * 2 + (after & 1 && !this.escapes(x) ? 1 : 0);
    }
    return this.infos[s]!;
  }

  /** The largest dist() of the states after 1..n plain characters from `s` (n ≤ info(s)'s depth). */
  maxDist(s: number, n: number, dist: (s: number) => number): number {
    // Walks settle many subtrees from one state: keep the running maxima along its chain.
    if (s >= this.maxDists.length) this.maxDists.length = s + 1;
    let pre = this.maxDists[s];
    if (!pre || pre.length <= n) {
      pre = new Int32Array(Math.max(n, this.info(s) >> 1) + 1);
      for (let k = 1, x = s, m = 0; k < pre.length; k++) {
        if (x >= 0) x = this.next(x);
        if (x >= 0) m = Math.max(m, dist(x));
        pre[k] = m;
      }
      this.maxDists[s] = pre;
    }
    return pre[n]!;
  }

  /** State → its maxDist for n = 0, 1, 2, … up to its plain depth. */
  private readonly maxDists: Array<Int32Array | undefined> = [];

  /**
   * States after 0..n plain characters from `s` (n ≤ info(s)'s depth), or
   * null if one of them may leave the frame (tail walks would miss tokens
   * leaving it inside their plain start).
   */
  chain(s: number, n: number): Int32Array | null {
    const chain = new Int32Array(n + 1);
    chain[0] = s;
    for (let k = 0; k <= n; k++) {
      if (this.escapes(chain[k]!)) return null;
      if (k < n) chain[k + 1] = this.next(chain[k]!);
    }
    return chain;
  }
}

/** Where one character of `shape` leads from `s`, byte by byte: -1 if a sequence dies or they disagree. */
function shapeStep(step: (s: number, b: number) => number, s: number, shape: Shapes[number]): number {
  let x = s;
  for (const [lo, hi] of shape) {
    const t = step(x, lo);
    if (t < 0) return -1;
    for (let b = lo + 1; b <= hi; b++) if (step(x, b) !== t) return -1;
    x = t;
  }
  return x;
}

/**
 * The state every plain character leads to from `s`, or -1 if some is dead or
 * they disagree; by whole characters where `charStep` can tell.
 */
function plainStep(step: (s: number, b: number) => number, s: number, shapes: Shapes, charStep?: (s: number, shape: Shapes[number]) => number): number {
  let next = -1;
  for (const shape of shapes) {
    let x = charStep ? charStep(s, shape) : STEP_BYTES;
    if (x === STEP_BYTES) x = shapeStep(step, s, shape);
    if (x < 0 || (next !== -1 && x !== next)) return -1;
    next = x;
  }
  return next;
}

/** The plain characters that are one byte (printable ASCII but `"` and `\\`) and those that are more. */
const ASCII_SHAPES = PLAIN_SHAPES.slice(0, 3);
const MULTI_BYTE_SHAPES = PLAIN_SHAPES.slice(3);

/** At most this many ASCII first characters may go their own way in a split state (their subtrees are walked). */
const MAX_ODD_BYTES = 48;

/** A state whose first plain character nearly always leads to one free-text state (splitAtFirst). */
export interface FirstCharSplit {
  /** chain[0] = the state itself; chain[c] = the state after c plain characters whose first is not odd. */
  readonly chain: Int32Array;
  /** The ASCII bytes (each a whole plain character) that lead elsewhere, ascending. */
  readonly odd: readonly number[];
}

/**
 * A state that is not free text but becomes it after one character: a key of
 * an open object takes any string, yet the declared names' first characters
 * lead to states of their own. When every multi-byte plain character and all
 * but a few ASCII ones lead to one state S from which plain text is taken
 * alike (to the end of any token, or up to a closed depth), and neither `s`
 * nor a state of S's chain can leave the frame, the mask can be settled like
 * free text for every token not starting with an odd byte. Null otherwise.
 */
export function splitAtFirst(
  table: PlainTable,
  step: (s: number, b: number) => number,
  escapes: (s: number) => boolean,
  s: number,
  cap: number,
  charStep?: (s: number, shape: Shapes[number]) => number,
): FirstCharSplit | null {
  if (escapes(s)) return null;
  const r = oddBytes(step, s, MAX_ODD_BYTES, charStep);
  if (!r) return null;
  const { next, odd } = r;
  const info = table.info(next);
  const depth = info >> 1;
  // Tokens hold at most `cap` characters, so the chain needs cap - 1 states after S; past a closed depth none lives.
  if (depth < cap - 1 && (info & 1) === 0) return null;
  const rest = table.chain(next, Math.min(depth, cap - 1));
  if (!rest) return null;
  const chain = new Int32Array(rest.length + 1);
  chain[0] = s;
  chain.set(rest, 1);
  return { chain, odd };
}

/**
 * The state every multi-byte plain character and all but at most `max` ASCII
 * ones lead to from `s` (live), with those odd ASCII bytes, ascending; null
 * if there is none.
 */
export function oddBytes(step: (s: number, b: number) => number, s: number, max: number, charStep?: (s: number, shape: Shapes[number]) => number): { next: number; odd: number[] } | null {
  const next = plainStep(step, s, MULTI_BYTE_SHAPES, charStep);
  if (next < 0) return null;
  const odd: number[] = [];
  for (const shape of ASCII_SHAPES) {
    const [lo, hi] = shape[0]!;
    for (let b = lo; b <= hi; b++) if (step(s, b) !== next && odd.push(b) > max) return null;
  }
  return { next, odd };
}

/** PLAIN_SHAPES without the ASCII bytes `odd` (ascending). */
export function plainShapesExcept(odd: readonly number[]): Shapes {
  const skip = new Set(odd);
  const ascii: Array<Array<readonly [number, number]>> = [];
  for (const shape of ASCII_SHAPES) {
    const [lo, hi] = shape[0]!;
    for (let b = lo; b <= hi; b++) {
      if (skip.has(b)) continue;
      const last = ascii[ascii.length - 1];
      if (last && last[0]![1] === b - 1) last[0] = [last[0]![0], b];
      else ascii.push([[b, b]]);
    }
  }
  return [...ascii, ...MULTI_BYTE_SHAPES];
}
