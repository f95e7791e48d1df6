/**
 * Step graphs (core/gpu/step_graph.ts): a captured run of dispatches replayed in a later
 * recorder computes what recording through the ops computes, with the inputs the step writes
 * into buffers the graph's bind groups name; a replay refuses where it cannot apply (another
 * arena offset or dispatch index, bind groups dropped since, profiling) and a capture that
 * touches step scratch or copies yields no graph. Model-level: stories260K on the gpu variant
 * (split-K attention) generates the same greedy ids with graphs on and off — several
 * sequences finishing at different steps, and contexts past one split (256 positions).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { type LoadedDecoder, loadDecoder } from '../../core/api/load_decoder.ts';
import { GpuContext } from '../../core/gpu/context.ts';
import { add } from '../../core/ops/add.ts';
import { Recorder } from '../../core/gpu/recorder.ts';
import { StepGraphs } from '../../core/gpu/step_graph.ts';
import { dirSource } from '../../server/fs_source.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { gpuFor, randn, TEST_BACKENDS } from '../helpers/gpu.ts';
import { PROMPT_IDS, REFERENCE_IDS } from '../models/stories260k.fixture.ts';
import { allPositionLogits } from '../helpers/tiny_decoder.ts';

describe.each(TEST_BACKENDS)('step graphs on %s', (backend) => {
  it('a replay computes what the capture computed, from the inputs written since', async () => {
    const ctx = await gpuFor(backend);
    const n = 64;
    const a = ctx.tensor(randn(n, 1), [n], 'f32');
    const b = ctx.tensor(randn(n, 2), [n], 'f32');
    const y = ctx.scratch([n]);
    const z = ctx.scratch([n]);
    // z = (a + b) + b, in two dispatches.
    const record = async (rec: ReturnType<GpuContext['recorder']>): Promise<void> => {
      await add(rec, a, b, y);
      await add(rec, y, b, z);
    };
    const rec1 = ctx.recorder();
    rec1.capture();
    await record(rec1);
    const graph = rec1.endCapture();
    expect(graph).not.toBeNull();
    expect(graph!.groups.length).toBe(2);
    rec1.submit();

    // New inputs in the same buffers; the replay records no op.
    const a2 = randn(n, 3);
    const b2 = randn(n, 4);
    ctx.device.queue.writeBuffer(a.buffer, a.offset, a2.buffer as ArrayBuffer);
    ctx.device.queue.writeBuffer(b.buffer, b.offset, b2.buffer as ArrayBuffer);
    const rec2 = ctx.recorder();
    expect(rec2.replay(graph!)).toBe(true);
    expect(rec2.dispatches).toBe(2);
    const out = rec2.readback(z);
    rec2.submit();
    const got = new Float32Array(await out);
    for (let i = 0; i < n; i++) expect(got[i]).toBeCloseTo(a2[i]! + 2 * b2[i]!, 5);

    // Another starting point, or bind groups dropped since: refused, nothing recorded.
    const rec3 = ctx.recorder();
    await add(rec3, a, b, y);
    expect(rec3.replay(graph!)).toBe(false);
    expect(rec3.dispatches).toBe(1);
    rec3.discard();
    ctx.dropBindGroups();
    const rec4 = ctx.recorder();
    expect(rec4.replay(graph!)).toBe(false);
    expect(rec4.dispatches).toBe(0);
    rec4.discard();
    for (const t of [a, b]) t.buffer.destroy();
    ctx.free(y);
    ctx.free(z);
  });

  it('a capture that uses step scratch or a copy yields no graph', async () => {
    const ctx = await gpuFor(backend);
    const a = ctx.tensor(randn(16, 5), [16], 'f32');
    const rec = ctx.recorder();
    rec.capture();
    const tmp = { buffer: rec.temp(64), offset: 0, shape: [16], dtype: 'f32' as const };
    await add(rec, a, a, tmp);
    expect(rec.endCapture()).toBeNull();
    rec.capture();
    rec.copy(a.buffer, 0, tmp.buffer, 0, 64);
    expect(rec.endCapture()).toBeNull();
    rec.capture();
    expect(rec.endCapture()).toBeNull(); // nothing dispatched
    rec.discard();
    a.buffer.destroy();
  });

  it('keeps the most recently used graphs', () => {
    const g = new StepGraphs(2);
    const graph = { at: 0, first: 0, epoch: 0, params: new Uint8Array(0), pipelines: [], groups: [], counts: new Uint32Array(0), slots: [] };
    g.set('a', graph);
    g.set('b', graph);
    expect(g.get('a')).toBe(graph); // a is now the most recent
    g.set('c', graph);
    expect([g.get('a'), g.get('b'), g.get('c')]).toEqual([graph, undefined, graph]);
    expect(g.captured).toBe(3);
  });
});

describe.each(TEST_BACKENDS)('stories260K with and without step graphs (%s, gpu variant)', (backend) => {
  const open: { ctx: GpuContext; loaded: LoadedDecoder }[] = [];
  afterAll(() => {
    for (const o of open) {
      o.loaded.destroy();
      o.ctx.destroy();
    }
  });

  const run = async (stepGraphs: 'on' | 'off'): Promise<{ ids: number[][]; long: number[]; loaded: LoadedDecoder }> => {
    const ctx = await GpuContext.create({ backend, variant: 'gpu' });
    const loaded = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { maxSeqs: 4, decode: { decodeMegakernel: 'off', stepGraphs } });
    open.push({ ctx, loaded });
    // Three sequences at once, finishing after 12, 25 and 40 tokens: steps of 3, 2, then 1 rows.
    const greedy = { temperature: 0 };
    const batch = await Promise.all(
      [
        ['Once upon a time', 12],
        ['The little dog', 25],
        ['Lily and Ben', 40],
      ].map(([p, n]) => loaded.engine.complete(p as string, { maxNewTokens: n as number, sampling: greedy })),
    );
    // One sequence decoding across position 256: the split-K shape changes from one split to two.
    const prompt = [...PROMPT_IDS, ...Array.from({ length: 244 }, (_, i) => REFERENCE_IDS[i % REFERENCE_IDS.length]!)];
    const long = await loaded.engine.complete(prompt, { maxNewTokens: 16, sampling: greedy, stop: [] });
    return { ids: batch.map((r) => r.tokenIds), long: long.tokenIds, loaded };
  };

  it('a recording cut short by an error leaves no graph; the next step captures a whole one', async () => {
    const ctx = await GpuContext.create({ backend, variant: 'gpu' });
    const loaded = await loadDecoder(ctx, dirSource(DEFAULT_MODEL_DIR), { maxSeqs: 4, decode: { decodeMegakernel: 'off' } });
    open.push({ ctx, loaded });
    const graphs = loaded.model.graphs;
    const token = [PROMPT_IDS[1]!]; // one token at position 0: a decode-only step
    const proto = Recorder.prototype;
    const dispatch = proto.dispatch;
    let n = 0;
    proto.dispatch = function (this: Recorder, ...args: Parameters<Recorder['dispatch']>): void {
      if (++n === 5) throw new Error('injected failure');
      dispatch.apply(this, args);
    };
    try {
      await expect(allPositionLogits(loaded, token)).rejects.toThrow('injected failure');
    } finally {
      proto.dispatch = dispatch;
    }
    expect(graphs.size).toBe(0);
    const first = await allPositionLogits(loaded, token); // recorded through the ops, captured
    expect([graphs.captured, graphs.replayed]).toEqual([1, 0]);
    const again = await allPositionLogits(loaded, token); // replayed
    expect([graphs.captured, graphs.replayed]).toEqual([1, 1]);
    expect(again).toEqual(first);
  });

  it('generates the same greedy ids, replaying graphs after the first step of each shape', async () => {
    const off = await run('off');
    const on = await run('on');
    expect(off.loaded.model.graphs.captured).toBe(0);
    expect(on.ids).toEqual(off.ids);
    expect(on.long).toEqual(off.long);
    expect(on.long.length).toBe(16);
    const g = on.loaded.model.graphs;
    expect(g.captured).toBeGreaterThanOrEqual(4); // batch 3, 2, 1; then two splits
    expect(g.replayed).toBeGreaterThan(40);
  }, 300_000);
});
