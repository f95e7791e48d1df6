import { describe, expect, it } from 'vitest';
import { logprobs, logprobWords, unpackLogprobs } from '../../core/ops/logprobs.ts';
import { logprobsRef } from '../../core/ops/logprobs.ref.ts';
import { BACKEND_VARIANTS, gpuFor, randn } from '../helpers/gpu.ts';

// Log-softmax in f32 against float64: |error| grows with log(V) and the logit range; 2e-5 absolute
// holds for unit-variance logits up to V = 5000 with ties broken by id.
const TOL = 2e-5;

describe.each(BACKEND_VARIANTS)('logprobs on %s, %s variant', (backend) => {
  it.each([
    [1, 7, 3],
    [3, 512, 20],
    [2, 5000, 5],
    [4, 33, 0],
  ])('rows=%i V=%i k=%i matches the float64 reference', async (rows, V, k) => {
    const ctx = await gpuFor(backend);
    const x = randn(rows * V, rows * 31 + V);
    // Ties: the top-k order must break them by ascending id, and pick no id twice.
    x[3] = x[1]!;
    if (V > 40) x[40] = x[1]!;
    const ids = Array.from({ length: rows }, (_, r) => (r * 97 + 1) % V);
    const tx = ctx.tensor(x, [rows, V], 'f32');
    const tids = ctx.tensor(Uint32Array.from(ids), [rows], 'u32');
    const out = ctx.scratch([rows * logprobWords(k)], 'u32');
    const rec = ctx.recorder();
    await logprobs(rec, tx, tids, k, out);
    const read = rec.readback(out);
    rec.submit();
    const got = unpackLogprobs(new Uint32Array(await read), rows, k);
    const want = logprobsRef(x, V, ids, k);
    got.forEach((g, r) => {
      const w = want[r]!;
      expect(g.id).toBe(w.id);
      expect(Math.abs(g.logprob - w.logprob)).toBeLessThan(TOL);
      expect(g.top.map((t) => t.id)).toEqual(w.top.map((t) => t.id));
      g.top.forEach((t, j) => expect(Math.abs(t.logprob - w.top[j]!.logprob)).toBeLessThan(TOL));
    });
    ctx.free(out);
    tx.buffer.destroy();
    tids.buffer.destroy();
  });
});
