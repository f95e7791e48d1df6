/**
 * Random ragged paged-attention steps for the split-K attention tests (vitest and the Deno
 * shader-f16 check): shuffled physical blocks, NaN in every slot no token may read.
 */
import { f16ToF32, f32ToF16 } from '../../core/ops/quant.ts';
import { randn, rng } from './gpu.ts';

export interface SplitCase {
  name: string;
  hd: number;
  nH: number;
  nKv: number;
  bs: number;
  /** Per sequence: `past` positions cached before this step, `n` tokens in it. */
  seqs: { past: number; n: number }[];
  splitKeys?: number;
  softcap?: number;
  window?: number;
  scale?: number;
  qkStd?: number;
}

export function splitSetup(c: SplitCase, seed: number) {
  const r = rng(seed);
  const qkvCols = (c.nH + 2 * c.nKv) * c.hd;
  const maxBlocks = Math.max(...c.seqs.map((s) => Math.ceil((s.past + s.n) / c.bs)));
  const numBlocks = c.seqs.length * maxBlocks + 3;
  // Shuffled physical blocks: every sequence's table points at distinct random blocks; unused entries at a NaN block.
  const perm = Array.from({ length: numBlocks }, (_, i) => i).sort(() => r() - 0.5);
  const nanBlock = perm.pop()!;
  const blockTables = new Uint32Array(c.seqs.length * maxBlocks).fill(nanBlock);
  const slots = numBlocks * c.bs;
  const std = c.qkStd ?? 1;
  const kf = new Float32Array(slots * c.nKv * c.hd).fill(Number.NaN);
  const vf = new Float32Array(slots * c.nKv * c.hd).fill(Number.NaN);
  const kr = randn(kf.length, seed + 1, std);
  const vr = randn(vf.length, seed + 2);
  const positions: number[] = [];
  const tokenSeq: number[] = [];
  c.seqs.forEach((s, si) => {
    const used = Math.ceil((s.past + s.n) / c.bs);
    for (let b = 0; b < used; b++) blockTables[si * maxBlocks + b] = perm.pop()!;
    for (let j = 0; j < s.past + s.n; j++) {
      const slot = blockTables[si * maxBlocks + Math.floor(j / c.bs)]! * c.bs + (j % c.bs);
      const o = slot * c.nKv * c.hd;
      kf.set(kr.subarray(o, o + c.nKv * c.hd), o);
      vf.set(vr.subarray(o, o + c.nKv * c.hd), o);
    }
    for (let i = 0; i < s.n; i++) {
      positions.push(s.past + i);
      tokenSeq.push(si);
    }
  });
  const T = positions.length;
  const qkv = randn(T * qkvCols, seed + 3, std);
  return { qkvCols, maxBlocks, blockTables, kf, vf, positions: new Uint32Array(positions), tokenSeq: new Uint32Array(tokenSeq), T, qkv };
}

/** f32 values to halves two per u32 word, and back (the values an f16 cache holds). */
export function toHalves(f: Float32Array): { words: Uint32Array; values: Float32Array } {
  const words = new Uint32Array(f.length / 2);
  const values = new Float32Array(f.length);
  for (let i = 0; i < f.length; i += 2) {
    const a = f32ToF16(f[i]!);
    const b = f32ToF16(f[i + 1]!);
    words[i / 2] = (a | (b << 16)) >>> 0;
    values[i] = f16ToF32(a);
    values[i + 1] = f16ToF32(b);
  }
  return { words, values };
}

