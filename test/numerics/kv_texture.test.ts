/**
 * KV caches in r32float storage textures (core/ops/kv_write.ts KvTexture, used on llvmpipe)
 * against the same caches in buffers: ropeKvWrite stores exactly the same f32 rows (the
 * texture region of the layer, copied back, equals the buffer byte for byte, untouched rows
 * included) and attention reads them into exactly the same output — on a layer region that
 * does not start at texel 0 (base4 != 0), with GQA, a sliding window and a NO_SLOT token, for
 * both kernel variants. q8 caches in textures are refused.
 */
import { describe, expect, it } from 'vitest';
import type { GpuContext } from '../../core/gpu/context.ts';
import type { Tensor } from '../../core/gpu/tensor.ts';
import { attention } from '../../core/ops/attention.ts';
import { createR32Texture, KV_TEXTURE_WIDTH, NO_SLOT, type KvTexture } from '../../core/ops/kv_write.ts';
import { ropeKvWrite } from '../../core/ops/rope_kv_write.ts';
import { BACKEND_VARIANTS, gpuFor, randn, rng } from '../helpers/gpu.ts';

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
  it.each(CASES)('$name: same stored rows and attention output as buffers', async (c) => {
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
    const floats = numBlocks * BLOCK * c.nKv * c.hd; // one layer
    const noise = randn(floats, seed + 2);
    const base = { tokens: c.T, qHeads: c.nH, kvHeads: c.nKv, headDim: c.hd, rowStride };

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
    const bk = ctx.tensor(noise, [floats], 'f32');
    const bv = ctx.tensor(noise.map((a) => -a), [floats], 'f32');
    const want = await run(bk, bv);
    const rb = ctx.recorder();
    const [wk, wv] = [rb.readback(bk), rb.readback(bv)];
    rb.submit();
    const wantK = new Float32Array(await wk);
    const wantV = new Float32Array(await wv);

    // Textures: the layer's region starts after a 1-layer gap (base4 != 0), pre-filled with the same noise.
    const gap = floats + 4 * 100;
    const k = createR32Texture(ctx, gap + floats, 'k');
    const v = createR32Texture(ctx, gap + floats, 'v');
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

    expect(Array.from(got.qkv)).toEqual(Array.from(want.qkv));
    expect(Array.from(await readTexture(ctx, tk, gap, floats))).toEqual(Array.from(wantK));
    expect(Array.from(await readTexture(ctx, tv, gap, floats))).toEqual(Array.from(wantV));
    expect(Array.from(await readTexture(ctx, tk, 0, gap)).every((a) => a === 0)).toBe(true);
    expect(Array.from(got.out)).toEqual(Array.from(want.out));
    expect(want.out.some((a) => a !== 0)).toBe(true);

    const q8 = ctx.recorder();
    const tx = ctx.tensor(x, [c.T, rowStride], 'f32');
    await expect(ropeKvWrite(q8, tx, tp, ts, tk, tv, { ...base, theta: 10000, style: 'half' as const, kvDtype: 'q8', variant })).rejects.toThrow(/f32 caches only/);
    await expect(ropeKvWrite(q8, tx, tp, ts, tk, bv, { ...base, theta: 10000, style: 'half' as const, variant })).rejects.toThrow(/must both be textures or both buffers/);
    q8.submit();
    for (const t of [tp, ts, tseq, tbt, bk, bv, tx]) t.buffer.destroy();
    k.texture.destroy();
    v.texture.destroy();
  });
});
