/**
 * Readers and consumer groups. Requests name a group; the manager picks the
 * least-loaded ready reader in it that serves the request's reader type
 * (generate, embed, classify): a group whose ready readers are all of another
 * type answers 400 `wrong_reader_type`. Readers start from config.yaml at
 * boot and from `PUT /models` at run time, and can be deleted.
 *
 * A group whose entries set scaling fields has a policy (scaling.ts): a
 * controller ticking every SCALING_TICK_MS starts replicas (copies of the
 * group's first local reader spec) under queued load and drains idle ones
 * down to `min_replicas`, possibly zero; a request for a group at zero starts
 * a replica and waits for it (`acquire`). Readers may be local (a worker
 * thread) or remote (a reader process found on NATS, `remote:
 * nats:<reader_id>`, nats_directory.ts; its transport is `remoteTransport`).
 */
import { errorFromJSON, InvalidRequestError, NotFoundError, UnavailableError } from '../../core/errors.ts';
import type { AnyReaderApi, ReaderType } from '../../core/engine/reader_api.ts';
import type { Logger } from '../log.ts';
import { counterFamily, gauge } from '../metrics.ts';
import { ManagedReader, PROBE_MS, type DownloadProgress, type ModelFetch } from './managed_reader.ts';
import { decide, mergePolicy, policyJSON, type ScalingPolicy } from './scaling.ts';
import type { ReaderSpec } from './spec.ts';
import { defaultTransport, unrefTimer, type WorkerTransport } from './transport.ts';

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
  /** `nats:<reader_id>` for a reader attached over NATS, else null. */
  remote: string | null;
  /** Started by the scaler (scale-up or cold start). */
  autoscaled: boolean;
  /** Being stopped by the scaler: takes no new requests. */
  draining: boolean;
  /** Takes images (`<image:…>` tags; /image_generate). */
  image_input: boolean;
  /** A model given as a Hub id: bytes fetched so far, all files together, and the file in progress; null for a local model. */
  download: DownloadProgress | null;
}

/** A group as GET /reader_groups?detail=true shows it. */
export interface GroupSummary {
  consumer_group: string;
  /** `scaled_to_zero`: no replica by design (min_replicas 0, idle); `starting`: none ready yet; `ready`; `failed`: every replica failed. */
  state: 'ready' | 'starting' | 'scaled_to_zero' | 'failed';
  ready_replicas: number;
  replicas: ReaderSummary[];
  scaling: Record<string, number> | null;
  cold_starts: number;
  scale_ups: number;
  scale_downs: number;
}

/** Per-group bookkeeping that outlives its replicas (a group at zero has none). */
interface GroupMeta {
  name: string;
  policy: ScalingPolicy | null;
  /** Spec copied for new replicas: the group's first local reader spec. */
  template: ReaderSpec | null;
  /** How the template's model is fetched while it is still a Hub id (dropped once a replica has it on disk). */
  templateFetch: ModelFetch | null;
  coldStarts: number;
  scaleUps: number;
  scaleDowns: number;
  /** Requests waiting for a cold start (demand the readers' queues do not show yet). */
  coldWaiters: number;
}

export const SCALING_TICK_MS = 250;
/** Retry-After of a 503 `reader_starting`, seconds. */
const COLD_START_RETRY_AFTER = 2;

let seq = 0;

export class ReaderManager {
  private readonly readers = new Map<string, ManagedReader>();
  private readonly meta = new Map<string, GroupMeta>();
  private timer: ReturnType<typeof setInterval> | null = null;
  private ticking = false;
  /** Set by the service: scaling events are logged. */
  log: Logger = () => {};
  /** How remote readers (`spec.remote`) are reached: set when NATS is configured. */
  remoteTransport: WorkerTransport | null = null;

  /** Starts a reader; with `fetchModel`, `spec.model` is a Hub id fetched first (state `downloading`). */
  start(spec: ReaderSpec, fetchModel?: ModelFetch): ManagedReader {
    const id = spec.readerId ?? `reader-${++seq}-${Math.random().toString(36).slice(2, 8)}`;
    if (this.readers.has(id)) throw new InvalidRequestError('duplicate_reader_id', `reader ${id} already exists`, { reader_id: id });
    const g = this.meta.get(spec.consumerGroup) ?? this.newMeta(spec.consumerGroup);
    const policy = spec.scaling ? mergePolicy(g.policy ?? undefined, spec.scaling) : g.policy; // validates before anything starts
    this.meta.set(g.name, g);
    g.policy = policy;
    if (!g.template && !spec.remote) {
      const { readerId: _id, scaling: _scaling, ...template } = spec;
      g.template = template;
      g.templateFetch = fetchModel ?? null;
    }
    if (g.policy) this.ensureTicking();
    return this.launch(id, spec, g.templateFetch && g.template?.model === spec.model ? g.templateFetch : fetchModel);
  }

