/**
 * A reader attached to NATS (`weft reader --nats URL --group G`): serves one
 * loaded reader (core/engine/protocol.ts serveReader) to every front end on
 * the broker, as the NATS service described in nats_subjects.ts. Nothing
 * lists readers anywhere: front ends find this one through `$SRV.PING` and
 * watch it through `$SRV.STATS`, which carries its load (requests in flight,
 * queue depth).
 *
 * Streams are pushed to the requesting front end's inbox with sequence
 * numbers. Each open stream's inbox is pinged every HEARTBEAT_MS; a front end
 * that no longer answers (no responders: its connection is gone; or three
 * pings unanswered) has its streams cancelled, so their KV blocks return to
 * the pool.
 */
import { Svcm, type Service, type ServiceMsg } from '@nats-io/services';
import type { NatsConnection } from '@nats-io/transport-node';
import { errorToJSON } from '../../core/errors.ts';
import { serveReader, type Endpoint, type Msg } from '../../core/engine/protocol.ts';
import type { AnyReaderApi } from '../../core/engine/reader_api.ts';
import { HEARTBEAT_MS, type ReaderLoad, SERVICE_NAME } from './nats_subjects.ts';
import { decodeMessage, encodeMessage } from './wire_codec.ts';

export interface NatsReader {
  service: Service;
  /** Requests being served (all front ends). */
  inFlight(): number;
  /** Stops answering (the service leaves; streams in flight are cancelled). */
  close(): Promise<void>;
}

interface StreamRoute {
  inbox: string;
  seq: number;
  misses: number;
}

export async function serveReaderOverNats(
  api: AnyReaderApi,
  nc: NatsConnection,
  opts: { group: string; version: string; log?: (msg: string, fields?: Record<string, unknown>) => void },
): Promise<NatsReader> {
  const log = opts.log ?? (() => {});
  const info = api.info();
  const handlers: ((m: Msg) => void)[] = [];
  const streams = new Map<string, StreamRoute>();
  const calls = new Map<string, ServiceMsg>();

  const ep: Endpoint = {
    post: (out: Msg) => {
      const call = calls.get(out.uuid);
      if (call && (out.kind === 'result' || out.kind === 'error')) {
        calls.delete(out.uuid);
        call.respond(encodeMessage({ kind: out.kind, content: out.content }));
        return;
      }
      const s = streams.get(out.uuid);
      if (!s) return; // `ready` (the hello endpoint answers with info), or a stream already torn down
      nc.publish(`${s.inbox}.s`, encodeMessage({ seq: s.seq++, kind: out.kind, content: out.content }));
      if (out.kind === 'end' || out.kind === 'error') streams.delete(out.uuid);
    },
    onMessage: (cb) => handlers.push(cb),
  };
  serveReader(api, ep);
  const deliver = (m: Msg): void => {
    for (const h of handlers) h(m);
  };

  const svcm = new Svcm(nc as never);
  const service = await svcm.add({
    name: SERVICE_NAME,
    version: opts.version,
    description: `weft reader ${info.readerId} (${info.model})`,
    queue: opts.group,
    metadata: { reader_id: info.readerId, consumer_group: opts.group, model: info.model, type: info.type },
    statsHandler: async (): Promise<ReaderLoad> => {
      const st = await api.stats().catch(() => null);
      return { in_flight: streams.size + calls.size, waiting: st?.waiting ?? 0, running: st?.running ?? 0 };
    },
  });
  const group = service.addGroup(`weft.reader.${info.readerId}`, opts.group);
  const serviceId = service.info().id;

  group.addEndpoint('hello', {
    handler: (err, msg) => {
      if (!err) msg.respond(encodeMessage({ info, service_id: serviceId }));
    },
  });
  group.addEndpoint('call', {
    handler: (err, msg) => {
      if (err) return;
      try {
        const m = decodeMessage(msg.data) as { uuid: string; content: unknown };
        calls.set(m.uuid, msg);
        deliver({ kind: 'call', uuid: m.uuid, content: m.content });
      } catch (e) {
        msg.respond(encodeMessage({ kind: 'error', content: errorToJSON(e) }));
      }
    },
  });
  group.addEndpoint('gen', {
    handler: (err, msg) => {
      if (err) return;
      let m: { uuid: string; inbox: string; content: unknown };
      try {
        m = decodeMessage(msg.data) as typeof m;
      } catch (e) {
        msg.respond(encodeMessage({ ok: false, error: errorToJSON(e) }));
        return;
      }
      streams.set(m.uuid, { inbox: m.inbox, seq: 0, misses: 0 });
      msg.respond(encodeMessage({ ok: true }));
      deliver({ kind: 'generate', uuid: m.uuid, content: m.content });
    },
  });
  group.addEndpoint('cancel', {
    handler: (err, msg) => {
      if (err) return;
      try {
        const { uuid } = decodeMessage(msg.data) as { uuid: string };
        deliver({ kind: 'cancel', uuid });
      } catch {
        // a malformed cancel cancels nothing
      }
    },
  });

  // Streams whose front end is gone are cancelled (their front end answers each heartbeat).
  const beat = setInterval(() => {
    for (const [uuid, s] of streams) {
      nc.request(`${s.inbox}.hb`, undefined, { timeout: 5_000 }).then(
        () => (s.misses = 0),
        (e: unknown) => {
          const noResponders = e instanceof Error && /no responders/i.test(`${e.message} ${String((e as { cause?: unknown }).cause ?? '')}`);
          if (noResponders || ++s.misses >= 3) {
            log('front end gone: stream cancelled', { uuid });
            streams.delete(uuid);
            deliver({ kind: 'cancel', uuid });
          }
        },
      );
    }
  }, HEARTBEAT_MS);
  beat.unref();

  return {
    service,
    inFlight: () => streams.size + calls.size,
    close: async () => {
      clearInterval(beat);
      for (const uuid of [...streams.keys()]) deliver({ kind: 'cancel', uuid });
      await service.stop().catch(() => null);
    },
  };
}
