/**
 * Stopping a Node worker reader is graceful: the worker gets SHUTDOWN, releases its GPU device on
 * its own thread and exits, well before the SHUTDOWN_GRACE_MS fallback to terminate() (a thread
 * killed with a live OpenGL ES device leaves its teardown to process exit, which has crashed
 * processes). Checked on both backends with the bundled model, after a generation has run.
 */
import { describe, expect, it } from 'vitest';
import type { Msg } from '../../core/engine/protocol.ts';
import { prepareGpuEnv } from '../../core/gpu/device.ts';
import { SHUTDOWN_GRACE_MS } from '../../server/readers/shutdown.ts';
import { nodeTransport } from '../../server/readers/transport.ts';
import { TEST_BACKENDS } from '../helpers/gpu.ts';

describe.each(TEST_BACKENDS)('worker reader shutdown on %s', (backend) => {
  it('releases the device and exits on SHUTDOWN, before the terminate fallback', async () => {
    prepareGpuEnv(); // workers get a copy of process.env: the GPU variables must be set first (as the server does)
    const h = nodeTransport({ readerId: `shutdown-${backend}`, spec: { model: 'models/stories260K', consumerGroup: 'primary', backend } });
    const exits: number[] = [];
    h.onExit(() => exits.push(Date.now()));
    const ready = await new Promise<Msg>((resolve, reject) => {
      h.onMessage((m) => (m.kind === 'ready' || m.kind === 'failed' ? resolve(m) : undefined));
      h.onError(reject);
    });
    expect(ready.kind, JSON.stringify(ready.content)).toBe('ready');
    // One generation, so the device has live pipelines, buffers and textures.
    const done = new Promise<void>((resolve) => h.onMessage((m) => (m.kind === 'end' ? resolve() : undefined)));
    h.post({ kind: 'generate', uuid: 'g1', content: { prompt: 'Once upon a time', maxNewTokens: 4 } });
    await done;
    const t0 = Date.now();
    await h.terminate();
    const took = Date.now() - t0;
    expect(took).toBeLessThan(SHUTDOWN_GRACE_MS - 1000);
    expect(exits.length).toBe(1);
    // A second stop of an exited worker returns at once.
    const t1 = Date.now();
    await h.terminate();
    expect(Date.now() - t1).toBeLessThan(500);
  }, 120_000);
});
