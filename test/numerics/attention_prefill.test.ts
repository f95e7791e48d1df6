/**
 * Tiled flash attention for prompt chunks (attention_prefill.ts) against attention.ref.ts on
 * ragged steps: prompt chunks from position 0 and mid-sequence, decode tokens mixed in,
 * sequences interleaved token by token (tiles of one row), chunks longer than a tile and
 * not a multiple of it, GQA 1..8, head dims 4..128, soft-capping, sliding window, custom
 * scale. Unused cache slots hold NaN. f32 and packed-f16 caches (native f16: the Deno
 * shader-f16 check).
 */
import { describe, expect, it } from 'vitest';
import { attentionRef } from '../../core/ops/attention.ref.ts';
import { attentionPrefill, prefillTiles } from '../../core/ops/attention_prefill.ts';
import type { SplitKvDtype } from '../../core/ops/attention_splitk.ts';
import { assertClose, gpuFor, TEST_BACKENDS, TOL_F32 } from '../helpers/gpu.ts';
import { splitSetup, toHalves, type SplitCase } from '../helpers/splitk_cases.ts';

const CASES: (SplitCase & { interleave?: boolean })[] = [
  { name: 'one token at position 0, hd 4', hd: 4, nH: 1, nKv: 1, bs: 4, seqs: [{ past: 0, n: 1 }] },
  { name: 'chunk of 19 from 0, hd 16, G 2', hd: 16, nH: 4, nKv: 2, bs: 4, seqs: [{ past: 0, n: 19 }] },
  { name: 'mid-sequence chunk + decode + chunk, hd 64, G 3, peaky', hd: 64, nH: 6, nKv: 2, bs: 16, seqs: [{ past: 40, n: 9 }, { past: 77, n: 1 }, { past: 0, n: 8 }], qkStd: 3 },
  { name: 'interleaved sequences, hd 32, G 1', hd: 32, nH: 2, nKv: 2, bs: 4, seqs: [{ past: 5, n: 6 }, { past: 0, n: 7 }], interleave: true },
  { name: 'hd 128, G 8, softcap', hd: 128, nH: 8, nKv: 1, bs: 16, seqs: [{ past: 20, n: 11 }, { past: 3, n: 2 }], softcap: 30, qkStd: 2 },
  { name: 'window 6 over a chunk of 13', hd: 8, nH: 4, nKv: 2, bs: 4, seqs: [{ past: 9, n: 13 }], window: 6 },
  { name: 'custom scale, hd 12', hd: 12, nH: 2, nKv: 1, bs: 16, seqs: [{ past: 30, n: 5 }], scale: 0.3 },
];

describe('prefill tiles', () => {
  it('split at sequence changes and every 8 tokens', () => {
    expect([...prefillTiles([0, 0, 0, 1, 1, 0])]).toEqual([0, 3, 3, 2, 5, 1]);
    expect([...prefillTiles(new Array(19).fill(2))]).toEqual([0, 8, 8, 8, 16, 3]);
    expect([...prefillTiles([])]).toEqual([]);
  });
});

describe.each(TEST_BACKENDS)('attentionPrefill on %s', (backend) => {
  for (const kvDtype of ['f32', 'f16'] as SplitKvDtype[]) {
    it.each(CASES.map((c) => [c.name, c] as const))(`${kvDtype} cache: %s`, async (_, c) => {
      const ctx = await gpuFor(backend);
      const s = splitSetup(c, c.hd * 31 + c.nH * 5 + c.seqs.length);
      let order = Array.from({ length: s.T }, (_, i) => i);
      if (c.interleave) {
        // Alternate the sequences' tokens: every tile holds one row.
        const bySeq = c.seqs.map((_, si) => order.filter((t) => s.tokenSeq[t] === si));
        order = [];
        for (let i = 0; order.length < s.T; i++) for (const b of bySeq) if (i < b.length) order.push(b[i]!);
      }
      const positions = new Uint32Array(order.map((t) => s.positions[t]!));
      const tokenSeq = new Uint32Array(order.map((t) => s.tokenSeq[t]!));
      const qkv = new Float32Array(s.qkv.length);
      order.forEach((t, i) => qkv.set(s.qkv.subarray(t * s.qkvCols, (t + 1) * s.qkvCols), i * s.qkvCols));
      // Alternating 6 and 7 tokens: every tile one row but the last (two tokens of the longer sequence).
      if (c.interleave) expect(prefillTiles(tokenSeq).length / 2).toBe(s.T - 1);
      const hk = kvDtype === 'f16' ? toHalves(s.kf) : null;
      const hv = kvDtype === 'f16' ? toHalves(s.vf) : null;
      const o = {
        tokens: s.T,
        qHeads: c.nH,
        kvHeads: c.nKv,
        headDim: c.hd,
        rowStride: s.qkvCols,
        blockSize: c.bs,
        maxBlocksPerSeq: s.maxBlocks,
        ...(c.softcap ? { softcap: c.softcap } : {}),
        ...(c.window ? { window: c.window } : {}),
        ...(c.scale ? { scale: c.scale } : {}),
      };
      const tq = ctx.tensor(qkv, [s.T, s.qkvCols], 'f32');
      const tk = hk ? ctx.tensor(hk.words, [hk.words.length], 'u32') : ctx.tensor(s.kf, [s.kf.length], 'f32');
      const tv = hv ? ctx.tensor(hv.words, [hv.words.length], 'u32') : ctx.tensor(s.vf, [s.vf.length], 'f32');
      const tp = ctx.tensor(positions, [s.T], 'u32');
      const ts = ctx.tensor(tokenSeq, [s.T], 'u32');
      const tb = ctx.tensor(s.blockTables, [s.blockTables.length], 'u32');
      const out = ctx.scratch([s.T, c.nH * c.hd]);
      const rec = ctx.recorder();
      await attentionPrefill(rec, tq, tk, tv, tp, ts, tb, out, { ...o, kvDtype, nativeF16: false, tokenSeqHost: tokenSeq });
      const back = rec.readback(out);
      rec.submit();
      const want = attentionRef(qkv, hk?.values ?? s.kf, hv?.values ?? s.vf, positions, tokenSeq, s.blockTables, o);
      assertClose(new Float32Array(await back), want, TOL_F32, 'out');
      for (const t of [tq, tk, tv, tp, ts, tb]) t.buffer.destroy();
      ctx.free(out);
    });
  }
});
