/**
 * attention (after kv_write, in the same step) vs attention.ref on ragged
 * continuous-batching steps: prefill chunks starting at 0 or mid-sequence mixed
 * with single decode tokens, shuffled block tables, blockSize 4 and 16, GQA
 * ratios 1..8, hd 8..256, soft-capping, sliding window and a custom scale.
 * Unused cache slots and unused block-table entries point at NaN, so any read
 * outside a token's causal range poisons the output and fails the check.
 * Every cache dtype: q8 and f16 history rows are quantized (packed) by the
 * reference, unused q8 rows have NaN scales, unused f16 rows NaN halves; the q8
 * and f16 references attend over the GPU's own caches (read back after the step,
 * widened), so the check isolates attention's on-the-fly widening from kv_write's
 * rounding (tested in kv_write.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { attention, cpuAttentionWG } from '../../core/ops/attention.ts';
import { attentionRef } from '../../core/ops/attention.ref.ts';
import { kvRowWords, kvWrite, type KvDtype } from '../../core/ops/kv_write.ts';
import { dequantKvRef, kvWriteRef, packRowF16, quantizeRowQ8, unpackKvF16Ref } from '../../core/ops/kv_write.ref.ts';
import { assertClose, BACKEND_VARIANTS, gpuFor, randn, rng, TOL_F32 } from '../helpers/gpu.ts';

interface Case {
  name: string;
  hd: number;
  nH: number;
  nKv: number;
  bs: number;
  /** Per sequence: `past` positions already cached, `n` tokens in this step (1 = decode). */
  seqs: { past: number; n: number }[];
  softcap?: number;
  window?: number;
  scale?: number;
  /** Std of q/k values (larger = peakier softmax, exercises the running-max rescale). */
  qkStd?: number;
  shuffleTokens?: boolean;
}

const CASES: Case[] = [
  { name: 'one token at position 0, hd 8', hd: 8, nH: 1, nKv: 1, bs: 4, seqs: [{ past: 0, n: 1 }] },
  { name: 'hd 16, G 2, bs 4, chunk + decode + mid chunk', hd: 16, nH: 4, nKv: 2, bs: 4, seqs: [{ past: 0, n: 7 }, { past: 9, n: 1 }, { past: 5, n: 5 }] },
  { name: 'hd 64, G 3, bs 16, mixed, shuffled tokens', hd: 64, nH: 6, nKv: 2, bs: 16, seqs: [{ past: 37, n: 1 }, { past: 0, n: 11 }, { past: 20, n: 1 }, { past: 50, n: 4 }], shuffleTokens: true },
  { name: 'hd 128, G 8, softcap, peaky', hd: 128, nH: 8, nKv: 1, bs: 16, seqs: [{ past: 100, n: 1 }, { past: 60, n: 1 }, { past: 33, n: 5 }], softcap: 30, qkStd: 3 },
  { name: 'hd 64, G 1, bs 4, sliding window 8', hd: 64, nH: 4, nKv: 4, bs: 4, seqs: [{ past: 30, n: 3 }, { past: 3, n: 1 }, { past: 0, n: 5 }], window: 8 },
  { name: 'hd 16, G 4, bs 16, custom scale, peaky', hd: 16, nH: 8, nKv: 2, bs: 16, seqs: [{ past: 18, n: 2 }, { past: 0, n: 1 }, { past: 40, n: 2 }], scale: 0.5, qkStd: 2 },
  { name: 'hd 256, G 2', hd: 256, nH: 4, nKv: 2, bs: 16, seqs: [{ past: 20, n: 1 }, { past: 5, n: 2 }] },
  { name: 'long decode, hd 128, G 4', hd: 128, nH: 8, nKv: 2, bs: 16, seqs: [{ past: 700, n: 1 }, { past: 300, n: 1 }, { past: 0, n: 3 }] },
  // Past llvmpipe's loop budget for one dispatch (core/ops/loop_budget.ts): the cpu variant
  // walks the 12,000-key context in passes there (it returned wrong values before).
  { name: 'very long decode, hd 128, G 2', hd: 128, nH: 2, nKv: 1, bs: 16, seqs: [{ past: 12000, n: 1 }, { past: 3000, n: 1 }, { past: 7, n: 2 }] },
  // 137 tokens x 4 kv heads = 548 items: the cpu variant's 16-invocation workgroups, with a partial last one.
  { name: 'prefill-sized batch, hd 8, G 2, bs 16', hd: 8, nH: 8, nKv: 4, bs: 16, seqs: [...Array.from({ length: 10 }, () => ({ past: 0, n: 13 })), { past: 5, n: 7 }] },
];

