/**
 * embedding.ts against embedding.ref.ts on every backend × variant, for f32, f16, q8_0
 * and q4_0 tables (packed here by small local helpers; the reference reads the
 * dequantized table, so the comparison is exact up to f32 rounding), with and without
 * scale, absolute-position rows and token-type rows, and out-of-range ids.
 */
import { describe, expect, it } from 'vitest';
import { embedding } from '../../core/ops/embedding.ts';
import { embeddingRef } from '../../core/ops/embedding.ref.ts';
import type { GpuContext } from '../../core/gpu/context.ts';
import type { DType, Tensor } from '../../core/gpu/tensor.ts';
import { assertClose, BACKEND_VARIANTS, gpuFor, randn, rng, TOL_F32 } from '../helpers/gpu.ts';

// ---- local packing helpers: [V, D] f32 -> GPU layout + the f32 values it decodes to ----
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** f32 -> IEEE half bits, round to nearest even (subnormals, overflow to inf). */
function toHalf(v: number): number {
  f32[0] = v;
  const x = u32[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  const mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    const m = mant | 0x800000;
    const shift = 14 - e;
    let h = m >>> shift;
    const rem = m & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && h & 1)) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++; // a carry into the exponent is still correct
  return sign | h;
}

function fromHalf(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 0x1f) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

interface Packed {
  data: Uint8Array;
  scales?: Float32Array;
  deq: Float32Array;
}

function packF16(x: Float32Array, V: number, D: number): Packed {
  const W = Math.ceil(D / 2) * 2; // halves per padded row
  const h = new Uint16Array(V * W);
  const deq = new Float32Array(V * D);
  for (let r = 0; r < V; r++) {
    for (let c = 0; c < D; c++) {
      h[r * W + c] = toHalf(x[r * D + c]!);
      deq[r * D + c] = fromHalf(h[r * W + c]!);
    }
  }
  return { data: new Uint8Array(h.buffer), deq };
}

function packQ8(x: Float32Array): Packed {
  const q = new Int8Array(x.length);
  const scales = new Float32Array(x.length / 32);
  const deq = new Float32Array(x.length);
  for (let b = 0; b < scales.length; b++) {
    const blk = x.subarray(b * 32, b * 32 + 32);
    const d = fromHalf(toHalf(blk.reduce((m, v) => Math.max(m, Math.abs(v)), 0) / 127)); // a GGUF block's d is f16
    scales[b] = d;
    blk.forEach((v, j) => {
      q[b * 32 + j] = d ? Math.round(v / d) : 0;
      deq[b * 32 + j] = q[b * 32 + j]! * d;
    });
  }
  return { data: new Uint8Array(q.buffer), scales, deq };
}

function packQ4(x: Float32Array): Packed {
  const data = new Uint8Array(x.length / 2);
  const scales = new Float32Array(x.length / 32);
  const deq = new Float32Array(x.length);
  for (let b = 0; b < scales.length; b++) {
    const blk = x.subarray(b * 32, b * 32 + 32);
    const max = blk.reduce((m, v) => (Math.abs(v) > Math.abs(m) ? v : m), 0);
    const d = fromHalf(toHalf(max / -8)); // f16, as in a GGUF block
    scales[b] = d;
    const q = Array.from(blk, (v) => (d ? Math.min(15, Math.max(0, Math.round(v / d + 8))) : 8));
    for (let j = 0; j < 16; j++) data[b * 16 + j] = q[j]! | (q[j + 16]! << 4);
    q.forEach((n, j) => (deq[b * 32 + j] = (n - 8) * d));
  }
  return { data, scales, deq };
}

function upload(ctx: GpuContext, x: Float32Array, V: number, D: number, dtype: DType): { t: Tensor; deq: Float32Array } {
  if (dtype === 'f32') return { t: ctx.tensor(x, [V, D], 'f32'), deq: x };
  const pk = dtype === 'f16' ? packF16(x, V, D) : dtype === 'q8_0' ? packQ8(x) : packQ4(x);
  return { t: ctx.tensor(pk.data, [V, D], dtype, pk.scales), deq: pk.deq };
}

function destroy(...ts: (Tensor | undefined)[]): void {
  for (const t of ts) {
    t?.buffer.destroy();
    t?.scales?.destroy();
  }
}

// [dtype, V, D, T]
const CASES: [DType, number, number, number][] = [
  ['f32', 5, 1, 1],
  ['f32', 11, 3, 7],
  ['f32', 50, 130, 70],
  ['f16', 5, 1, 3],
  ['f16', 11, 7, 5],
  ['f16', 9, 511, 4],
  ['f16', 20, 130, 70],
  ['q8_0', 3, 32, 1],
  ['q8_0', 17, 96, 70],
  ['q4_0', 3, 32, 1],
  ['q4_0', 17, 160, 70],
];

