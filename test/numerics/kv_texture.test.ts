/**
 * KV caches in r32float storage textures (core/ops/kv_write.ts KvTexture, used on llvmpipe)
 * against the same caches in buffers: ropeKvWrite stores exactly the same f32 rows (the
 * texture region of the layer, copied back, equals the buffer byte for byte, untouched rows
 * included) and attention reads them into exactly the same output — on a layer region that
 * does not start at texel 0 (base4 != 0), with GQA, a sliding window and a NO_SLOT token, for
 * both kernel variants, for f32 caches (r32float) and q8 caches (r32uint words); a texture of
 * the other format is refused. The qkv matmul with the rope
 * epilogue (MatmulOptions.rope) leaves the same q columns and the same cache texels as the
 * matmul followed by ropeKvWrite.
 */
import { describe, expect, it } from 'vitest';
import type { GpuContext } from '../../core/gpu/context.ts';
import type { Tensor } from '../../core/gpu/tensor.ts';
import { attention } from '../../core/ops/attention.ts';
import { createR32Texture, KV_TEXTURE_WIDTH, kvRowWords, NO_SLOT, type KvDtype, type KvTexture } from '../../core/ops/kv_write.ts';
import { ropeKvWrite } from '../../core/ops/rope_kv_write.ts';
import { BACKEND_VARIANTS, countTextureCopies, gpuFor, randn, rng, TEST_BACKENDS } from '../helpers/gpu.ts';
import { stagingTexture, weightTexture } from '../../core/ops/decode_megakernel.ts';
import { matmul, ropeFusionProblem, XTEX_MIN_ROWS } from '../../core/ops/matmul.ts';
import { invFreqTensor } from '../../core/ops/rope.ts';

interface Case {
  name: string;
  T: number;
  nH: number;
  nKv: number;
  hd: number;
  window?: number;
}

const CASES: Case[] = [
  { name: 'stories260K shape (8 heads, 4 kv, hd 8)', T: 9, nH: 8, nKv: 4, hd: 8 },
  { name: 'GQA 3, hd 16, window 5', T: 12, nH: 6, nKv: 2, hd: 16, window: 5 },
];

const BLOCK = 4;

/** Texture contents (floats first..first+n of the KV float layout) copied back to the host. */
async function readTexture(ctx: GpuContext, t: KvTexture, first: number, n: number): Promise<Float32Array> {
  const rows = t.texture.height;
  const bytesPerRow = KV_TEXTURE_WIDTH * 4;
  const buf = ctx.device.createBuffer({ size: rows * bytesPerRow, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.MAP_READ });
  const enc = ctx.device.createCommandEncoder();
  enc.copyTextureToBuffer({ texture: t.texture }, { buffer: buf, bytesPerRow }, [KV_TEXTURE_WIDTH, rows]);
  ctx.device.queue.submit([enc.finish()]);
  await buf.mapAsync(GPUMapMode.READ);
  const all = new Float32Array(buf.getMappedRange().slice(0));
  buf.destroy();
  return all.slice(first, first + n);
}

