/** Checks for q8 KV caches (layout in core/ops/kv_write.ts), shared by the kv_write and rope_kv_write tests. */
import { expect } from 'vitest';
import { kvRowWords } from '../../core/ops/kv_write.ts';

/**
 * q8 caches: every scale bit-exact (or within `scaleRtol` when the inputs were themselves
 * computed on the GPU), codes within 1, and at most 0.1% of codes off by 1 (a GPU
 * x * (1/scale) and the reference's x / scale landing on two sides of a .5 boundary).
 * Returns the number of codes off by 1.
 */
export function assertQ8Cache(got: Uint32Array, want: Uint32Array, hd: number, what: string, scaleRtol = 0): number {
  const R = kvRowWords(hd, 'q8');
  const gf = new Float32Array(got.buffer, got.byteOffset, got.length);
  const wf = new Float32Array(want.buffer, want.byteOffset, want.length);
  expect(got.length).toBe(want.length);
  const g8 = new Int8Array(got.buffer, got.byteOffset, got.byteLength);
  const w8 = new Int8Array(want.buffer, want.byteOffset, want.byteLength);
  let off = 0;
  let codes = 0;
  for (let r = 0; r < got.length / R; r++) {
    const [gs, ws] = [gf[r * R + R - 1]!, wf[r * R + R - 1]!];
    const scaleOk = got[r * R + R - 1] === want[r * R + R - 1] || Math.abs(gs - ws) <= scaleRtol * Math.abs(ws);
    if (!scaleOk) throw new Error(`${what}: scale of row ${r} is ${gs}, expected ${ws}`);
    for (let b = 0; b < 4 * (R - 1); b++) {
      const i = r * R * 4 + b;
      const d = Math.abs(g8[i]! - w8[i]!);
      if (d > 1) throw new Error(`${what}: row ${r} code ${b} is ${g8[i]}, expected ${w8[i]}`);
      off += d;
      codes++;
    }
  }
  expect(off).toBeLessThanOrEqual(Math.max(1, codes * 1e-3));
  return off;
}