  private newMeta(name: string): GroupMeta {
    return { name, policy: null, template: null, templateFetch: null, coldStarts: 0, scaleUps: 0, scaleDowns: 0, coldWaiters: 0 };
  }

  private launch(id: string, spec: ReaderSpec, fetchModel?: ModelFetch): ManagedReader {
    if (spec.remote && !this.remoteTransport) throw new InvalidRequestError('invalid_reader_config', `reader ${id} is remote but NATS is not configured`, { reader_id: id });
    // Once a fetched model is on disk, new replicas of its group load the local path.
    const onFetched = (path: string): void => {
      const g = this.meta.get(spec.consumerGroup);
      if (g?.template && g.templateFetch && g.template.model === spec.model) {
        g.template = { ...g.template, model: path };
        g.templateFetch = null;
      }
    };
    const r = new ManagedReader(id, spec, spec.remote ? this.remoteTransport! : defaultTransport(), fetchModel, onFetched);
    this.readers.set(id, r);
    return r;
  }

  /** Starts one more replica of `g` from its template (scaler and cold starts). */
  private startReplica(g: GroupMeta, why: 'scale_up' | 'cold_start'): ManagedReader | null {
    if (!g.template) return null;
    let id: string;
    do id = `${g.name}-r${++seq}`;
    while (this.readers.has(id));
    const r = this.launch(id, { ...g.template, readerId: id }, g.templateFetch ?? undefined);
    r.autoscaled = true;
    if (why === 'cold_start') g.coldStarts++;
    else g.scaleUps++;
    this.log('replica started', { consumer_group: g.name, reader_id: id, reason: why });
    return r;
  }

  /** Updates a group's scaling policy (PATCH /reader_groups/{group}). */
  setPolicy(group: string, fields: Partial<ScalingPolicy>): ScalingPolicy {
    const g = this.meta.get(group);
    if (!g) throw new NotFoundError('consumer_group_not_found', `no consumer group ${group}`, { consumer_group: group });
    g.policy = mergePolicy(g.policy ?? undefined, fields);
    this.ensureTicking();
    return g.policy;
  }

  get(id: string): ManagedReader {
    const r = this.readers.get(id);
    if (!r) throw new NotFoundError('reader_not_found', `no reader ${id}`, { reader_id: id });
    return r;
  }

  all(): ManagedReader[] {
    return [...this.readers.values()];
  }

  private members(group: string): ManagedReader[] {
    return this.all().filter((r) => r.spec.consumerGroup === group);
  }

  /** Every group with its readers; a group scaled to zero is listed with none. */
  groups(): Map<string, ManagedReader[]> {
    const g = new Map<string, ManagedReader[]>();
    for (const name of this.meta.keys()) g.set(name, []);
    for (const r of this.readers.values()) {
      const list = g.get(r.spec.consumerGroup) ?? [];
      list.push(r);
      g.set(r.spec.consumerGroup, list);
    }
    return g;
  }

  /**
   * A ready reader of `group`, least requests in flight first; with `need`, one
   * of `need.types` (`need.what` names the route, for the error). Draining
   * replicas take no new requests.
   */
  pick(group: string, need?: { types: readonly ReaderType[]; what: string }): ManagedReader {
    const members = this.members(group);
    if (members.length === 0 && !this.meta.has(group)) throw new NotFoundError('consumer_group_not_found', `no consumer group ${group}`, { consumer_group: group });
    const ready = members.filter((r) => r.ready && r.api && !r.draining);
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
    const chosen = fit.reduce((a, b) => (b.load < a.load ? b : a));
    // Routed counts as activity: the caller marks the request in flight only after an await,
    // and a scaler tick in between must not take the replica for idle and drain it.
    chosen.idleSince = Date.now();
    return chosen;
  }

