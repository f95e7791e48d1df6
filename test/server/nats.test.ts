/**
 * Readers and front ends on a real NATS broker, as separate processes: three
 * `weft reader --nats` processes join group `chat`, two `weft serve` front
 * ends find them with no list of addresses. Streams spread over every reader
 * with the same greedy tokens as a local reader; a reader SIGKILLed mid-stream
 * ends its streams at once with `reader_disconnected` and the others finish;
 * a front end SIGKILLed under load leaves the other serving and the readers
 * cancel its streams; a broker restart under load ends or finishes every
 * request (none hangs) and both sides reconnect by themselves.
 *
 * Small counts (2 shared CPU cores, GPU emulated): 64 concurrent streams of
 * 12 tokens; 36 long streams under a front end's kill, 24 under a broker restart.
 */
import { Svcm } from '@nats-io/services';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { STREAM_IDLE_MS } from '../../server/readers/nats_subjects.ts';
import { kill, readerGroups, sleep, startFrontEnd, startNats, startReader, stream, type FrontEnd, type NatsServer, type ReaderProc } from './nats_helpers.ts';
import { until } from './remote_helpers.ts';

let nats: NatsServer;
let readers: ReaderProc[] = [];
let a: FrontEnd;
let b: FrontEnd;
let nc: NatsConnection;

beforeAll(async () => {
  nats = await startNats();
  // Front end A also has a local reader (group `primary`, a worker thread): the reference outputs.
  [readers, a, b] = await Promise.all([
    Promise.all([0, 1, 2].map((i) => startReader(nats.url, 'chat', ['--reader-id', `chat-${i}`]))),
    startFrontEnd({ url: nats.url }, `model: ${JSON.stringify(DEFAULT_MODEL_DIR)}\nbackend: opengles`),
    startFrontEnd({ url: nats.url }),
  ]);
  nc = await connect({ servers: nats.url });
  for (const fe of [a, b]) await until('three chat readers ready', async () => (await readerGroups(fe)).chat?.filter((r) => r.ready).length === 3, 60_000);
  await until('local reader ready', async () => (await readerGroups(a)).primary?.[0]?.ready, 60_000);
}, 170_000);

afterAll(async () => {
  await nc?.close().catch(() => undefined);
  for (const p of [...readers, a, b]) if (p) await kill(p.child);
  await nats?.stop();
}, 30_000);

/** Streams accepted by each reader so far (`$SRV.STATS`, the gen endpoint's request count). */
async function gensPerReader(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for await (const s of await new Svcm(nc as never).client({ strategy: 'timer', maxWait: 500 } as never).stats('weft-reader')) {
    out[s.metadata!.reader_id!] = s.endpoints?.find((e) => e.name === 'gen')?.num_requests ?? 0;
  }
  return out;
}

const PROMPTS = ['Once upon a time', 'The little dog', 'Lily and Tom went', 'One day a bird'];

