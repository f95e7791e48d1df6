/**
 * The native backend's parse configurations: frames (rule, DFA state, parent
 * frame) and sets of frames, hash-consed so an equal stack is one id, with
 * each set's closure (the frames its calls and returns reach without a byte)
 * and its 256 byte transitions cached. A decoding state is a set id; the
 * mask walks (native.ts) step sets byte by byte.
 */
import { type Dfa, STEP_BYTES } from './dfa.ts';
import { FAR } from './distance.ts';

/** Parent of a frame at the bottom of the whole stack (returning from it accepts the value). */
export const ROOT = -1;
/** Parent of a frame whose mask entry is computed alone (returning from it escapes to whatever is below). */
export const BOTTOM = -2;

/** A transition not computed yet. */
const UNKNOWN = -2;

export interface Closure {
  readonly frames: Int32Array;
  readonly acceptsRoot: boolean;
  readonly escapes: boolean;
  readonly bytes: boolean;
}

/** A copy of `a` (filled with -1) with room for index i. */
export function grown(a: Int32Array, i: number): Int32Array<ArrayBuffer> {
  const b = new Int32Array(Math.max(i + 1, a.length * 2)).fill(-1);
  b.set(a);
  return b;
}

/** Interned frames and frame sets with cached closures and byte transitions. */
export class StackSpace {
  private readonly fm: number[] = [];
  private readonly fs: number[] = [];
  private readonly fp: number[] = [];
  /** Frame ids by parent, then by m·2^26 + s (numeric keys: frames are interned on every new row). */
  private readonly fmap = new Map<number, Map<number, number>>();
  private readonly sets: Int32Array[] = [];
  private readonly smap = new Map<string, number>();
  /** Sets of one frame (nearly all of them), by that frame. */
  private readonly single = new Map<number, number>();
  private readonly clo: Array<Closure | undefined> = [];
  /** Per set: its transitions (UNKNOWN where stepOne has not been asked yet, unless full). */
  private readonly rows: Array<Int32Array | undefined> = [];
  private readonly full: boolean[] = [];

  private frameDist: Int32Array<ArrayBuffer> = new Int32Array(64).fill(-1);
  private setDist: Int32Array<ArrayBuffer> = new Int32Array(64).fill(-1);

  constructor(
    private readonly machines: readonly Dfa[],
    private readonly ruleDist: (m: number, s: number) => number,
  ) {}

  /** Fewest single-byte tokens completing every frame of a stack (to its ROOT or BOTTOM). */
  private fdist(f: number): number {
    if (f >= this.frameDist.length) this.frameDist = grown(this.frameDist, f);
    let d = this.frameDist[f]!;
    if (d < 0) {
      const p = this.fp[f]!;
      d = Math.min(FAR, this.ruleDist(this.fm[f]!, this.fs[f]!) + (p >= 0 ? this.fdist(p) : 0));
      this.frameDist[f] = d;
    }
    return d;
  }

  /** Fewest single-byte tokens completing some stack of a set (FAR: none that way). */
  dist(id: number): number {
    if (id >= this.setDist.length) this.setDist = grown(this.setDist, id);
    let d = this.setDist[id]!;
    if (d < 0) {
      d = FAR;
      for (const f of this.sets[id]!) d = Math.min(d, this.fdist(f));
      this.setDist[id] = d;
    }
    return d;
  }

  /** Completion distance of the stack below frame f (0 at ROOT or BOTTOM). */
  below(f: number): number {
    const p = this.fp[f]!;
    return p >= 0 ? this.fdist(p) : 0;
  }

  frame(m: number, s: number, p: number): number {
    let byTop = this.fmap.get(p);
    if (!byTop) this.fmap.set(p, (byTop = new Map()));
    const key = m * 0x4000000 + s;
    let id = byTop.get(key);
    if (id === undefined) {
      id = this.fm.length;
      this.fm.push(m);
      this.fs.push(s);
      this.fp.push(p);
      byTop.set(key, id);
    }
    return id;
  }

  top(f: number): [machine: number, state: number, parent: number] {
    return [this.fm[f]!, this.fs[f]!, this.fp[f]!];
  }

  set(frames: number[]): number {
    if (frames.length === 1) {
      const f = frames[0]!;
      let id = this.single.get(f);
      if (id === undefined) this.single.set(f, (id = this.add(Int32Array.of(f))));
      return id;
    }
    const sorted = Int32Array.from(new Set(frames)).sort();
    if (sorted.length === 1) return this.set([sorted[0]!]);
    const key = sorted.join(',');
    let id = this.smap.get(key);
    if (id === undefined) this.smap.set(key, (id = this.add(sorted)));
    return id;
  }

  private add(sorted: Int32Array): number {
    const id = this.sets.length;
    this.sets.push(sorted);
    this.clo.push(undefined);
    this.rows.push(undefined);
    this.full.push(false);
    return id;
  }

