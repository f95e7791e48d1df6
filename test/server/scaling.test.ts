/**
 * Scaling by usage over real HTTP with the bundled stories260K: a group with
 * min_replicas 0 scales to zero when idle (and /healthz stays 200), a request
 * wakes it (cold start) and completes, a cold start longer than the timeout
 * answers 503 `reader_starting`, queued load adds a replica up to
 * max_replicas and idleness removes them, and requests keep arriving while
 * the group shrinks without one failing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GroupSummary } from '../../server/readers/manager.ts';
import { decide, mergePolicy, SCALING_DEFAULTS } from '../../server/readers/scaling.ts';
import { startTestService, type TestService } from './helpers.ts';
import { json, listenApps, sleep, until, type Http } from './remote_helpers.ts';

let t: TestService;
let http: Http;

beforeAll(async () => {
  t = await startTestService({
    readers: [{ consumer_group: 'auto', reader_id: 'auto-0', backend: process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles', min_replicas: 0, max_replicas: 2, scale_down_after_seconds: 1, scale_up_queue_depth: 1, max_batch_size: 1 }],
  });
  http = await listenApps(t.apps);
}, 180_000);

afterAll(async () => {
  await http?.close();
  await t?.svc.close();
});

const group = async (name = 'auto'): Promise<GroupSummary> => (await (await fetch(`${http.management}/reader_groups/${name}`)).json()) as GroupSummary;
const patch = async (body: Record<string, unknown>): Promise<Response> => fetch(`${http.management}/reader_groups/auto`, json(body, 'PATCH'));
const generate = (max = 3): Promise<Response> => fetch(`${http.inference}/generate`, json({ text: 'Once upon a time', max_new_tokens: max, consumer_group: 'auto' }));

describe('the scaling rule', () => {
  const policy = mergePolicy(undefined, { minReplicas: 0, maxReplicas: 3, scaleDownAfterSeconds: 10, scaleUpQueueDepth: 2 });
  const rep = (id: string, over: Partial<{ state: string; inFlight: number; idleMs: number; remote: boolean }> = {}) => ({ id, state: 'ready', inFlight: 0, idleMs: 0, remote: false, ...over });
  it('adds one replica when waiting >= depth x ready, never beyond max or while one loads', () => {
    expect(decide({ policy, replicas: [rep('a', { inFlight: 1 })], queued: 1, coldWaiters: 0, canStart: true })).toEqual({ start: 0, stop: [] });
    expect(decide({ policy, replicas: [rep('a', { inFlight: 1 })], queued: 2, coldWaiters: 0, canStart: true })).toEqual({ start: 1, stop: [] });
    expect(decide({ policy, replicas: [rep('a'), rep('b', { state: 'loading' })], queued: 9, coldWaiters: 0, canStart: true }).start).toBe(0);
    expect(decide({ policy, replicas: [rep('a'), rep('b'), rep('c')], queued: 9, coldWaiters: 0, canStart: true }).start).toBe(0);
    expect(decide({ policy, replicas: [], queued: 0, coldWaiters: 1, canStart: true }).start).toBe(1); // a cold-start waiter
    expect(decide({ policy, replicas: [rep('a', { state: 'failed' })], queued: 5, coldWaiters: 0, canStart: true }).start).toBe(0);
    expect(decide({ policy: mergePolicy(policy, { minReplicas: 2 }), replicas: [rep('a')], queued: 0, coldWaiters: 0, canStart: true }).start).toBe(1);
  });
  it('counts cold-start waiters as demand only while no replica is ready, and never scales down under them', () => {
    const one = mergePolicy(undefined, { minReplicas: 0, maxReplicas: 2, scaleUpQueueDepth: 1, scaleDownAfterSeconds: 0.3 });
    expect(decide({ policy: one, replicas: [], queued: 0, coldWaiters: 1, canStart: true }).start).toBe(1);
    // The request that woke the group, right after its replica became ready and before it
    // routed there: no second replica ...
    expect(decide({ policy: one, replicas: [rep('a', { idleMs: 900 })], queued: 0, coldWaiters: 1, canStart: true })).toEqual({ start: 0, stop: [] });
    // ... and the replica, idle since it started loading, is not drained from under it.
    expect(decide({ policy: one, replicas: [rep('a', { idleMs: 900 })], queued: 0, coldWaiters: 0, canStart: true }).stop).toEqual(['a']);
    // Queued requests in a ready replica still add one.
    expect(decide({ policy: one, replicas: [rep('a', { inFlight: 1 })], queued: 1, coldWaiters: 3, canStart: true }).start).toBe(1);
  });
  it('stops the longest-idle replica with nothing in flight, down to min, never a remote one', () => {
    expect(decide({ policy, replicas: [rep('a', { idleMs: 11_000 }), rep('b', { idleMs: 20_000 })], queued: 0, coldWaiters: 0, canStart: true }).stop).toEqual(['b']);
    expect(decide({ policy, replicas: [rep('a', { idleMs: 11_000, inFlight: 1 })], queued: 0, coldWaiters: 0, canStart: true }).stop).toEqual([]);
    expect(decide({ policy, replicas: [rep('a', { idleMs: 9_000 })], queued: 0, coldWaiters: 0, canStart: true }).stop).toEqual([]);
    expect(decide({ policy, replicas: [rep('a', { idleMs: 99_000, remote: true })], queued: 0, coldWaiters: 0, canStart: true }).stop).toEqual([]);
    expect(decide({ policy, replicas: [rep('a', { idleMs: 99_000 })], queued: 1, coldWaiters: 0, canStart: true }).stop).toEqual([]);
    expect(decide({ policy: mergePolicy(policy, { minReplicas: 1 }), replicas: [rep('a', { idleMs: 99_000 })], queued: 0, coldWaiters: 0, canStart: true }).stop).toEqual([]);
  });
  it('validates the policy', () => {
    expect(() => mergePolicy(undefined, { minReplicas: 3, maxReplicas: 2 })).toThrow(/min_replicas/);
    expect(mergePolicy(undefined, { minReplicas: 3 }).maxReplicas).toBe(3);
    expect(mergePolicy(undefined, {})).toEqual(SCALING_DEFAULTS);
  });
});

describe('scaling over HTTP', () => {
  it('rejects bad scaling fields with 400', async () => {
    const put = await fetch(`${http.management}/models`, json({ consumer_group: 'x', min_replicas: -1 }, 'PUT'));
    expect(put.status).toBe(400);
    expect(((await put.json()) as { error: { code: string; details: { field: string } } }).error).toMatchObject({ code: 'invalid_reader_config', details: { field: 'min_replicas' } });
    const p = await patch({ min_replicas: 5, max_replicas: 2 });
    expect(p.status).toBe(400);
    expect((await fetch(`${http.management}/reader_groups/nope`, json({ max_replicas: 2 }, 'PATCH'))).status).toBe(404);
  });

  it('scales an idle group to zero; /healthz stays 200; a request wakes it and completes', async () => {
    const g0 = await group();
    expect(g0.scaling).toMatchObject({ min_replicas: 0, max_replicas: 2, scale_down_after_seconds: 1, scale_up_queue_depth: 1 });
    const zero = await until('scale to zero', async () => ((await group()).state === 'scaled_to_zero' ? await group() : null), 20_000);
    expect(zero.replicas).toEqual([]);
    expect(zero.scale_downs).toBeGreaterThanOrEqual(1);
    const groups = (await (await fetch(`${http.management}/reader_groups`)).json()) as Record<string, unknown[]>;
    expect(groups.auto).toEqual([]); // listed, with no replica
    const health = await fetch(`${http.inference}/healthz`);
    expect(health.status).toBe(200); // at zero by design counts as healthy
    const metrics = await (await fetch(`${http.inference}/metrics`)).text();
    expect(metrics).toContain('weft_group_replicas{consumer_group="auto",state="ready"} 0');

    const started = Date.now();
    const res = await generate();
    const coldMs = Date.now() - started;
    expect(res.status).toBe(200);
    expect(((await res.json()) as { text: string }).text).toBe(', there was');
    const woke = await group();
    expect(woke.state).toBe('ready');
    expect(woke.cold_starts).toBe(zero.cold_starts + 1);
    expect(woke.replicas).toHaveLength(1);
    expect(woke.replicas[0]!.autoscaled).toBe(true);
    expect(await (await fetch(`${http.inference}/metrics`)).text()).toContain(`weft_cold_starts_total{consumer_group="auto"} ${woke.cold_starts}`);
    console.log(`cold start: ${coldMs} ms to the first response`);
  });

  it('answers 503 reader_starting with Retry-After when a cold start outlasts the timeout, then serves', async () => {
    await until('scale to zero', async () => (await group()).state === 'scaled_to_zero', 20_000);
    // An idle time shorter than the load (about 0.9 s here): the replica must still be there when
    // the client comes back, its idle clock started when it became ready, not when it began loading.
    expect((await patch({ cold_start_timeout_seconds: 0.05, scale_down_after_seconds: 0.6 })).status).toBe(200);
    try {
      const res = await generate(1);
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('2');
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('reader_starting');
      // The replica it started keeps loading; once ready, the retry is served.
      await until('the cold-started replica', async () => (await group()).state === 'ready', 60_000, 20);
      await sleep(300); // more than one scaler tick (250 ms), less than the idle time
      expect((await generate(1)).status).toBe(200);
    } finally {
      // Restored even when an expectation fails, so the tests after this one see the group's own policy.
      expect((await patch({ cold_start_timeout_seconds: 60, scale_down_after_seconds: 1 })).status).toBe(200);
    }
  });

  it('adds a replica under queued load (up to max_replicas) and removes it when idle', async () => {
    await patch({ min_replicas: 1 });
    await until('one ready replica', async () => (await group()).ready_replicas >= 1, 60_000);
    let peak = 0;
    let done = false;
    // max_batch_size 1: every request beyond the first waits in the reader's queue.
    // 6 x 150 tokens at batch 1 outlast several scaler ticks (250 ms) even on a fast host.
    const load = Promise.all(Array.from({ length: 6 }, () => generate(150).then(async (r) => ({ status: r.status, body: (await r.json()) as { text: string } }))));
    void load.finally(() => (done = true));
    while (!done) {
      peak = Math.max(peak, (await group()).replicas.filter((r) => !r.draining).length);
      await sleep(50);
    }
    const results = await load;
    for (const r of results) expect(r.status).toBe(200);
    for (const r of results) expect(r.body.text).toBe(results[0]!.body.text);
    expect(peak).toBe(2);
    const g = await group();
    expect(g.scale_ups).toBeGreaterThanOrEqual(1);
    await until('back to min_replicas', async () => (await group()).replicas.length === 1, 20_000);
  });

  it('loses no request while the group shrinks under a stream of requests', async () => {
    await patch({ min_replicas: 0, scale_down_after_seconds: 0.3 });
    const before = await group();
    const statuses: number[] = [];
    const end = Date.now() + 12_000;
    // Two clients with pauses longer and shorter than the idle time: replicas drain, stop, cold-start and scale up while requests arrive.
    const client = async (pauses: number[]): Promise<void> => {
      for (let i = 0; Date.now() < end; i++) {
        const burst = await Promise.all(Array.from({ length: 1 + (i % 3) }, () => generate(8).then((r) => r.status)));
        statuses.push(...burst);
        await sleep(pauses[i % pauses.length]!);
      }
    };
    await Promise.all([client([50, 450, 700, 20]), client([350, 30, 900])]);
    const after = await group();
    expect(statuses.length).toBeGreaterThan(10);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(after.scale_downs).toBeGreaterThan(before.scale_downs);
    console.log(`shrink test: ${statuses.length} requests, scale downs ${after.scale_downs - before.scale_downs}, ups ${after.scale_ups - before.scale_ups}, cold starts ${after.cold_starts - before.cold_starts}`);
  }, 120_000);

  it('deletes a group with its policy', async () => {
    const del = await fetch(`${http.management}/reader_groups/auto`, { method: 'DELETE' });
    expect(del.status).toBe(200);
    const groups = (await (await fetch(`${http.management}/reader_groups`)).json()) as Record<string, unknown>;
    expect(Object.keys(groups)).not.toContain('auto');
    const res = await generate(1);
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('consumer_group_not_found');
  });
});
