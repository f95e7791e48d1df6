/**
 * softcap.ts against softcap.ref.ts on every backend x variant: lengths that take the
 * vec4 and the scalar cpu paths, values well past the cap (saturating at +-cap), and a
 * cap of 30 as Gemma 2's final logits use.
 */
import { describe, expect, it } from 'vitest';
import { softcap } from '../../core/ops/softcap.ts';
import { softcapRef } from '../../core/ops/softcap.ref.ts';
import { assertClose, BACKEND_VARIANTS, gpuFor, randn } from '../helpers/gpu.ts';

describe.each(BACKEND_VARIANTS)('softcap on %s, %s variant', (backend, variant) => {
  it.each([
    [1, 30],
    [7, 30],
    [1024, 30],
    [4099, 50],
    [64, 2],
  ])('n=%i cap=%f matches the reference', async (n, cap) => {
    const ctx = await gpuFor(backend);
    const x = randn(n, n + cap);
    for (let i = 0; i < n; i++) x[i] = x[i]! * 40; // many values beyond the cap
    const t = ctx.tensor(x, [n], 'f32');
    const rec = ctx.recorder();
    await softcap(rec, t, cap, { variant });
    const out = rec.readback(t);
    rec.submit();
    const got = new Float32Array(await out);
    const want = softcapRef(x, cap);
    assertClose(got, want, { atol: 4e-6 * cap, rtol: 1e-5, nmse: 1e-10 });
    for (const v of got) expect(Math.abs(v)).toBeLessThanOrEqual(cap);
    t.buffer.destroy();
  });

  it('refuses a non-positive cap', async () => {
    const ctx = await gpuFor(backend);
    const t = ctx.tensor(new Float32Array(4), [4], 'f32');
    await expect(softcap(ctx.recorder(), t, 0, { variant })).rejects.toThrow(/positive/);
    t.buffer.destroy();
  });
});