/** A q8 cache in the GPU layout from an f32 one: rows quantized, all-NaN rows get NaN words (NaN scale). */
function quantizeCache(f: Float32Array, hd: number): Uint32Array {
  const R = kvRowWords(hd, 'q8');
  const rows = f.length / hd;
  const out = new Uint32Array(rows * R);
  for (let r = 0; r < rows; r++) {
    const x = f.subarray(r * hd, (r + 1) * hd);
    if (Number.isNaN(x[0])) out.fill(0x7fc00000, r * R, (r + 1) * R);
    else quantizeRowQ8(x, out, r * R);
  }
  return out;
}

/** An f16 cache in the GPU layout from an f32 one (NaN stays NaN). */
function packCache(f: Float32Array): Uint32Array {
  const out = new Uint32Array(f.length / 2);
  packRowF16(f, out, 0);
  return out;
}

/** Builds one step: paged cache with history, block tables, per-token metadata. */
function makeStep(c: Case, seed: number) {
  const r = rng(seed);
  const shuffle = <T>(a: T[]): T[] => {
    for (let i = a.length - 1; i > 0; i--) {
      const j = Math.floor(r() * (i + 1));
      [a[i], a[j]] = [a[j]!, a[i]!];
    }
    return a;
  };
  const S = c.seqs.length;
  const need = c.seqs.map((s) => Math.ceil((s.past + s.n) / c.bs));
  const maxBlocks = Math.max(...need) + 1; // a spare column that must never be read
  const numBlocks = need.reduce((a, b) => a + b, 0) + 3;
  const ids = shuffle(Array.from({ length: numBlocks }, (_, i) => i));
  const poison = ids.pop()!; // a block full of NaN, used for unused table entries
  const tables = new Uint32Array(S * maxBlocks).fill(poison);
  c.seqs.forEach((_, s) => {
    for (let b = 0; b < need[s]!; b++) tables[s * maxBlocks + b] = ids.pop()!;
  });
  const slotOf = (s: number, pos: number) => tables[s * maxBlocks + Math.floor(pos / c.bs)]! * c.bs + (pos % c.bs);

  const row = c.nKv * c.hd;
  const cacheK = new Float32Array(numBlocks * c.bs * row).fill(NaN);
  const cacheV = new Float32Array(numBlocks * c.bs * row).fill(NaN);
  const std = c.qkStd ?? 1;
  c.seqs.forEach((sq, s) => {
    for (let pos = 0; pos < sq.past; pos++) {
      cacheK.set(randn(row, seed + 1000 * s + pos, std), slotOf(s, pos) * row);
      cacheV.set(randn(row, seed + 1000 * s + pos + 500), slotOf(s, pos) * row);
    }
  });
  let tok = c.seqs.flatMap((sq, s) => Array.from({ length: sq.n }, (_, i) => [s, sq.past + i] as const));
  if (c.shuffleTokens) tok = shuffle(tok);
  const T = tok.length;
  const rowStride = (c.nH + 2 * c.nKv) * c.hd;
  const qkv = randn(T * rowStride, seed + 7, std);
  // v columns at unit scale regardless of qkStd
  for (let t = 0; t < T; t++) for (let i = (c.nH + c.nKv) * c.hd; i < rowStride; i++) qkv[t * rowStride + i]! /= std;
  return {
    T,
    rowStride,
    maxBlocks,
    tables,
    cacheK,
    cacheV,
    qkv,
    positions: Uint32Array.from(tok, ([, p]) => p),
    tokenSeq: Uint32Array.from(tok, ([s]) => s),
    slots: Uint32Array.from(tok, ([s, p]) => slotOf(s, p)),
  };
}

it('the cpu variant widens its workgroups only for prefill-sized steps', () => {
  expect(cpuAttentionWG(548)).toBe(16); // the prefill-sized case below
  expect(cpuAttentionWG(128)).toBe(16);
  expect(cpuAttentionWG(127)).toBe(4);
  expect(cpuAttentionWG(64)).toBe(4); // a 16-sequence decode step of 4 kv heads still spreads over 16 workgroups
});