  /**
   * `pick`, except that a group allowed to scale to zero (min_replicas 0) with
   * no ready replica gets one started (a cold start) and the request waits for
   * it, at most the policy's cold_start_timeout_seconds: past that, 503
   * `reader_starting` with Retry-After (the replica keeps loading). A replica
   * that fails to load fails the waiting requests with its load error.
   */
  async acquire(group: string, need?: { types: readonly ReaderType[]; what: string }, signal?: AbortSignal): Promise<ManagedReader> {
    const g = this.meta.get(group);
    if (!g?.policy || g.policy.minReplicas > 0 || !g.template) return this.pick(group, need);
    const serving = (): boolean => this.members(group).some((r) => r.ready && r.api && !r.draining);
    if (serving()) return this.pick(group, need);
    const starting = (): ManagedReader[] => this.members(group).filter((r) => !r.draining && (r.state === 'downloading' || r.state === 'loading' || r.state === 'restarting'));
    if (starting().length === 0) this.startReplica(g, 'cold_start');
    const deadline = Date.now() + g.policy.coldStartTimeoutSeconds * 1000;
    g.coldWaiters++;
    try {
      while (!serving() && starting().length > 0 && Date.now() < deadline && !signal?.aborted) {
        await new Promise((res) => setTimeout(res, Math.max(1, Math.min(50, deadline - Date.now()))));
      }
    } finally {
      g.coldWaiters--;
    }
    if (!serving()) {
      const failed = this.members(group).find((r) => r.state === 'failed' && r.error);
      if (starting().length === 0 && failed) throw errorFromJSON(failed.error!);
      throw new UnavailableError('reader_starting', `consumer group ${group} is starting a reader (cold start); retry shortly`, COLD_START_RETRY_AFTER, { consumer_group: group });
    }
    return this.pick(group, need);
  }

  /** The API of a specific ready reader. */
  api(id: string): AnyReaderApi {
    const r = this.get(id);
    if (!r.ready || !r.api) throw new UnavailableError('reader_not_ready', `reader ${id} is not ready`, 2, { reader_id: id });
    return r.api;
  }

  /** Stops a reader at once (requests in flight fail). Deleting a group's last reader removes the group. */
  async delete(id: string): Promise<void> {
    const r = this.get(id);
    this.readers.delete(id);
    if (this.members(r.spec.consumerGroup).length === 0) this.meta.delete(r.spec.consumerGroup);
    await r.stop();
  }

  /** Removes a reader that went away (a remote reader no longer on the broker); its group stays, possibly empty. */
  async detach(id: string): Promise<void> {
    const r = this.readers.get(id);
    if (!r) return;
    this.readers.delete(id);
    await r.stop();
  }

  /** Stops every reader of a group at once and forgets the group (its policy too). */
  async deleteGroup(name: string): Promise<string[]> {
    if (!this.groups().has(name)) throw new NotFoundError('consumer_group_not_found', `no consumer group ${name}`, { consumer_group: name });
    const members = this.members(name);
    this.meta.delete(name);
    for (const r of members) this.readers.delete(r.readerId);
    await Promise.all(members.map((r) => r.stop()));
    return members.map((r) => r.readerId);
  }

