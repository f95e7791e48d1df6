/**
 * A front end's view of the readers on NATS: every DISCOVER_MS it asks
 * `$SRV.PING.weft-reader` who is there (each reader process answers with its
 * consumer group, reader id, model and type in its service metadata) and
 * starts a ManagedReader (`remote: nats:<reader_id>`, nats_transport.ts) for
 * each reader it has not seen, so `GET /reader_groups` lists remote readers
 * as they come. A reader that stops answering fails its requests at once
 * (the transport's liveness poll) and, absent from discovery for GONE_MS, is
 * removed from its group; the group itself stays (empty: requests get 503
 * `group_not_ready` until a reader attaches again).
 *
 * Routing: the front end picks the least-loaded reader (ReaderManager.pick)
 * by its own requests in flight plus the load other front ends put on the
 * reader, from the reader's `$SRV.STATS` (`in_flight` across every front end,
 * minus this front end's share). A NATS queue group would pick at random and
 * cannot see a reader's queue; a stream also has to stay on one reader
 * (cancellation, heartbeats), which direct subjects give.
 */
import { Svcm } from '@nats-io/services';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../log.ts';
import type { ReaderManager } from './manager.ts';
import { natsReaderId, natsTransport } from './nats_transport.ts';
import { READER_ID_RE, SERVICE_NAME } from './nats_subjects.ts';

export const DISCOVER_MS = 1_000;
/** A reader absent from discovery this long (and not ready) is removed, ms. */
export const GONE_MS = 5_000;

export class NatsDirectory {
  private timer: ReturnType<typeof setInterval> | null = null;
  private readonly lastSeen = new Map<string, number>();
  private running = false;

  constructor(
    private readonly nc: NatsConnection,
    private readonly manager: ReaderManager,
    private readonly log: Logger,
  ) {
    manager.remoteTransport = natsTransport(nc, {
      onLoad: (readerId, load, mine) => {
        const r = manager.all().find((x) => x.readerId === readerId);
        if (r) r.externalLoad = Math.max(0, load.in_flight - mine) + load.waiting;
      },
    });
  }

  start(): void {
    void this.discover();
    this.timer = setInterval(() => void this.discover(), DISCOVER_MS);
    this.timer.unref();
  }

  /** One discovery pass (never two at once). */
  async discover(): Promise<void> {
    if (this.running || this.nc.isClosed()) return;
    this.running = true;
    try {
      const client = new Svcm(this.nc as never).client({ strategy: 'timer', maxWait: 400 } as never);
      const now = Date.now();
      try {
        for await (const id of await client.ping(SERVICE_NAME)) {
          const md = id.metadata ?? {};
          const readerId = md.reader_id;
          const group = md.consumer_group;
          if (!readerId || !group || !READER_ID_RE.test(readerId)) continue;
          this.lastSeen.set(readerId, now);
          const known = this.manager.all().find((r) => r.readerId === readerId);
          if (known) continue;
          this.manager.start({ model: md.model ?? `nats:${readerId}`, consumerGroup: group, readerId, remote: `nats:${readerId}`, ...(md.type ? { type: md.type as 'generate' } : {}) });
          this.log('remote reader attached', { reader_id: readerId, consumer_group: group, model: md.model });
        }
      } catch {
        // no readers answer, or the broker is away: try again next pass
      }
      for (const r of this.manager.all()) {
        if (!r.spec.remote?.startsWith('nats:') || r.ready) continue;
        const id = natsReaderId(r.spec.remote);
        if (now - (this.lastSeen.get(id) ?? r.startedAt) > GONE_MS) {
          this.lastSeen.delete(id);
          await this.manager.detach(r.readerId);
          this.log('remote reader gone', { reader_id: r.readerId, consumer_group: r.spec.consumerGroup });
        }
      }
    } finally {
      this.running = false;
    }
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