describe.each(BACKEND_VARIANTS)('attention on %s, %s variant', (backend, variant) => {
  it.each(CASES.flatMap((c) => (['f32', 'f16', 'q8'] as KvDtype[]).map((kvDtype) => ({ ...c, kvDtype }))))('$name, $kvDtype cache', async (c) => {
    const ctx = await gpuFor(backend);
    const st = makeStep(c, c.hd * 31 + c.nH);
    const { T, rowStride } = st;
    const shape = { qHeads: c.nH, kvHeads: c.nKv, headDim: c.hd, rowStride, tokens: T, kvDtype: c.kvDtype };
    const q8 = c.kvDtype === 'q8';
    const f16 = c.kvDtype === 'f16';
    const aopts = {
      ...shape,
      blockSize: c.bs,
      maxBlocksPerSeq: st.maxBlocks,
      ...(c.scale !== undefined ? { scale: c.scale } : {}),
      ...(c.softcap !== undefined ? { softcap: c.softcap } : {}),
      ...(c.window !== undefined ? { window: c.window } : {}),
      maxPosition: Math.max(...st.positions),
    };
    const tq = ctx.tensor(st.qkv, [T, rowStride], 'f32');
    const cacheTensor = (f: Float32Array) =>
      q8 ? ctx.tensor(quantizeCache(f, c.hd), [(f.length / c.hd) * kvRowWords(c.hd, 'q8')], 'u32') : f16 ? ctx.tensor(packCache(f), [f.length / 2], 'u32') : ctx.tensor(f, [f.length], 'f32');
    const tk = cacheTensor(st.cacheK);
    const tv = cacheTensor(st.cacheV);
    const tpos = ctx.tensor(st.positions, [T], 'u32');
    const tseq = ctx.tensor(st.tokenSeq, [T], 'u32');
    const tslot = ctx.tensor(st.slots, [T], 'u32');
    const tbt = ctx.tensor(st.tables, [c.seqs.length, st.maxBlocks], 'u32');
    const tout = ctx.scratch([T, c.nH * c.hd]);
    // cpu variant with small heads (q and accumulators in registers by default): the same
    // step with them in the buffers as before, which must give the same bits.
    const G = c.nH / c.nKv;
    const GC = [8, 7, 6, 5, 4, 3, 2, 1].find((d) => d <= G && G % d === 0)!;
    const inRegisters = variant === 'cpu' && (GC * c.hd) / 4 <= 16;
    const tout2 = ctx.scratch([T, c.nH * c.hd]);
    // cpu variant: the same step in passes of 2 and of 3 key tiles per dispatch (llvmpipe's
    // loop budget, attention.wgsl PASSES), which must give the same bits too.
    const passOuts = variant === 'cpu' ? [ctx.scratch([T, c.nH * c.hd]), ctx.scratch([T, c.nH * c.hd])] : [];
    const rec = ctx.recorder();
    await kvWrite(rec, tq, tslot, tk, tv, { ...shape, variant });
    await attention(rec, tq, tk, tv, tpos, tseq, tbt, tout, { ...aopts, variant });
    const single = !(backend === 'opengles' && variant === 'cpu' && Math.max(...st.positions) > 4000); // llvmpipe walks 12,000 keys in passes
    if (single) expect(rec.dispatches).toBe(2);
    if (inRegisters) await attention(rec, tq, tk, tv, tpos, tseq, tbt, tout2, { ...aopts, variant, registers: false });
    const other = inRegisters ? rec.readback(tout2) : null;
    const before = rec.dispatches;
    if (passOuts.length) {
      await attention(rec, tq, tk, tv, tpos, tseq, tbt, passOuts[0]!, { ...aopts, variant, tilesPerPass: 2 });
      // (registers only where they are the default: big private arrays compile for minutes on llvmpipe)
      await attention(rec, tq, tk, tv, tpos, tseq, tbt, passOuts[1]!, { ...aopts, variant, tilesPerPass: 3, registers: false });
      const tiles = Math.max(...Array.from(st.positions, (p) => Math.ceil((c.window ? Math.min(p + 1, c.window) : p + 1) / 8) + 1));
      const passesOf = (n: number): number => (tiles > n ? Math.ceil(tiles / n) : 1);
      expect(rec.dispatches - before).toBe(passesOf(2) + passesOf(3));
    }
    const passReads = passOuts.map((t) => rec.readback(t));
    const got = rec.readback(tout);
    const gk = q8 || f16 ? rec.readback(tk) : null;
    const gv = q8 || f16 ? rec.readback(tv) : null;
    rec.submit();

    if (q8) {
      st.cacheK = dequantKvRef(new Uint32Array(await gk!), c.hd);
      st.cacheV = dequantKvRef(new Uint32Array(await gv!), c.hd);
    } else if (f16) {
      st.cacheK = unpackKvF16Ref(new Uint32Array(await gk!));
      st.cacheV = unpackKvF16Ref(new Uint32Array(await gv!));
    } else kvWriteRef(st.qkv, st.slots, st.cacheK, st.cacheV, shape);
    const want = attentionRef(st.qkv, st.cacheK, st.cacheV, st.positions, st.tokenSeq, st.tables, aopts);
    const gotBuf = await got;
    assertClose(new Float32Array(gotBuf), want, TOL_F32);
    if (other) expect(Array.from(new Uint32Array(await other))).toEqual(Array.from(new Uint32Array(gotBuf)));
    for (const [i, r] of passReads.entries()) expect(Array.from(new Uint32Array(await r)), `passes of ${i + 2} tiles`).toEqual(Array.from(new Uint32Array(gotBuf)));
    ctx.free(tout);
    ctx.free(tout2);
    for (const t of passOuts) ctx.free(t);
    for (const t of [tq, tk, tv, tpos, tseq, tslot, tbt]) t.buffer.destroy();
  });
});