describe.each(BACKEND_VARIANTS)('KV textures on %s, %s variant', (backend, variant) => {
  it.each(CASES.flatMap((c) => (['f32', 'q8'] as KvDtype[]).map((kvDtype) => ({ ...c, kvDtype }))))('$name, $kvDtype: same stored rows and attention output as buffers', async (c) => {
    const q8 = c.kvDtype === 'q8';
    const format = q8 ? 'r32uint' : 'r32float';
    const ctx = await gpuFor(backend);
    const rowStride = (c.nH + 2 * c.nKv) * c.hd;
    const seed = c.T * 31 + c.hd;
    const r = rng(seed);
    // Two sequences: tokens 0..T/2-1 are the first, the rest the second; positions from 0.
    const half = c.T >> 1;
    const seqOf = (t: number): number => (t < half ? 0 : 1);
    const pos = Uint32Array.from({ length: c.T }, (_, t) => (t < half ? t : t - half));
    const maxBlocks = Math.ceil(c.T / BLOCK) + 1;
    const numBlocks = 2 * maxBlocks + 3;
    const perm = Array.from({ length: numBlocks }, (_, i) => i).sort(() => r() - 0.5);
    const bt = Uint32Array.from({ length: 2 * maxBlocks }, (_, i) => perm[i]!);
    const slots = Uint32Array.from({ length: c.T }, (_, t) => bt[seqOf(t) * maxBlocks + Math.floor(pos[t]! / BLOCK)]! * BLOCK + (pos[t]! % BLOCK));
    // The last token is stored nowhere (NO_SLOT); at the previous token's position its attention
    // reads only keys that were stored.
    slots[c.T - 1] = NO_SLOT;
    pos[c.T - 1] = pos[c.T - 2]!;
    const x = randn(c.T * rowStride, seed + 1);
    const floats = numBlocks * BLOCK * c.nKv * (q8 ? kvRowWords(c.hd, 'q8') : c.hd); // one layer, 4-byte elements
    const noise = randn(floats, seed + 2);
    const base = { tokens: c.T, qHeads: c.nH, kvHeads: c.nKv, headDim: c.hd, rowStride, kvDtype: c.kvDtype };

    // Buffers.
    const tp = ctx.tensor(pos, [c.T], 'u32');
    const ts = ctx.tensor(slots, [c.T], 'u32');
    const tseq = ctx.tensor(Uint32Array.from({ length: c.T }, (_, t) => seqOf(t)), [c.T], 'u32');
    const tbt = ctx.tensor(bt, [bt.length], 'u32');
    const run = async (k: Tensor | KvTexture, v: Tensor | KvTexture): Promise<{ out: Float32Array; qkv: Float32Array }> => {
      const tx = ctx.tensor(x, [c.T, rowStride], 'f32');
      const out = ctx.tensor(new Float32Array(c.T * c.nH * c.hd), [c.T, c.nH * c.hd], 'f32');
      const rec = ctx.recorder();
      await ropeKvWrite(rec, tx, tp, ts, k, v, { ...base, theta: 10000, style: 'half' as const, variant });
      await attention(rec, tx, k, v, tp, tseq, tbt, out, { ...base, blockSize: BLOCK, maxBlocksPerSeq: maxBlocks, ...(c.window ? { window: c.window } : {}), variant });
      const [go, gx] = [rec.readback(out), rec.readback(tx)];
      rec.submit();
      const res = { out: new Float32Array(await go), qkv: new Float32Array(await gx) };
      tx.buffer.destroy();
      out.buffer.destroy();
      return res;
    };
    // q8: the same bytes as u32 words (codes and scales are whatever the noise spells; the
    // rows the step stores are overwritten, the others must come through untouched).
    const cache = (a: Float32Array): Tensor => (q8 ? ctx.tensor(new Uint32Array(a.buffer.slice(0)), [floats], 'u32') : ctx.tensor(a, [floats], 'f32'));
    const bk = cache(noise);
    const bv = cache(noise.map((a) => -a));
    const want = await run(bk, bv);
    const rb = ctx.recorder();
    const [wk, wv] = [rb.readback(bk), rb.readback(bv)];
    rb.submit();
    const wantK = new Uint32Array(await wk);
    const wantV = new Uint32Array(await wv);

    // Textures: the layer's region starts after a 1-layer gap (base4 != 0), pre-filled with the same noise.
    const gap = floats + 4 * 100;
    const k = createR32Texture(ctx, gap + floats, 'k', format);
    const v = createR32Texture(ctx, gap + floats, 'v', format);
    if (!k || !v) throw new Error('no KV texture');
    const fill = (t: KvTexture, data: Float32Array): void => {
      const all = new Float32Array(t.texture.height * KV_TEXTURE_WIDTH);
      all.set(data, gap);
      ctx.device.queue.writeTexture({ texture: t.texture }, all, { bytesPerRow: KV_TEXTURE_WIDTH * 4 }, [KV_TEXTURE_WIDTH, t.texture.height]);
    };
    const tk: KvTexture = { ...k, base4: gap / 4 };
    const tv: KvTexture = { ...v, base4: gap / 4 };
    fill(tk, noise);
    fill(tv, noise.map((a) => -a));
    const got = await run(tk, tv);

    const bits = (a: Float32Array): number[] => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
    expect(Array.from(got.qkv)).toEqual(Array.from(want.qkv));
    expect(bits(await readTexture(ctx, tk, gap, floats))).toEqual(Array.from(wantK));
    expect(bits(await readTexture(ctx, tv, gap, floats))).toEqual(Array.from(wantV));
    expect(bits(await readTexture(ctx, tk, 0, gap)).every((a) => a === 0)).toBe(true);
    expect(Array.from(got.out)).toEqual(Array.from(want.out));
    expect(want.out.some((a) => a !== 0)).toBe(true);

    const bad = ctx.recorder();
    const tx = ctx.tensor(x, [c.T, rowStride], 'f32');
    const other = q8 ? 'f32' : 'q8';
    await expect(ropeKvWrite(bad, tx, tp, ts, tk, tv, { ...base, theta: 10000, style: 'half' as const, kvDtype: other, variant })).rejects.toThrow(/KV textures/);
    await expect(ropeKvWrite(bad, tx, tp, ts, tk, bv, { ...base, theta: 10000, style: 'half' as const, variant })).rejects.toThrow(/must both be textures or both buffers/);
    bad.submit();
    for (const t of [tp, ts, tseq, tbt, bk, bv, tx]) t.buffer.destroy();
    k.texture.destroy();
    v.texture.destroy();
  });
});

