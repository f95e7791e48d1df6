/**
 * Flash-decoding attention (attention_splitk.ts: partial + combine) against the direct
 * reference (attention.ref.ts) and its phase-by-phase reference (attention_splitk.ref.ts), on
 * ragged steps: decode tokens of different context lengths (so short ones have empty splits),
 * a prompt chunk, shuffled block tables, GQA 1..8, head dims 8..256, soft-capping, sliding
 * window, custom scale; splits forced small (64 keys) so tiny contexts still take many splits,
 * and the default split size. Unused cache slots hold NaN: any read outside a token's causal
 * range fails the check. f32 and f16 caches (halves two per u32 word, read through
 * unpack2x16float where the adapter lacks shader-f16, natively where it has it).
 */
import { describe, expect, it } from 'vitest';
import { attentionRef } from '../../core/ops/attention.ref.ts';
import { attentionSplitK, MIN_SPLIT_KEYS, splitKeysFor, splitKPartialBytes, splitShape, type SplitKvDtype } from '../../core/ops/attention_splitk.ts';
import { attentionSplitKRef } from '../../core/ops/attention_splitk.ref.ts';
import { assertClose, gpuFor, TEST_BACKENDS, TOL_F32 } from '../helpers/gpu.ts';
import { splitSetup, toHalves, type SplitCase } from '../helpers/splitk_cases.ts';

const CASES: SplitCase[] = [
  { name: 'one token at position 0, hd 8', hd: 8, nH: 1, nKv: 1, bs: 4, seqs: [{ past: 0, n: 1 }], splitKeys: 64 },
  { name: 'decode of 3 lengths, hd 16, G 2, splits of 64', hd: 16, nH: 4, nKv: 2, bs: 4, seqs: [{ past: 300, n: 1 }, { past: 9, n: 1 }, { past: 130, n: 1 }], splitKeys: 64 },
  { name: 'hd 64, G 3, bs 16, chunk + decode, peaky', hd: 64, nH: 6, nKv: 2, bs: 16, seqs: [{ past: 200, n: 1 }, { past: 0, n: 9 }], splitKeys: 64, qkStd: 3 },
  { name: 'hd 128, G 8, softcap', hd: 128, nH: 8, nKv: 1, bs: 16, seqs: [{ past: 150, n: 1 }, { past: 70, n: 1 }], splitKeys: 64, softcap: 30, qkStd: 3 },
  { name: 'hd 32, G 1, window 100 over 3 splits', hd: 32, nH: 2, nKv: 2, bs: 4, seqs: [{ past: 260, n: 2 }, { past: 40, n: 1 }], splitKeys: 64, window: 100 },
  { name: 'hd 256, G 2, custom scale', hd: 256, nH: 4, nKv: 2, bs: 16, seqs: [{ past: 90, n: 1 }], splitKeys: 64, scale: 0.05 },
  { name: 'one split for every sequence (one dispatch), hd 64, G 4', hd: 64, nH: 8, nKv: 2, bs: 16, seqs: [{ past: 40, n: 1 }, { past: 7, n: 1 }, { past: 0, n: 1 }], splitKeys: 64 },
  { name: 'a window within one split (one dispatch), hd 32, G 2', hd: 32, nH: 4, nKv: 2, bs: 8, seqs: [{ past: 120, n: 1 }, { past: 30, n: 1 }], splitKeys: 64, window: 50 },
  { name: 'long decode, default split size', hd: 64, nH: 4, nKv: 2, bs: 16, seqs: [{ past: 1500, n: 1 }, { past: 20, n: 1 }] },
];

describe('split size', () => {
  it('short contexts take one split; long ones split in multiples of 64 within the workgroup target', () => {
    expect(splitKeysFor(100, 1, 32)).toBe(128);
    expect(splitKeysFor(4096, 1, 32)).toBe(MIN_SPLIT_KEYS);
    // 64 tokens x 32 heads = 2048 workgroups already: no split.
    expect(splitKeysFor(4096, 64, 32)).toBe(4096);
    const k = splitKeysFor(131072, 1, 32);
    expect(k % 64).toBe(0);
    expect(Math.ceil(131072 / k)).toBeLessThanOrEqual(64);
  });
});