describe('readers and front ends on NATS', () => {
  it('lists the remote readers on both front ends, with nothing configured but the broker', async () => {
    for (const fe of [a, b]) {
      const chat = (await readerGroups(fe)).chat!;
      expect(chat.map((r) => r.reader_id).sort()).toEqual(['chat-0', 'chat-1', 'chat-2']);
      expect(chat.every((r) => r.remote === `nats:${r.reader_id}`)).toBe(true);
      // The queue-depth metric an orchestrator scales reader processes on, for each remote reader.
      const metrics = await (await fetch(`${fe.inference}/metrics`)).text();
      for (const id of ['chat-0', 'chat-1', 'chat-2']) expect(metrics).toMatch(new RegExp(`weft_queue_depth\\{[^}]*reader_id="${id}"[^}]*\\} 0`));
    }
  });

  it('serves 64 concurrent streams through two front ends over all three readers, greedy tokens equal to a local reader', async () => {
    const want = await Promise.all(PROMPTS.map(async (text) => (await stream(a.inference, { text, max_new_tokens: 12, consumer_group: 'primary' })).ids));
    const before = await gensPerReader();
    const results = await Promise.all(
      Array.from({ length: 64 }, (_, i) => stream((i % 2 ? b : a).inference, { text: PROMPTS[i % PROMPTS.length], max_new_tokens: 12, consumer_group: 'chat' }).then((r) => ({ i, r }))),
    );
    for (const { i, r } of results) {
      expect(r.status).toBe(200);
      expect(r.error).toBeNull();
      expect(r.ids).toEqual(want[i % PROMPTS.length]);
    }
    const after = await gensPerReader();
    const served = Object.keys(after).map((id) => after[id]! - (before[id] ?? 0));
    expect(served.reduce((x, y) => x + y, 0)).toBe(64);
    expect(served.every((n) => n >= 8)).toBe(true); // least-loaded picking spreads them
    // The calls a reader answers travel too: tokenize through a remote reader.
    const tok = async (fe: FrontEnd, id: string): Promise<unknown> => (await (await fetch(`${fe.inference}/tokenize/${id}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: 'Once upon a time' }) })).json());
    expect(await tok(b, 'chat-1')).toEqual(await tok(a, 'primary-0'));
  }, 120_000);

  it('a reader SIGKILLed mid-stream: its streams end at once with reader_disconnected, the rest finish', async () => {
    let tokens = 0;
    let killedAt = 0;
    const victim = readers[0]!;
    const pending = Array.from({ length: 24 }, (_, i) =>
      stream((i % 2 ? b : a).inference, { text: PROMPTS[i % PROMPTS.length], max_new_tokens: 300, min_new_tokens: 300, consumer_group: 'chat' }, () => {
        if (++tokens === 200) {
          killedAt = Date.now();
          victim.child.kill('SIGKILL');
        }
      }).then((r) => ({ r, at: Date.now() })),
    );
    const results = await Promise.all(pending);
    expect(killedAt).toBeGreaterThan(0);
    const failed = results.filter(({ r }) => r.error !== null);
    console.log(`reader kill: ${failed.length} of ${results.length} streams failed (${[...new Set(failed.map(({ r }) => r.error))].join(', ')}), the last ${Math.max(...failed.map(({ at }) => at - killedAt))} ms after the kill`);
    expect(failed.length).toBeGreaterThan(0);
    for (const { r, at } of failed) {
      expect(r.error).toBe('reader_disconnected');
      // "At once": the next liveness poll finds no responders; no stream idle timeout is involved.
      // The bound leaves a loaded machine room for delayed polls yet stays far below that timeout.
      expect(at - killedAt).toBeLessThan(STREAM_IDLE_MS / 3);
    }
    for (const { r } of results.filter(({ r }) => r.error === null)) expect(r.ids).toHaveLength(300);
    // Gone from both front ends' lists; the group keeps serving on the other two.
    for (const fe of [a, b]) await until('dead reader removed', async () => !(await readerGroups(fe)).chat!.some((r) => r.reader_id === 'chat-0'), 20_000);
    expect((await stream(b.inference, { text: 'Once upon a time', max_new_tokens: 4, consumer_group: 'chat' })).ids).toHaveLength(4);
  }, 120_000);

  it('a reader that comes back is listed and served again', async () => {
    readers[0] = await startReader(nats.url, 'chat', ['--reader-id', 'chat-0']);
    for (const fe of [a, b]) await until('chat-0 back', async () => (await readerGroups(fe)).chat!.some((r) => r.reader_id === 'chat-0' && r.ready), 30_000);
  }, 150_000);

  it('a front end SIGKILLed under load: the other keeps serving, the readers cancel its streams', async () => {
    try {
      // A is killed as soon as 24 of its streams have their first tokens (a fixed delay let fast
      // hosts finish every token first). 72 streams of 480 tokens on A (24 per reader: a full batch
      // of 16 and 8 waiting) hold each reader for several seconds of decoding after the kill even
      // on a fast idle host, well past the readers' 1 s heartbeat that notices A is gone.
      let started = 0;
      let enoughStarted: () => void = () => undefined;
      const aStarted = new Promise<void>((r) => (enoughStarted = r));
      const onA = Array.from({ length: 72 }, () => {
        let first = true;
        return stream(a.inference, { text: 'Once upon a time', max_new_tokens: 480, min_new_tokens: 480, consumer_group: 'chat' }, () => {
          if (first && ++started === 24) enoughStarted();
          first = false;
        }).catch(() => null);
      });
      const onB = Array.from({ length: 12 }, (_, i) => stream(b.inference, { text: PROMPTS[i % PROMPTS.length], max_new_tokens: 60, consumer_group: 'chat' }));
      await Promise.race([aStarted, sleep(30_000)]);
      await kill(a.child, 'SIGKILL');
      for (const r of await Promise.all(onB)) expect(r, JSON.stringify(r)).toMatchObject({ status: 200, error: null, done: true });
      await Promise.all(onA); // connections reset: they end, none hangs
      // Every reader's in-flight count returns to zero: A's streams were cancelled (no responder to their heartbeats).
      let loads: number[] = [];
      await until(
        'readers idle',
        async () => {
          loads = [];
          for await (const s of await new Svcm(nc as never).client({ strategy: 'timer', maxWait: 500 } as never).stats('weft-reader')) {
            loads.push((s.endpoints?.[0]?.data as { in_flight: number } | undefined)?.in_flight ?? -1);
          }
          return loads.length === 3 && loads.every((n) => n === 0);
        },
        30_000,
        250,
      ).catch((e: unknown) => {
        throw new Error(`${(e as Error).message}; last in-flight counts ${JSON.stringify(loads)}`);
      });
      // ... and not (only) by running to their end: the readers say they cancelled streams of a gone front end.
      const cancelled = readers.map((r) => r.err().split('front end gone: stream cancelled').length - 1);
      expect(cancelled.some((n) => n > 0), `streams cancelled per reader ${JSON.stringify(cancelled)}; a reader's log ends: ${readers[0]!.err().slice(-600)}`).toBe(true);
    } finally {
      // The next test needs two front ends whatever happened here.
      if (a.child.exitCode === null && a.child.signalCode === null) await kill(a.child);
      a = await startFrontEnd({ url: nats.url });
      await until('new front end sees three readers', async () => (await readerGroups(a)).chat?.filter((r) => r.ready).length === 3, 30_000);
    }
  }, 150_000);

  it('a broker restart under load: every request ends (done or reader_disconnected), then both sides reconnect by themselves', async () => {
    let tokens = 0;
    let restarted: Promise<void> | null = null;
    const t0 = Date.now();
    const pending = Array.from({ length: 24 }, (_, i) =>
      stream((i % 2 ? b : a).inference, { text: PROMPTS[i % PROMPTS.length], max_new_tokens: 300, min_new_tokens: 300, consumer_group: 'chat' }, () => {
        if (++tokens === 200) restarted = nats.restart(1_000);
      }),
    );
    const results = await Promise.all(pending);
    expect(Date.now() - t0).toBeLessThan(60_000);
    await restarted;
    for (const r of results) {
      if (r.error !== null) expect(['reader_disconnected', 'group_not_ready']).toContain(r.error);
      else expect(r.ids).toHaveLength(300);
    }
    expect(results.some((r) => r.error === 'reader_disconnected')).toBe(true);
    for (const fe of [a, b]) {
      await until('readers re-attached after the restart', async () => (await readerGroups(fe)).chat?.filter((r) => r.ready).length === 3, 40_000);
      const r = await stream(fe.inference, { text: 'Once upon a time', max_new_tokens: 4, consumer_group: 'chat' });
      expect(r.ids).toHaveLength(4);
    }
  }, 150_000);
});