describe.each(TEST_BACKENDS)('qkv matmul with the rope epilogue on %s', (backend) => {
  const FUSED: (Case & { K: number; bias?: boolean })[] = [
    { ...CASES[0]!, K: 64 },
    { ...CASES[1]!, K: 20, bias: true },
    { name: 'prefill-sized, hd 8, staged x', T: 40, nH: 4, nKv: 2, hd: 8, K: 16, bias: true },
  ];
  it.each(FUSED)('$name: same q columns and cache texels as matmul + ropeKvWrite', async (c) => {
    const ctx = await gpuFor(backend);
    const N = (c.nH + 2 * c.nKv) * c.hd;
    const seed = c.T * 101 + c.K;
    const x = randn(c.T * c.K, seed, 2);
    const w = randn(N * c.K, seed + 1, 0.3);
    const b = randn(N, seed + 2);
    // Positions 3.. (a prefix already cached), slots scattered, the last token stored nowhere.
    const pos = Uint32Array.from({ length: c.T }, (_, t) => 3 + t);
    const slots = Uint32Array.from({ length: c.T }, (_, t) => (t * 7 + 5) % (2 * c.T));
    slots[c.T - 1] = NO_SLOT;
    const floats = 2 * c.T * c.nKv * c.hd;
    const gap = 4 * 64;
    const noise = randn(gap + floats, seed + 3);
    const buf = ctx.tensor(w, [N, c.K], 'f32');
    const tex = weightTexture(ctx, buf.buffer, w.byteLength)!;
    const xs = stagingTexture(ctx, (c.T * c.K) / 4)!;
    const tx = ctx.tensor(x, [c.T, c.K], 'f32');
    const tb = ctx.tensor(b, [N], 'f32');
    const tp = ctx.tensor(pos, [c.T], 'u32');
    const ts = ctx.tensor(slots, [c.T], 'u32');
    const caches = (): [KvTexture, KvTexture] => {
      const pair = [createR32Texture(ctx, gap + floats, 'k'), createR32Texture(ctx, gap + floats, 'v')].map((t, i) => {
        const all = new Float32Array(t!.texture.height * KV_TEXTURE_WIDTH);
        all.set(i ? noise.map((a) => -a) : noise);
        ctx.device.queue.writeTexture({ texture: t!.texture }, all, { bytesPerRow: KV_TEXTURE_WIDTH * 4 }, [KV_TEXTURE_WIDTH, t!.texture.height]);
        return { ...t!, base4: gap / 4 };
      });
      return [pair[0]!, pair[1]!];
    };
    const [rk, rv] = caches();
    const [fk, fv] = caches();
    const want = ctx.tensor(new Float32Array(c.T * N), [c.T, N], 'f32');
    const got = ctx.tensor(new Float32Array(c.T * N), [c.T, N], 'f32');
    const weight = { w: buf, ...(c.bias ? { bias: tb } : {}) };
    const opts = { variant: 'cpu' as const, wTexture: { binding: tex, offset4: 0 }, xTexture: xs };
    const heads = { qHeads: c.nH, kvHeads: c.nKv, headDim: c.hd };
    expect(ropeFusionProblem({ ...heads, cacheK: fk, cacheV: fv }, N, c.K)).toBeNull();
    const rec = ctx.recorder();
    const copies = countTextureCopies(rec);
    await matmul(rec, tx, weight, want, opts);
    await ropeKvWrite(rec, want, tp, ts, rk, rv, { tokens: c.T, ...heads, rowStride: N, theta: 10000, style: 'half', variant: 'cpu' });
    const before = rec.dispatches;
    const invFreq = invFreqTensor(ctx, { headDim: c.hd, theta: 10000 });
    await matmul(rec, tx, weight, got, { ...opts, rope: { positions: tp, slots: ts, invFreq, cacheK: fk, cacheV: fv, ...heads } });
    expect(rec.dispatches - before).toBe(1);
    const [gw, gg] = [rec.readback(want), rec.readback(got)];
    rec.submit();
    const [a, g] = [new Float32Array(await gw), new Float32Array(await gg)];
    const q = (y: Float32Array): number[] => Array.from({ length: c.T }, (_, t) => Array.from(y.subarray(t * N, t * N + c.nH * c.hd))).flat();
    expect(q(g)).toEqual(q(a));
    expect(q(a).some((v) => v !== 0)).toBe(true);
    for (const [r, f] of [[rk, fk], [rv, fv]] as const) {
      const all = gap + floats;
      expect(Array.from(await readTexture(ctx, f, 0, all))).toEqual(Array.from(await readTexture(ctx, r, 0, all)));
    }
    expect(copies()).toBe(c.T >= XTEX_MIN_ROWS ? 2 : 0); // x staged in a texture for prefill-sized steps
    // Shapes the epilogue does not take.
    expect(ropeFusionProblem({ ...heads, headDim: 12, cacheK: fk, cacheV: fv }, (c.nH + 2 * c.nKv) * 12, c.K)).toMatch(/multiple of 8/);
    expect(ropeFusionProblem({ ...heads, cacheK: fk, cacheV: { ...fv, base4: 0 } }, N, c.K)).toMatch(/different texels/);
    const r2 = ctx.recorder();
    await expect(matmul(r2, tx, weight, got, { ...opts, rope: { positions: tp, slots: ts, invFreq, cacheK: fk, cacheV: fv, ...heads, kvHeads: c.nKv + 1 } })).rejects.toThrow(/cannot fuse rope/);
    r2.submit();
    for (const t of [buf, tx, tb, tp, ts, want, got]) t.buffer.destroy();
    for (const t of [tex, xs, rk, rv, fk, fv]) t.texture.destroy();
  });
});
