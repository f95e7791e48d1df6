import { describe, expect, it } from 'vitest';
import { logitBias, logitBiasRef } from '../../core/ops/logit_bias.ts';
import { BACKEND_VARIANTS, gpuFor, randn } from '../helpers/gpu.ts';

describe.each(BACKEND_VARIANTS)('logit_bias on %s, %s variant', (backend) => {
  it('adds each row\'s biases in place, leaving other logits and rows as they were', async () => {
    const ctx = await gpuFor(backend);
    const [B, V] = [3, 300];
    const x = randn(B * V, 9);
    const rows = [new Map([[0, 100], [299, -100], [5, 0.5]]), undefined, new Map([[5, -2.25]])];
    const t = ctx.tensor(x, [B, V], 'f32');
    const rec = ctx.recorder();
    await logitBias(rec, t, rows);
    expect(rec.dispatches).toBe(1);
    const read = rec.readback(t);
    rec.submit();
    expect(new Float32Array(await read)).toEqual(logitBiasRef(x, V, rows));
    t.buffer.destroy();
  });
});