  members(id: number): Int32Array {
    return this.sets[id]!;
  }

  closure(id: number): Closure {
    const hit = this.clo[id];
    if (hit) return hit;
    const seen = new Set<number>();
    const stack = [...this.sets[id]!];
    let acceptsRoot = false;
    let escapes = false;
    let bytes = false;
    while (stack.length) {
      const f = stack.pop()!;
      if (seen.has(f)) continue;
      seen.add(f);
      const m = this.fm[f]!;
      const s = this.fs[f]!;
      const p = this.fp[f]!;
      const d = this.machines[m]!;
      if (d.hasBytes(s)) bytes = true;
      for (const [rule, ret] of d.calls(s)) stack.push(this.frame(rule, this.machines[rule]!.start, this.frame(m, ret, p)));
      if (d.accepting(s)) {
        if (p >= 0) stack.push(p);
        else if (p === ROOT) acceptsRoot = true;
        else escapes = true;
      }
    }
    const c: Closure = { frames: Int32Array.from(seen), acceptsRoot, escapes, bytes };
    this.clo[id] = c;
    return c;
  }

  /**
   * Where one whole character of `shape` leads from set `id` (Dfa.charStep on
   * its one live frame, no set interned between the bytes); STEP_BYTES when
   * the set's closure has several frames or the character may cross a return.
   */
  charStep(id: number, shape: ReadonlyArray<readonly [number, number]>): number {
    const frames = this.closure(id).frames;
    if (frames.length !== 1) return STEP_BYTES;
    const f = frames[0]!;
    const m = this.fm[f]!;
    const x = this.machines[m]!.charStep(this.fs[f]!, shape, true);
    return x < 0 ? x : this.set([this.frame(m, x, this.fp[f]!)]);
  }

  step(id: number, b: number): number {
    const r = this.rows[id];
    return (r && this.full[id] ? r : this.row(id))[b]!;
  }

  /**
   * One transition, without the set's whole row (tails of tokens leaving
   * plain text step a few bytes from many sets: a row per set interned a set
   * per UTF-8 lead byte).
   */
  stepOne(id: number, b: number): number {
    let r = this.rows[id];
    if (!r) this.rows[id] = r = new Int32Array(256).fill(UNKNOWN);
    let t = r[b]!;
    if (t !== UNKNOWN) return t;
    const next: number[] = [];
    for (const f of this.closure(id).frames) {
      const x = this.machines[this.fm[f]!]!.step(this.fs[f]!, b);
      if (x >= 0) next.push(this.frame(this.fm[f]!, x, this.fp[f]!));
    }
    t = next.length ? this.set(next) : -1;
    r[b] = t;
    return t;
  }

  /**
   * All 256 transitions of a set at once: mask walks and plain-text checks
   * visit most bytes of a state anyway, and bytes whose frames all move alike
   * (one DFA byte class) share one set, interned once.
   */
  private row(id: number): Int32Array {
    const frames = this.closure(id).frames;
    const rows = Array.from(frames, (f) => this.machines[this.fm[f]!]!.stepAll(this.fs[f]!));
    const row = new Int32Array(256);
    if (rows.length === 1) {
      // One live frame (the common case): the byte's DFA target is the whole key.
      const r = rows[0]!;
      const f = frames[0]!;
      const m = this.fm[f]!;
      const p = this.fp[f]!;
      const memo = new Map<number, number>();
      for (let b = 0; b < 256; b++) {
        const x = r[b]!;
        if (b > 0 && x === r[b - 1]) {
          row[b] = row[b - 1]!;
          continue;
        }
        let t = memo.get(x);
        if (t === undefined) memo.set(x, (t = x >= 0 ? this.set([this.frame(m, x, p)]) : -1));
        row[b] = t;
      }
      this.rows[id] = row;
      this.full[id] = true;
      return row;
    }
    const memo = new Map<string, number>();
    for (let b = 0; b < 256; b++) {
      // Bytes come in runs that every frame takes alike (DFA byte classes): reuse the previous byte's set.
      if (b > 0 && rows.every((r) => r[b] === r[b - 1])) {
        row[b] = row[b - 1]!;
        continue;
      }
      let key = '';
      for (let k = 0; k < rows.length; k++) key += `${rows[k]![b]},`;
      let t = memo.get(key);
      if (t === undefined) {
        const next: number[] = [];
        for (let k = 0; k < rows.length; k++) {
          const x = rows[k]![b]!;
          const f = frames[k]!;
          if (x >= 0) next.push(this.frame(this.fm[f]!, x, this.fp[f]!));
        }
        t = next.length ? this.set(next) : -1;
        memo.set(key, t);
      }
      row[b] = t;
    }
    this.rows[id] = row;
    this.full[id] = true;
    return row;
  }
}
