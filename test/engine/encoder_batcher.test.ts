/**
 * EncoderBatcher with fake runners and fake timers: batches close when full or when the
 * oldest input has waited batchDurationMs; one batch runs at a time while the next fills;
 * outputs go back to their own request in order (also across batches and under a random
 * concurrent load); a failing batch rejects only the affected requests (isolated re-runs);
 * cancellation and close() drop queued inputs.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { EncoderBatcher } from '../../core/models/encoder_batcher.ts';
import { CancelledError } from '../../core/errors.ts';
import { rng } from '../helpers/gpu.ts';

interface Tagged {
  req: number;
  i: number;
}

/** A runner that records each batch and answers input -> `${req}:${i}`. */
function recordingRunner(opts: { fail?: (x: Tagged) => boolean } = {}) {
  const batches: Tagged[][] = [];
  const run = vi.fn(async (inputs: Tagged[]): Promise<string[]> => {
    batches.push(inputs);
    if (opts.fail && inputs.some(opts.fail)) throw new Error('bad input');
    return inputs.map((x) => `${x.req}:${x.i}`);
  });
  return { run, batches };
}

const tag = (req: number, n: number): Tagged[] => Array.from({ length: n }, (_, i) => ({ req, i }));
const want = (req: number, n: number): string[] => tag(req, n).map((x) => `${x.req}:${x.i}`);

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('EncoderBatcher', () => {
  it('closes a batch as soon as it is full, without waiting for the timer', async () => {
    const { run, batches } = recordingRunner();
    const b = new EncoderBatcher(run, { maxBatchSize: 4, batchDurationMs: 1000 });
    const p = [b.submit(tag(0, 2)), b.submit(tag(1, 2)), b.submit(tag(2, 1))];
    await vi.advanceTimersByTimeAsync(0);
    expect(batches).toEqual([[...tag(0, 2), ...tag(1, 2)]]);
    expect(await p[0]).toEqual(want(0, 2));
    expect(await p[1]).toEqual(want(1, 2));
    // The leftover input waits for its deadline.
    await vi.advanceTimersByTimeAsync(999);
    expect(batches.length).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(batches[1]).toEqual(tag(2, 1));
    expect(await p[2]).toEqual(want(2, 1));
  });

  it('runs a partial batch after batchDurationMs, counted from its oldest input', async () => {
    const { run, batches } = recordingRunner();
    const b = new EncoderBatcher(run, { maxBatchSize: 32, batchDurationMs: 5 });
    const a = b.submit(tag(0, 1));
    await vi.advanceTimersByTimeAsync(3);
    const c = b.submit(tag(1, 2)); // joins the batch opened by the first input
    await vi.advanceTimersByTimeAsync(1);
    expect(run).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(batches).toEqual([[...tag(0, 1), ...tag(1, 2)]]);
    expect(await a).toEqual(want(0, 1));
    expect(await c).toEqual(want(1, 2));
    expect(b.batches).toBe(1);
  });

  it('same-tick submits share a batch even with batchDurationMs 0', async () => {
    const { run, batches } = recordingRunner();
    const b = new EncoderBatcher(run, { batchDurationMs: 0 });
    const p = Promise.all([b.submit(tag(0, 1)), b.submit(tag(1, 3))]);
    await vi.advanceTimersByTimeAsync(0);
    expect(await p).toEqual([want(0, 1), want(1, 3)]);
    expect(batches.length).toBe(1);
  });

  it('splits a large request across batches and reassembles it in order', async () => {
    const { run, batches } = recordingRunner();
    const b = new EncoderBatcher(run, { maxBatchSize: 3, batchDurationMs: 5 });
    const p = b.submit(tag(0, 7));
    await vi.advanceTimersByTimeAsync(5);
    expect(await p).toEqual(want(0, 7));
    expect(batches.map((x) => x.length)).toEqual([3, 3, 1]);
  });

  it('runs one batch at a time; the next one fills meanwhile and leaves when the first ends', async () => {
    let release!: () => void;
    const batches: Tagged[][] = [];
    const run = async (inputs: Tagged[]): Promise<string[]> => {
      batches.push(inputs);
      if (batches.length === 1) await new Promise<void>((r) => (release = r));
      return inputs.map((x) => `${x.req}:${x.i}`);
    };
    const b = new EncoderBatcher(run, { maxBatchSize: 4, batchDurationMs: 5 });
    const first = b.submit(tag(0, 1));
    await vi.advanceTimersByTimeAsync(5);
    expect(batches.length).toBe(1);
    const later = [b.submit(tag(1, 3)), b.submit(tag(2, 3))]; // 6 inputs queued while busy
    await vi.advanceTimersByTimeAsync(50);
    expect(batches.length).toBe(1); // still busy: nothing else runs
    release();
    await vi.advanceTimersByTimeAsync(0);
    expect(batches[1]).toEqual([...tag(1, 3), tag(2, 3)[0]]); // full batch, FIFO
    await vi.advanceTimersByTimeAsync(0); // the rest is overdue: runs right after
    expect(batches[2]).toEqual(tag(2, 3).slice(1));
    expect(await first).toEqual(want(0, 1));
    expect(await Promise.all(later)).toEqual([want(1, 3), want(2, 3)]);
  });

  it('a failing batch rejects only the request with the bad input (others are re-run alone)', async () => {
    const { run, batches } = recordingRunner({ fail: (x) => x.req === 1 });
    const b = new EncoderBatcher(run, { maxBatchSize: 8, batchDurationMs: 5 });
    const [ok0, bad, ok2] = [b.submit(tag(0, 2)), b.submit(tag(1, 1)), b.submit(tag(2, 2))];
    const badResult = bad.catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(5);
    expect(await ok0).toEqual(want(0, 2));
    expect(await ok2).toEqual(want(2, 2));
    expect(((await badResult) as Error).message).toBe('bad input');
    expect(batches.map((x) => x.map((t) => t.req))).toEqual([[0, 0, 1, 2, 2], [0, 0], [1], [2, 2]]);
  });

  it('without isolation a failure rejects the requests of that batch only', async () => {
    const { run } = recordingRunner({ fail: (x) => x.req === 1 });
    const b = new EncoderBatcher(run, { maxBatchSize: 3, batchDurationMs: 5, isolateFailures: false });
    const settled = Promise.allSettled([b.submit(tag(0, 2)), b.submit(tag(1, 1)), b.submit(tag(2, 2))]);
    await vi.advanceTimersByTimeAsync(5);
    const r = await settled;
    expect(r.map((x) => x.status)).toEqual(['rejected', 'rejected', 'fulfilled']);
    expect((r[2] as PromiseFulfilledResult<string[]>).value).toEqual(want(2, 2));
  });

  it('rejects a runner that returns the wrong number of outputs', async () => {
    const b = new EncoderBatcher(async (xs: number[]) => xs.slice(1), { batchDurationMs: 1 });
    const p = b.submit([1, 2]).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(1);
    expect(String(await p)).toMatch(/returned 1 outputs for 2 inputs/);
  });

  it('cancellation drops queued inputs of that request only', async () => {
    const { run, batches } = recordingRunner();
    const b = new EncoderBatcher(run, { batchDurationMs: 5 });
    const ac = new AbortController();
    const cancelled = b.submit(tag(0, 2), { signal: ac.signal }).catch((e: unknown) => e);
    const kept = b.submit(tag(1, 1));
    ac.abort();
    expect(await cancelled).toBeInstanceOf(CancelledError);
    await vi.advanceTimersByTimeAsync(5);
    expect(await kept).toEqual(want(1, 1));
    expect(batches).toEqual([tag(1, 1)]);
    await expect(b.submit(tag(2, 1), { signal: AbortSignal.abort() })).rejects.toBeInstanceOf(CancelledError);
  });

  it('close() rejects queued requests and new submissions; empty requests resolve at once', async () => {
    const { run } = recordingRunner();
    const b = new EncoderBatcher(run, { batchDurationMs: 5 });
    expect(await b.submit([])).toEqual([]);
    const queued = b.submit(tag(0, 1)).catch((e: unknown) => e);
    b.close();
    expect(await queued).toMatchObject({ code: 'encoder_closed' });
    await expect(b.submit(tag(1, 1))).rejects.toMatchObject({ code: 'encoder_closed' });
    expect(run).not.toHaveBeenCalled();
  });

  it('never leaks outputs between requests under a random concurrent load', async () => {
    const r = rng(42);
    const sizes: number[] = [];
    const run = async (inputs: Tagged[]): Promise<string[]> => {
      sizes.push(inputs.length);
      await new Promise((res) => setTimeout(res, Math.floor(r() * 4)));
      return inputs.map((x) => `${x.req}:${x.i}`);
    };
    const b = new EncoderBatcher(run, { maxBatchSize: 8, batchDurationMs: 3 });
    const pending: Promise<[number, number, string[]]>[] = [];
    for (let req = 0; req < 60; req++) {
      const n = 1 + Math.floor(r() * 12);
      pending.push(b.submit(tag(req, n)).then((out) => [req, n, out]));
      if (r() < 0.4) await vi.advanceTimersByTimeAsync(Math.floor(r() * 3));
    }
    await vi.advanceTimersByTimeAsync(1000);
    for (const [req, n, out] of await Promise.all(pending)) expect(out).toEqual(want(req, n));
    expect(Math.max(...sizes)).toBe(8);
    expect(sizes.reduce((a, c) => a + c, 0)).toBe((await Promise.all(pending)).reduce((a, [, n]) => a + n, 0));
  });
});
