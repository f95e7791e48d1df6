/**
 * Readers and consumer groups. Requests name a group; the manager picks the
 * least-loaded ready reader in it that serves the request's reader type
 * (generate, embed, classify): a group whose ready readers are all of another
 * type answers 400 `wrong_reader_type`. Readers start from config.yaml at
 * boot and from `PUT /models` at run time, and can be deleted.
 */
import { InvalidRequestError, NotFoundError, UnavailableError } from '../../core/errors.ts';
import type { AnyReaderApi, ReaderType } from '../../core/engine/reader_api.ts';
import { ManagedReader } from './managed_reader.ts';
import type { ReaderSpec } from './spec.ts';

export interface ReaderSummary {
  reader_id: string;
  consumer_group: string;
  model: string;
  type: string;
  device: string | null;
  backend: string | null;
  ready: boolean;
  state: string;
  error: { code: string; message: string } | null;
  restarts: number;
  in_flight: number;
}

let seq = 0;

export class ReaderManager {
  private readonly readers = new Map<string, ManagedReader>();

  start(spec: ReaderSpec): ManagedReader {
    const id = spec.readerId ?? `reader-${++seq}-${Math.random().toString(36).slice(2, 8)}`;
    if (this.readers.has(id)) throw new InvalidRequestError('duplicate_reader_id', `reader ${id} already exists`, { reader_id: id });
    const r = new ManagedReader(id, spec);
    this.readers.set(id, r);
    return r;
  }

  get(id: string): ManagedReader {
    const r = this.readers.get(id);
    if (!r) throw new NotFoundError('reader_not_found', `no reader ${id}`, { reader_id: id });
    return r;
  }

  all(): ManagedReader[] {
    return [...this.readers.values()];
  }

  groups(): Map<string, ManagedReader[]> {
    const g = new Map<string, ManagedReader[]>();
    for (const r of this.readers.values()) {
      const list = g.get(r.spec.consumerGroup) ?? [];
      list.push(r);
      g.set(r.spec.consumerGroup, list);
    }
    return g;
  }

  /**
   * A ready reader of `group`, least requests in flight first; with `need`, one
   * of `need.types` (`need.what` names the route, for the error).
   */
  pick(group: string, need?: { types: readonly ReaderType[]; what: string }): ManagedReader {
    const members = this.all().filter((r) => r.spec.consumerGroup === group);
    if (members.length === 0) throw new NotFoundError('consumer_group_not_found', `no consumer group ${group}`, { consumer_group: group });
    const ready = members.filter((r) => r.ready && r.api);
    if (ready.length === 0) throw new UnavailableError('group_not_ready', `no reader of group ${group} is ready yet`, 2, { consumer_group: group });
    const fit = need ? ready.filter((r) => need.types.includes(r.api!.info().type)) : ready;
    if (fit.length === 0) {
      const has = [...new Set(ready.map((r) => r.api!.info().type))];
      throw new InvalidRequestError('wrong_reader_type', `consumer group ${group} serves ${has.join(' / ')} readers; ${need!.what} needs ${need!.types.join(' or ')}`, {
        consumer_group: group,
        reader_type: has.length === 1 ? has[0] : has,
        expected: [...need!.types],
        field: 'consumer_group',
      });
    }
    return fit.reduce((a, b) => (b.inFlight < a.inFlight ? b : a));
  }

  /** The API of a specific ready reader. */
  api(id: string): AnyReaderApi {
    const r = this.get(id);
    if (!r.ready || !r.api) throw new UnavailableError('reader_not_ready', `reader ${id} is not ready`, 2, { reader_id: id });
    return r.api;
  }

  async delete(id: string): Promise<void> {
    const r = this.get(id);
    this.readers.delete(id);
    await r.stop();
  }

  get allReady(): boolean {
    const all = this.all();
    return all.length > 0 && all.every((r) => r.ready);
  }

  /** Waits until every reader settled (ready or failed), at most `ms`. */
  async waitSettled(ms: number): Promise<void> {
    await Promise.all(this.all().map((r) => r.waitSettled(ms)));
  }

  summary(r: ManagedReader): ReaderSummary {
    const info = r.info;
    return {
      reader_id: r.readerId,
      consumer_group: r.spec.consumerGroup,
      model: r.spec.model,
      type: info?.type ?? 'generate',
      device: info?.device ?? null,
      backend: info?.backend ?? null,
      ready: r.ready,
      state: r.state,
      error: r.error ? { code: r.error.code, message: r.error.message } : null,
      restarts: r.restarts,
      in_flight: r.inFlight,
    };
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.all().map((r) => r.stop()));
    this.readers.clear();
  }
}
