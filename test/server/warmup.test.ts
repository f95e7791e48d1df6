/**
 * Pipeline warm-up and loading progress. A reader opened as the server opens
 * it (openReader, the bundled stories260K on Mesa's OpenGL ES) has compiled
 * its pipelines before it resolves ("ready"): the pipeline cache's compile
 * counter does not move during the requests that follow — greedy, sampled,
 * a prompt longer than the decode megakernel's waves, and a one-word prompt.
 * With warm-up off the same first request does compile, so the counter can
 * tell. The progress reporter's two forms (TTY bar, throttled JSON lines) are
 * checked on their output.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { LoadProgress } from '../../core/progress.ts';
import type { GpuContext } from '../../core/gpu/context.ts';
import { loadConfig } from '../../server/config.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { progressReporter } from '../../server/progress.ts';
import { openReader } from '../../server/readers/open_reader.ts';
import type { ReaderSpec } from '../../server/readers/spec.ts';

const BACKEND = process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles';
let ctx: GpuContext | undefined;
afterEach(() => {
  ctx?.destroy();
  ctx = undefined;
});

async function open(warmup: ReaderSpec['warmup']) {
  const spec: ReaderSpec = { model: DEFAULT_MODEL_DIR, consumerGroup: 'primary', backend: BACKEND, ...(warmup ? { warmup } : {}) };
  const reader = await openReader({ readerId: `warm-${warmup}`, spec }, BACKEND, { onContext: (c) => (ctx = c) });
  if (!('generate' in reader)) throw new Error('expected a decoder reader');
  return reader;
}

async function drain(it: AsyncIterable<{ type: string }>): Promise<number> {
  let tokens = 0;
  for await (const ev of it) if (ev.type === 'token') tokens++;
  return tokens;
}

describe('pipeline warm-up', () => {
  it('compiles before ready: requests after it compile no pipeline', async () => {
    const reader = await open('on');
    const atReady = ctx!.pipelines.compiled;
    expect(atReady).toBeGreaterThan(0);
    const long = 'Once upon a time there was a little dog. '.repeat(6);
    expect(await drain(reader.generate({ prompt: 'Once upon a time there was a little dog who liked to play', maxNewTokens: 40, sampling: { temperature: 0 } }))).toBeGreaterThan(0);
    await drain(reader.generate({ prompt: 'The cat', maxNewTokens: 12, sampling: { temperature: 0.8, topK: 20, topP: 0.9, seed: 7 } }));
    await drain(reader.generate({ prompt: long, maxNewTokens: 4, sampling: { temperature: 0 } }));
    await drain(reader.generate({ prompt: 'Hi', maxNewTokens: 3, sampling: { temperature: 0 } }));
    expect(ctx!.pipelines.compiled - atReady).toBe(0);
  });

  it('off: the first request compiles its pipelines (the counter sees it)', async () => {
    const reader = await open('off');
    const atReady = ctx!.pipelines.compiled;
    await drain(reader.generate({ prompt: 'Once upon a time there was a little dog who liked to play', maxNewTokens: 8, sampling: { temperature: 0 } }));
    expect(ctx!.pipelines.compiled - atReady).toBeGreaterThan(0);
  });

  it('warmup is auto, on or off in the configuration', () => {
    expect(loadConfig({ env: {} }).warmup).toBe('auto');
    expect(loadConfig({ env: { WEFT_WARMUP: 'off' } }).warmup).toBe('off');
    expect(() => loadConfig({ env: { WEFT_WARMUP: 'sometimes' } })).toThrow(/warmup: expected one of auto, on, off/);
  });
});

describe('progress reporter', () => {
  const collect = (isTTY: boolean) => {
    const out: string[] = [];
    return { out, stream: { isTTY, columns: 200, write: (s: string) => out.push(s) } };
  };
  const p = (phase: LoadProgress['phase'], done: number, total: number | null, ms: number, label?: string): LoadProgress => ({ phase, done, total, ms, ...(label ? { label } : {}) });

  it('JSON lines: first of each phase, at most one per interval, each phase last state, then loaded', () => {
    const { out, stream } = collect(false);
    const report = progressReporter(stream, { timestamps: false, intervalMs: 1000, fields: { reader_id: 'r0' } });
    report(p('weights', 1, 4, 10, 'embedding'));
    report(p('weights', 2, 4, 20)); // within the interval: held
    report(p('weights', 3, 4, 1200)); // past it: written
    report(p('weights', 4, 4, 1300)); // done == total: written
    report(p('pipelines', 0, 10, 1400, 'matmul'));
    report(p('pipelines', 3, 10, 1500)); // held, then written when the phase ends
    report(p('ready', 1, 1, 1600));
    const recs = out.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(recs.map((r) => [r.phase, r.done])).toEqual([['weights', 1], ['weights', 3], ['weights', 4], ['pipelines', 0], ['pipelines', 3], ['ready', 1]]);
    expect(recs[0]).toEqual({ level: 'info', msg: 'loading', reader_id: 'r0', phase: 'weights', done: 1, total: 4, ms: 10, label: 'embedding' });
    expect(recs.at(-1)).toMatchObject({ msg: 'loaded', ms: 1600 });
    expect(out.every((l) => l.endsWith('\n') && !l.includes('\r'))).toBe(true);
  });

  it('TTY: one bar redrawn in place, then a closing line', () => {
    const { out, stream } = collect(true);
    const report = progressReporter(stream);
    report(p('weights', 2, 4, 500));
    report(p('ready', 1, 1, 2500));
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the bar redraws with CR and an ANSI erase
    expect(out[0]).toMatch(/^\r\x1b\[2Kloading {2}weights {3}\[#{12}-{12}\] {3}2\/4 0\.5s$/);
    expect(out[1]).toBe('\r\x1b[2Kloaded in 2.5s\n');
  });
});