describe.each(TEST_BACKENDS)('attentionSplitK on %s', (backend) => {
  const kinds: [SplitKvDtype, boolean][] = [
    ['f32', false],
    ['f16', false],
    ['f16', true],
  ];
  for (const [kvDtype, native] of kinds) {
    it.each(CASES.map((c) => [c.name, c] as const))(`${kvDtype}${native ? ' native' : ''} cache: %s`, async (_, c) => {
      const ctx = await gpuFor(backend);
      if (native && !ctx.gpu.caps.f16) return; // needs shader-f16 (Deno over lavapipe: test/runtime)
      const seed = c.hd * 131 + c.nH * 17 + c.seqs.length;
      const s = splitSetup(c, seed);
      const half = kvDtype === 'f16';
      const hk = half ? toHalves(s.kf) : null;
      const hv = half ? toHalves(s.vf) : null;
      const kVals = hk?.values ?? s.kf;
      const vVals = hv?.values ?? s.vf;
      const maxPosition = Math.max(...s.positions);
      const o = {
        tokens: s.T,
        qHeads: c.nH,
        kvHeads: c.nKv,
        headDim: c.hd,
        rowStride: s.qkvCols,
        blockSize: c.bs,
        maxBlocksPerSeq: s.maxBlocks,
        maxPosition,
        ...(c.softcap ? { softcap: c.softcap } : {}),
        ...(c.window ? { window: c.window } : {}),
        ...(c.scale ? { scale: c.scale } : {}),
      };
      const splitKeys = c.splitKeys ?? splitKeysFor(c.window ? Math.min(maxPosition + 1, c.window) : maxPosition + 1, s.T, c.nH);
      const tq = ctx.tensor(s.qkv, [s.T, s.qkvCols], 'f32');
      const tk = hk ? ctx.tensor(hk.words, [hk.words.length], 'u32') : ctx.tensor(s.kf, [s.kf.length], 'f32');
      const tv = hv ? ctx.tensor(hv.words, [hv.words.length], 'u32') : ctx.tensor(s.vf, [s.vf.length], 'f32');
      const tp = ctx.tensor(s.positions, [s.T], 'u32');
      const ts = ctx.tensor(s.tokenSeq, [s.T], 'u32');
      const tb = ctx.tensor(s.blockTables, [s.blockTables.length], 'u32');
      const out = ctx.scratch([s.T, c.nH * c.hd]);
      const rec = ctx.recorder();
      await attentionSplitK(rec, tq, tk, tv, tp, ts, tb, out, { ...o, kvDtype, nativeF16: native, ...(c.splitKeys ? { splitKeys: c.splitKeys } : {}) });
      const splits = Math.ceil((c.window ? Math.min(maxPosition + 1, c.window) : maxPosition + 1) / splitKeys);
      expect(rec.dispatches).toBe(splits === 1 ? 1 : 2); // one split: the partial phase writes out itself
      const back = rec.readback(out);
      rec.submit();
      const got = new Float32Array(await back);
      const direct = attentionRef(s.qkv, kVals, vVals, s.positions, s.tokenSeq, s.blockTables, o);
      const phased = attentionSplitKRef(s.qkv, kVals, vVals, s.positions, s.tokenSeq, s.blockTables, { ...o, splitKeys }, splits);
      assertClose(phased, direct, TOL_F32, 'split reference vs direct');
      assertClose(got, direct, TOL_F32, 'out');
      for (const t of [tq, tk, tv, tp, ts, tb]) t.buffer.destroy();
      ctx.free(out);
    });
  }
});

describe.each(TEST_BACKENDS)('attentionSplitK with one partials buffer for several calls on %s', (backend) => {
  it('two layers in one step through the same partials buffer match the reference, without step scratch', async () => {
    const ctx = await gpuFor(backend);
    const c = CASES[1]!; // decode of 3 lengths, splits of 64
    const s = splitSetup(c, 4242);
    const maxPosition = Math.max(...s.positions);
    const base = { tokens: s.T, qHeads: c.nH, kvHeads: c.nKv, headDim: c.hd, rowStride: s.qkvCols, blockSize: c.bs, maxBlocksPerSeq: s.maxBlocks, maxPosition, splitKeys: 64 };
    const layers = [base, { ...base, window: 100 }]; // a global layer, then a sliding one: different split counts
    const shapes = layers.map((o) => splitShape(o));
    expect(shapes.map((x) => x.splits)).toEqual([Math.ceil((maxPosition + 1) / 64), 2]);
    const bytes = Math.max(...shapes.map((x) => splitKPartialBytes(s.T, c.nH, c.hd, x.splits)));
    const partials = { buffer: ctx.device.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE }), size: bytes };
    const tq = ctx.tensor(s.qkv, [s.T, s.qkvCols], 'f32');
    const tk = ctx.tensor(s.kf, [s.kf.length], 'f32');
    const tv = ctx.tensor(s.vf, [s.vf.length], 'f32');
    const tp = ctx.tensor(s.positions, [s.T], 'u32');
    const ts = ctx.tensor(s.tokenSeq, [s.T], 'u32');
    const tb = ctx.tensor(s.blockTables, [s.blockTables.length], 'u32');
    const outs = layers.map(() => ctx.scratch([s.T, c.nH * c.hd]));
    const rec = ctx.recorder();
    rec.capture(); // step scratch would break the capture: none is taken
    for (let l = 0; l < layers.length; l++) await attentionSplitK(rec, tq, tk, tv, tp, ts, tb, outs[l]!, { ...layers[l]!, partials });
    expect(rec.endCapture()).not.toBeNull();
    expect(rec.dispatches).toBe(4);
    const backs = outs.map((o) => rec.readback(o));
    rec.submit();
    for (let l = 0; l < layers.length; l++) {
      const want = attentionRef(s.qkv, s.kf, s.vf, s.positions, s.tokenSeq, s.blockTables, layers[l]!);
      assertClose(new Float32Array(await backs[l]!), want, TOL_F32, `layer ${l}`);
    }
    for (const t of [tq, tk, tv, tp, ts, tb]) t.buffer.destroy();
    partials.buffer.destroy();
    for (const o of outs) ctx.free(o);
  });
});
