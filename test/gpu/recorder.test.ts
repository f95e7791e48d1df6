/**
 * Step recording: explicit bind-group layouts read from WGSL, Params bound at fixed offsets
 * of the uniform arena, bind groups cached across steps of one shape (and per arena offset),
 * and discarding a step before submit.
 */
import { describe, expect, it } from 'vitest';
import { bindGroupEntries } from '../../core/gpu/pipelines.ts';
import { add } from '../../core/ops/add.ts';
import { rmsNorm } from '../../core/ops/rms_norm.ts';
import { rmsNormRef } from '../../core/ops/rms_norm.ref.ts';
import { assertClose, gpuFor, randn, TEST_BACKENDS, TOL_F32 } from '../helpers/gpu.ts';

describe('bindGroupEntries', () => {
  it('reads uniform, storage and texture declarations, Params at a fixed offset', () => {
    const code = [
      'struct Params { n: u32, };',
      '@group(0) @binding(0) var<uniform> p: Params;',
      '@group(0) @binding(2) var<storage, read_write> y: array<f32>;',
      '@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;',
      '@group(0) @binding(3) var kv: texture_storage_2d<r32float, read_write>;',
      '@group(0) @binding(4) var w: texture_storage_2d<rgba32float, read>;',
      '@group(0) @binding(5) var t: texture_2d<u32>;',
    ].join('\n');
    const e = bindGroupEntries(code, 16)!;
    expect(e.map((x) => x.binding)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(e[0]!.buffer).toEqual({ type: 'uniform', minBindingSize: 16 });
    expect(e[1]!.buffer).toEqual({ type: 'read-only-storage' });
    expect(e[2]!.buffer).toEqual({ type: 'storage' });
    expect(e[3]!.storageTexture).toEqual({ access: 'read-write', format: 'r32float', viewDimension: '2d' });
    expect(e[4]!.storageTexture).toEqual({ access: 'read-only', format: 'rgba32float', viewDimension: '2d' });
    expect(e[5]!.texture).toEqual({ sampleType: 'uint', viewDimension: '2d' });
  });

  it("leaves kernels it cannot describe to 'auto' (null)", () => {
    expect(bindGroupEntries('@group(0) @binding(0) var s: sampler;', 16)).toBeNull();
    expect(bindGroupEntries('@group(0) @binding(1) var<storage, read> x: array<f32>;', 16)).toBeNull(); // no Params
    expect(bindGroupEntries('@group(0) @binding(0) var<uniform> p: Params;\n@group(1) @binding(0) var<storage> x: array<f32>;', 16)).toBeNull();
  });
});

describe.each(TEST_BACKENDS)('Recorder on %s', (backend) => {
  it('reuses bind groups across steps of one shape; each dispatch reads its own Params', async () => {
    const ctx = await gpuFor(backend);
    const rows = 3;
    const dim = 40;
    const x = randn(rows * dim, 5);
    const w = randn(dim, 6);
    const tx = ctx.tensor(x, [rows, dim], 'f32');
    const tw = ctx.tensor(w, [dim], 'f32');
    const y1 = ctx.scratch([rows, dim]);
    const y2 = ctx.scratch([rows, dim]);
    const one = ctx.tensor(new Float32Array([1, 2, 3, 4]), [4], 'f32');
    const sum = ctx.scratch([4]);
    // One step: the same kernel on the same buffers twice with different eps (different
    // Params at different arena offsets: a group each), optionally after another dispatch.
    const step = async (leading: boolean): Promise<[Float32Array, Float32Array]> => {
      const rec = ctx.recorder();
      if (leading) await add(rec, one, one, sum);
      await rmsNorm(rec, tx, tw, y1, { eps: 1e-5 });
      await rmsNorm(rec, tx, tw, y2, { eps: 10 });
      const a = rec.readback(y1);
      const b = rec.readback(y2);
      rec.submit();
      return [new Float32Array(await a), new Float32Array(await b)];
    };
    const check = ([a, b]: [Float32Array, Float32Array]): void => {
      assertClose(a, rmsNormRef(x, w, dim, 1e-5), TOL_F32, 'eps 1e-5');
      assertClose(b, rmsNormRef(x, w, dim, 10), TOL_F32, 'eps 10');
    };
    check(await step(false));
    const groups = ctx.bindGroups.size;
    check(await step(false));
    expect(ctx.bindGroups.size).toBe(groups); // the second step creates none
    check(await step(true)); // every rmsNorm now sits at another arena offset
    expect(ctx.bindGroups.size).toBe(groups + 3); // the add's group, and the rmsNorms' at their new offsets
    check(await step(false));
    check(await step(true));
    expect(ctx.bindGroups.size).toBe(groups + 3); // both shapes' groups stay cached
    for (const t of [y1, y2, sum]) ctx.free(t);
    for (const t of [tx, tw, one]) t.buffer.destroy();
  });

  it('discard() returns scratch to the pool and rejects pending readbacks', async () => {
    const ctx = await gpuFor(backend);
    const a = ctx.tensor(new Float32Array([1, 2, 3, 4]), [4], 'f32');
    const y = ctx.scratch([4]);
    const rec = ctx.recorder();
    await add(rec, a, a, y);
    rec.temp(1024);
    const read = rec.readback(y);
    rec.discard();
    await expect(read).rejects.toThrow(/discarded/);
    expect(() => rec.submit()).toThrow(/already submitted/);
    const allocated = ctx.pool.allocatedBytes;
    // The next step reuses the pooled buffers instead of allocating more.
    const again = ctx.recorder();
    again.temp(1024);
    await add(again, a, a, y);
    const out = again.readback(y);
    expect(ctx.pool.allocatedBytes).toBe(allocated);
    again.submit();
    expect([...new Float32Array(await out)]).toEqual([2, 4, 6, 8]);
    ctx.free(y);
    a.buffer.destroy();
  });

  it('hands a step the scratch of the previous one in the same order, submitted or discarded', async () => {
    const ctx = await gpuFor(backend);
    const sizes = [4096, 4096, 4096, 256, 4096];
    const step = (end: (r: ReturnType<typeof ctx.recorder>) => void): number[] => {
      const rec = ctx.recorder();
      const got = sizes.map((n) => ctx.bufferId(rec.temp(n)));
      end(rec);
      return got;
    };
    const first = step((r) => r.submit());
    // The same sizes asked in the same order get the same buffer at each index (so a dispatch
    // binding its i-th scratch finds its bind group cached), whether the step went out or not.
    expect(step((r) => r.submit())).toEqual(first);
    expect(step((r) => r.discard())).toEqual(first);
    expect(step((r) => r.submit())).toEqual(first);
  });
});
