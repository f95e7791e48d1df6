/**
 * The front end's side of a reader attached over NATS: a WorkerTransport
 * whose "worker" is a reader process found on the broker (nats_directory.ts
 * starts one ManagedReader per reader it discovers, with `remote:
 * nats:<reader_id>`). ManagedReader sees the same handle as for a worker
 * thread: protocol messages in, one exit when the reader is gone.
 *
 * Attach: `hello` request (ATTACH_TIMEOUT_MS) -> `ready` with the reader's
 * info. Then `$SRV.STATS` of its service every LIVENESS_MS: the answer is the
 * reader's load (reported to `onLoad`, for least-loaded picking across front
 * ends); "no responders" (its process is gone: the broker dropped its
 * subscriptions) or LIVENESS_MISSES polls unanswered end the handle with 503
 * `reader_disconnected`, which fails every request in flight on it at once.
 * Losing the broker connection does the same for every reader (their tokens
 * cannot arrive any more); ManagedReader then re-attaches with backoff once
 * the client has reconnected.
 *
 * Streams: the front end subscribes `<inbox>.*` before sending `gen`; events
 * must arrive with consecutive sequence numbers (a gap fails the stream), and
 * a stream with nothing heard for STREAM_IDLE_MS fails (the reader sends a
 * heartbeat every HEARTBEAT_MS), so no wait is unbounded.
 */