  /**
   * Healthy: every group is. A group is healthy when it has a ready reader and
   * every reader it was given (not the scaler's extra replicas, still loading)
   * is ready; a group that may scale to zero is healthy by design whenever no
   * replica failed, also with none running or one cold-starting. Readers
   * started at run time (PUT /models) are left out while not ready: a failed
   * or loading one is reported (/reader_groups, /status) but does not make a
   * serving server unhealthy; with no other reader, a ready one is needed.
   */
  get allReady(): boolean {
    const groups = this.groups();
    if (groups.size === 0) return false;
    let counted = 0;
    for (const [name, all] of groups) {
      const list = all.filter((r) => !r.runtime || r.ready);
      if (list.length === 0) continue;
      counted++;
      const policy = this.meta.get(name)?.policy;
      if (policy && policy.minReplicas === 0) {
        if (list.some((r) => r.state === 'failed')) return false;
      } else if (!list.some((r) => r.ready) || !list.every((r) => r.ready || r.autoscaled)) return false;
    }
    return counted > 0;
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
      // A fetched model keeps its Hub id as its name (the worker only sees the snapshot path).
      model: r.download ? r.spec.model : (info?.model ?? r.spec.model),
      type: info?.type ?? r.spec.type ?? 'generate',
      device: info?.device ?? null,
      backend: info?.backend ?? null,
      ready: r.ready,
      state: r.state,
      error: r.error ? { code: r.error.code, message: r.error.message } : null,
      restarts: r.restarts,
      in_flight: r.inFlight,
      remote: r.spec.remote ?? null,
      autoscaled: r.autoscaled,
      draining: r.draining,
      image_input: info?.imageInput ?? false,
      download: r.download,
    };
  }

  groupSummary(name: string): GroupSummary {
    const list = this.groups().get(name);
    if (!list) throw new NotFoundError('consumer_group_not_found', `no consumer group ${name}`, { consumer_group: name });
    const g = this.meta.get(name) ?? this.newMeta(name);
    const ready = list.filter((r) => r.ready && !r.draining).length;
    const live = list.filter((r) => !r.draining);
    const state: GroupSummary['state'] =
      ready > 0 ? 'ready' : live.length === 0 && g.policy?.minReplicas === 0 ? 'scaled_to_zero' : live.length > 0 && live.every((r) => r.state === 'failed') ? 'failed' : 'starting';
    return {
      consumer_group: name,
      state,
      ready_replicas: ready,
      replicas: list.map((r) => this.summary(r)),
      scaling: g.policy ? policyJSON(g.policy) : null,
      cold_starts: g.coldStarts,
      scale_ups: g.scaleUps,
      scale_downs: g.scaleDowns,
    };
  }

  /** Prometheus text for groups: replicas by state, cold starts, scale events. */
  renderMetrics(): string {
    const names = [...this.groups().keys()];
    const replicas: [Record<string, string>, number][] = [];
    for (const name of names) {
      const list = this.members(name);
      const count = (f: (r: ManagedReader) => boolean): number => list.filter(f).length;
      replicas.push(
        [{ consumer_group: name, state: 'ready' }, count((r) => r.ready && !r.draining)],
        [{ consumer_group: name, state: 'starting' }, count((r) => !r.draining && (r.state === 'downloading' || r.state === 'loading' || r.state === 'restarting'))],
        [{ consumer_group: name, state: 'draining' }, count((r) => r.draining)],
        [{ consumer_group: name, state: 'failed' }, count((r) => r.state === 'failed')],
      );
    }
    const scaled = names.filter((n) => this.meta.get(n)?.policy);
    const m = (n: string): GroupMeta => this.meta.get(n)!;
    return (
      gauge('weft_group_replicas', 'Replicas of a consumer group, by state.', replicas) +
      gauge('weft_group_min_replicas', 'Scaling policy: fewest replicas (0 = may scale to zero).', scaled.map((n) => [{ consumer_group: n }, m(n).policy!.minReplicas])) +
      gauge('weft_group_max_replicas', 'Scaling policy: most replicas the scaler starts.', scaled.map((n) => [{ consumer_group: n }, m(n).policy!.maxReplicas])) +
      counterFamily('weft_cold_starts_total', 'Replicas started because a request found its group at zero.', scaled.map((n) => [{ consumer_group: n }, m(n).coldStarts])) +
      counterFamily(
        'weft_scale_events_total',
        'Replicas started (up) and stopped (down) by the scaler.',
        scaled.flatMap((n): [Record<string, string>, number][] => [
          [{ consumer_group: n, direction: 'up' }, m(n).scaleUps],
          [{ consumer_group: n, direction: 'down' }, m(n).scaleDowns],
        ]),
      )
    );
  }

  private ensureTicking(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.tick(), SCALING_TICK_MS);
    unrefTimer(this.timer);
  }

  /** One controller pass over every group with a policy (never two at once). */
  async tick(): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      for (const g of this.meta.values()) if (g.policy) await this.scaleGroup(g, g.policy);
    } finally {
      this.ticking = false;
    }
  }

  private async scaleGroup(g: GroupMeta, policy: ScalingPolicy): Promise<void> {
    const list = this.members(g.name).filter((r) => !r.draining && r.state !== 'stopped');
    // Requests queued inside the readers (their schedulers' waiting lists), read from the workers.
    const queued = await Promise.all(list.map(async (r) => (await r.statsWithin(PROBE_MS)).stats?.waiting ?? 0));
    const now = Date.now();
    const d = decide({
      policy,
      replicas: list.map((r) => ({ id: r.readerId, state: r.state === 'restarting' || r.state === 'downloading' ? 'loading' : r.state, inFlight: r.inFlight, idleMs: r.inFlight > 0 ? 0 : now - r.idleSince, remote: !!r.spec.remote })),
      queued: queued.reduce((a, b) => a + b, 0),
      coldWaiters: g.coldWaiters,
      canStart: g.template !== null,
    });
    for (let i = 0; i < d.start; i++) this.startReplica(g, 'scale_up');
    for (const id of d.stop) {
      const r = this.readers.get(id);
      if (!r || r.inFlight > 0) continue; // picked since the decision: keep it
      r.draining = true;
      g.scaleDowns++;
      this.log('replica draining', { consumer_group: g.name, reader_id: id, idle_seconds: Math.round((now - r.idleSince) / 1000) });
      void this.drainAndStop(r);
    }
  }

  /** Waits until nothing is in flight on `r` (it takes no new requests), then stops it. */
  private async drainAndStop(r: ManagedReader): Promise<void> {
    while (r.inFlight > 0) await r.waitIdle();
    if (this.readers.get(r.readerId) === r) this.readers.delete(r.readerId);
    await r.stop();
    this.log('replica stopped', { consumer_group: r.spec.consumerGroup, reader_id: r.readerId });
  }

  async stopAll(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await Promise.all(this.all().map((r) => r.stop()));
    this.readers.clear();
  }
}