describe.each(BACKEND_VARIANTS)('embedding on %s, %s variant', (backend, variant) => {
  it.each(CASES)('%s V=%i D=%i T=%i: plain, scaled, + positions, + token types', async (dtype, V, D, T) => {
    const ctx = await gpuFor(backend);
    const r = rng(V * D + T);
    const { t: table, deq } = upload(ctx, randn(V * D, V + D), V, D, dtype);
    const ids = Uint32Array.from({ length: T }, () => Math.floor(r() * V));
    const P = T + 3;
    const positions = Uint32Array.from({ length: T }, (_, t) => (t * 5 + 2) % P);
    const typeIds = Uint32Array.from({ length: T }, () => (r() < 0.5 ? 0 : 1));
    const posTable = randn(P * D, 3 * D);
    const typeTable = randn(2 * D, 5 * D);
    const ti = ctx.tensor(ids, [T], 'u32');
    const tp = ctx.tensor(positions, [T], 'u32');
    const tpt = ctx.tensor(posTable, [P, D], 'f32');
    const tty = ctx.tensor(typeIds, [T], 'u32');
    const ttt = ctx.tensor(typeTable, [2, D], 'f32');
    for (const mode of ['plain', 'scaled', 'pos', 'pos+type'] as const) {
      const scale = mode === 'plain' ? 1 : Math.sqrt(D);
      const out = ctx.tensor(new Float32Array(T * D), [T, D], 'f32');
      const rec = ctx.recorder();
      await embedding(rec, ti, table, out, {
        variant,
        ...(mode !== 'plain' ? { scale } : {}),
        ...(mode.startsWith('pos') ? { positions: tp, posTable: tpt } : {}),
        ...(mode === 'pos+type' ? { typeIds: tty, typeTable: ttt } : {}),
      });
      const got = rec.readback(out);
      rec.submit();
      const want = embeddingRef(ids, deq, D, scale, {
        ...(mode.startsWith('pos') ? { positions, posTable } : {}),
        ...(mode === 'pos+type' ? { typeIds, typeTable } : {}),
      });
      assertClose(new Float32Array(await got), want, TOL_F32, `${dtype} ${mode}`);
      destroy(out);
    }
    destroy(table, ti, tp, tpt, tty, ttt);
  });

  it.each(['f32', 'f16'] as const)('a %s table split by rows into parts (base / part) gathers as the whole table', async (dtype) => {
    const ctx = await gpuFor(backend);
    const [V, D, T] = [37, 12, 50];
    const x = randn(V * D, 77);
    const ids = Uint32Array.from({ length: T }, (_, t) => (t * 7) % (V + 3)); // a few ids >= V: zeros
    const cuts = [0, 10, 11, 30, V];
    const parts = cuts.slice(0, -1).map((r0, i) => upload(ctx, x.slice(r0 * D, cuts[i + 1]! * D), cuts[i + 1]! - r0, D, dtype));
    const ti = ctx.tensor(ids, [T], 'u32');
    const out = ctx.tensor(new Float32Array(T * D).fill(5), [T, D], 'f32');
    const rec = ctx.recorder();
    for (let i = 0; i < parts.length; i++) {
      await embedding(rec, ti, parts[i]!.t, out, { variant, scale: 3, ...(i > 0 ? { base: cuts[i]!, part: true } : {}) });
    }
    const got = rec.readback(out);
    rec.submit();
    const deq = new Float32Array(V * D);
    parts.forEach((p, i) => deq.set(p.deq, cuts[i]! * D));
    assertClose(new Float32Array(await got), embeddingRef(ids, deq, D, 3), TOL_F32);
    destroy(ti, out, ...parts.map((p) => p.t));
  });

  it('covers > 65535 tokens (the gpu variant folds its grid into 2-D)', async () => {
    const ctx = await gpuFor(backend);
    const [V, D, T] = [7, 1, 66000];
    const x = randn(V * D, 2);
    const ids = Uint32Array.from({ length: T }, (_, t) => (t * 3) % V);
    const table = ctx.tensor(x, [V, D], 'f32');
    const ti = ctx.tensor(ids, [T], 'u32');
    const out = ctx.tensor(new Float32Array(T * D), [T, D], 'f32');
    const rec = ctx.recorder();
    await embedding(rec, ti, table, out, { variant });
    const got = rec.readback(out);
    rec.submit();
    assertClose(new Float32Array(await got), embeddingRef(ids, x, D), TOL_F32);
    destroy(table, ti, out);
  });

  it('gives zero token rows for ids >= V and records one dispatch', async () => {
    const ctx = await gpuFor(backend);
    const [V, D] = [4, 6];
    const x = randn(V * D, 1);
    const ids = new Uint32Array([3, 4, 0, 1000]);
    const table = ctx.tensor(x, [V, D], 'f32');
    const ti = ctx.tensor(ids, [4], 'u32');
    const out = ctx.tensor(new Float32Array(4 * D).fill(9), [4, D], 'f32');
    const rec = ctx.recorder();
    await embedding(rec, ti, table, out, { variant });
    expect(rec.dispatches).toBe(1);
    const got = rec.readback(out);
    rec.submit();
    assertClose(new Float32Array(await got), embeddingRef(ids, x, D), TOL_F32);
    await expect(embedding(ctx.recorder(), ti, ctx.tensor(new Uint8Array(4 * 48), [4, 48], 'q8_0'), out, { variant })).rejects.toThrow(/D % 32/);
    destroy(table, ti, out);
  });
});