import { createInbox, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import type { ErrorJSON } from '../../core/errors.ts';
import type { Msg } from '../../core/engine/protocol.ts';
import { ATTACH_TIMEOUT_MS, CALL_TIMEOUT_MS, LIVENESS_MISSES, LIVENESS_MS, LIVENESS_TIMEOUT_MS, readerSubject, SERVICE_NAME, STREAM_IDLE_MS, type ReaderLoad } from './nats_subjects.ts';
import type { WorkerHandle, WorkerTransport } from './transport.ts';
import { decodeMessage, encodeMessage } from './wire_codec.ts';

export const disconnected = (readerId: string, why: string): ErrorJSON => ({
  name: 'UnavailableError',
  code: 'reader_disconnected',
  message: `reader ${readerId} disconnected: ${why}`,
});

const isNoResponders = (e: unknown): boolean => e instanceof Error && /no responders/i.test(`${e.message} ${String((e as { cause?: unknown }).cause ?? '')}`);

/** The reader id of a `nats:<reader_id>` remote. */
export const natsReaderId = (remote: string): string => remote.slice('nats:'.length);

export interface NatsTransportHooks {
  /** The reader's reported load (all front ends), after each stats poll. */
  onLoad?(readerId: string, load: ReaderLoad, localInFlight: number): void;
}

let streamSeq = 0;

export function natsTransport(nc: NatsConnection, hooks: NatsTransportHooks = {}): WorkerTransport {
  /** Exits of live handles, run when the broker connection drops. */
  const live = new Set<(why: string) => void>();
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') for (const drop of [...live]) drop('lost the connection to NATS');
    }
  })();

  return ({ spec }) => {
    const readerId = natsReaderId(spec.remote!);
    const msgCbs: ((m: Msg) => void)[] = [];
    const exitCbs: ((reason?: ErrorJSON) => void)[] = [];
    const streams = new Map<string, { sub: Subscription; idle: ReturnType<typeof setTimeout> | null }>();
    let exited = false;
    let poll: ReturnType<typeof setTimeout> | null = null;
    let missed = 0;
    const prefix = `${nc.info?.client_id ?? 0}-${Date.now().toString(36)}-${++streamSeq}`;
    const wire = (uuid: string): string => `${prefix}-${uuid}`;
    const emit = (m: Msg): void => {
      if (!exited) for (const cb of msgCbs) cb(m);
    };

    const endStream = (uuid: string): void => {
      const s = streams.get(uuid);
      if (!s) return;
      streams.delete(uuid);
      if (s.idle) clearTimeout(s.idle);
      s.sub.unsubscribe();
    };
    const exit = (reason: ErrorJSON | undefined): void => {
      if (exited) return;
      exited = true;
      live.delete(drop);
      if (poll) clearTimeout(poll);
      for (const uuid of [...streams.keys()]) endStream(uuid);
      for (const cb of exitCbs) cb(reason);
    };
    const drop = (why: string): void => exit(disconnected(readerId, why));
    live.add(drop);

    const generate = (m: Msg): void => {
      const inbox = createInbox();
      let expect = 0;
      const touch = (): void => {
        const s = streams.get(m.uuid);
        if (!s) return;
        if (s.idle) clearTimeout(s.idle);
        s.idle = setTimeout(() => fail(`nothing heard for ${STREAM_IDLE_MS} ms`), STREAM_IDLE_MS);
        s.idle.unref();
      };
      const fail = (why: string): void => {
        if (!streams.has(m.uuid)) return;
        endStream(m.uuid);
        nc.publish(readerSubject(readerId, 'cancel'), encodeMessage({ uuid: wire(m.uuid) }));
        emit({ kind: 'error', uuid: m.uuid, content: disconnected(readerId, why) });
      };
      const sub = nc.subscribe(`${inbox}.*`, {
        callback: (err, msg) => {
          if (err) return fail(err.message);
          touch();
          if (msg.subject.endsWith('.hb')) {
            msg.respond();
            return;
          }
          let ev: { seq: number; kind: Msg['kind']; content?: unknown };
          try {
            ev = decodeMessage(msg.data) as typeof ev;
          } catch (e) {
            return fail(`bad message: ${(e as Error).message}`);
          }
          if (ev.seq !== expect) return fail(`stream message ${expect} lost (got ${ev.seq})`);
          expect++;
          if (ev.kind === 'end' || ev.kind === 'error') endStream(m.uuid);
          emit({ kind: ev.kind, uuid: m.uuid, content: ev.content });
        },
      });
      streams.set(m.uuid, { sub, idle: null });
      touch();
      nc.request(readerSubject(readerId, 'gen'), encodeMessage({ uuid: wire(m.uuid), inbox, content: m.content }), { timeout: ATTACH_TIMEOUT_MS }).then(
        (reply) => {
          const r = decodeMessage(reply.data) as { ok: boolean; error?: ErrorJSON };
          if (!r.ok && streams.has(m.uuid)) {
            endStream(m.uuid);
            emit({ kind: 'error', uuid: m.uuid, content: r.error });
          }
        },
        (e: unknown) => fail(isNoResponders(e) ? 'no reader answers (its process is gone)' : `stream not accepted: ${(e as Error).message}`),
      );
    };

    const call = (m: Msg): void => {
      nc.request(readerSubject(readerId, 'call'), encodeMessage({ uuid: wire(m.uuid), content: m.content }), { timeout: CALL_TIMEOUT_MS }).then(
        (reply) => {
          const r = decodeMessage(reply.data) as { kind: 'result' | 'error'; content: unknown };
          emit({ kind: r.kind, uuid: m.uuid, content: r.content });
        },
        (e: unknown) => emit({ kind: 'error', uuid: m.uuid, content: disconnected(readerId, isNoResponders(e) ? 'no reader answers (its process is gone)' : (e as Error).message) }),
      );
    };

    // Attach, then watch liveness and load.
    nc.request(readerSubject(readerId, 'hello'), undefined, { timeout: ATTACH_TIMEOUT_MS }).then(
      (reply) => {
        if (exited) return;
        const { info, service_id: serviceId } = decodeMessage(reply.data) as { info: unknown; service_id: string };
        emit({ kind: 'ready', uuid: '', content: info });
        const next = (): void => {
          if (exited) return;
          poll = setTimeout(pollOnce, LIVENESS_MS);
          poll.unref();
        };
        // One poll at a time: a slow answer is one missed beat, not many.
        const pollOnce = (): void => {
          nc.request(`$SRV.STATS.${SERVICE_NAME}.${serviceId}`, undefined, { timeout: LIVENESS_TIMEOUT_MS }).then(
            (r) => {
              missed = 0;
              const st = r.json<{ endpoints?: { data?: ReaderLoad }[] }>();
              const load = st.endpoints?.find((e) => e.data)?.data;
              if (load) hooks.onLoad?.(readerId, load, streams.size);
              next();
            },
            (e: unknown) => {
              if (isNoResponders(e)) drop('its process is gone (no responders)');
              else if (++missed >= LIVENESS_MISSES) drop(`no answer to ${LIVENESS_MISSES} liveness polls (${LIVENESS_TIMEOUT_MS} ms each)`);
              else next();
            },
          );
        };
        next();
      },
      (e: unknown) => drop(isNoResponders(e) ? 'not on the broker' : `no answer to hello: ${(e as Error).message}`),
    );

    return {
      post: (m) => {
        if (exited) return;
        if (m.kind === 'generate') generate(m);
        else if (m.kind === 'call') call(m);
        else if (m.kind === 'cancel') nc.publish(readerSubject(readerId, 'cancel'), encodeMessage({ uuid: wire(m.uuid) }));
      },
      onMessage: (cb) => msgCbs.push(cb),
      onError: () => {
        // broker errors arrive as the exit reason
      },
      onExit: (cb) => exitCbs.push(cb),
      terminate: async () => exit(undefined),
    } satisfies WorkerHandle;
  };
}
