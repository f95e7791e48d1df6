/**
 * Scaling of a consumer group by usage: its policy (from reader entries and
 * `PUT /models` bodies) and the pure decision the reader manager applies on
 * every tick. The manager owns the replicas (manager.ts); this module only
 * says how many to add and which idle ones to stop, so the rule is testable
 * without readers.
 *
 * The rule, per group with a policy:
 * - fewer live replicas than `min_replicas` (after a crash, a delete, a
 *   raised minimum): start the difference;
 * - waiting requests (queued in the readers' schedulers, plus requests
 *   waiting for a cold start while no replica is ready) >=
 *   `scale_up_queue_depth` x ready replicas, no replica already loading, fewer
 *   than `max_replicas`: start one;
 * - nothing queued and nobody waiting for a cold start, more live replicas
 *   than `min_replicas`: stop the
 *   replica idle longest, once it has had nothing in flight for
 *   `scale_down_after_seconds` (one per tick). A replica is only ever chosen
 *   with nothing in flight, and the manager drains it (no new requests) before
 *   stopping it, so scaling down never drops a request.
 * Remote readers (`remote:`) count as replicas but are never started or
 * stopped here: their process belongs to another machine.
 */
import { InvalidRequestError } from '../../core/errors.ts';

export interface ScalingPolicy {
  /** Fewest live replicas; 0 lets the group scale to zero when idle. */
  minReplicas: number;
  /** Most replicas the controller starts (entries started by hand may exceed it). */
  maxReplicas: number;
  /** Seconds a replica must be idle (nothing in flight) before it is stopped. */
  scaleDownAfterSeconds: number;
  /** Waiting requests per ready replica that make the controller add one. */
  scaleUpQueueDepth: number;
  /** Longest a request waits for a cold start before 503 `reader_starting`, seconds. */
  coldStartTimeoutSeconds: number;
}

export const SCALING_DEFAULTS: ScalingPolicy = {
  minReplicas: 1,
  maxReplicas: 1,
  scaleDownAfterSeconds: 300,
  scaleUpQueueDepth: 4,
  coldStartTimeoutSeconds: 60,
};

/** Field name (snake_case, as in config.yaml and HTTP) -> policy key, with its bounds. */
const FIELDS: [string, keyof ScalingPolicy, number, number, boolean][] = [
  ['min_replicas', 'minReplicas', 0, 64, true],
  ['max_replicas', 'maxReplicas', 1, 64, true],
  ['scale_down_after_seconds', 'scaleDownAfterSeconds', 0, 7 * 86_400, false],
  ['scale_up_queue_depth', 'scaleUpQueueDepth', 1, 1 << 16, true],
  ['cold_start_timeout_seconds', 'coldStartTimeoutSeconds', 0, 3600, false],
];

export const SCALING_FIELDS = FIELDS.map((f) => f[0]);

/** The scaling fields of a reader entry (snake_case or camelCase), or undefined when it sets none. */
export function parseScaling(o: Record<string, unknown>): Partial<ScalingPolicy> | undefined {
  const out: Partial<ScalingPolicy> = {};
  let any = false;
  for (const [snake, camel, min, max, integer] of FIELDS) {
    const v = o[snake] ?? o[camel];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isFinite(v) || (integer && !Number.isInteger(v)) || v < min || v > max) {
      throw new InvalidRequestError('invalid_reader_config', `${snake} must be ${integer ? 'an integer' : 'a number'} in [${min}, ${max}]`, { field: snake });
    }
    out[camel] = v;
    any = true;
  }
  return any ? out : undefined;
}

/** `prev` (or the defaults) updated by `fields`; min <= max is checked on the result. */
export function mergePolicy(prev: ScalingPolicy | undefined, fields: Partial<ScalingPolicy>): ScalingPolicy {
  const p = { ...(prev ?? SCALING_DEFAULTS), ...fields };
  // Raising only min_replicas above the default max raises max with it, rather than failing.
  if (fields.maxReplicas === undefined && p.maxReplicas < p.minReplicas) p.maxReplicas = p.minReplicas;
  if (p.minReplicas > p.maxReplicas) {
    throw new InvalidRequestError('invalid_reader_config', `min_replicas (${p.minReplicas}) must not exceed max_replicas (${p.maxReplicas})`, { field: 'min_replicas' });
  }
  return p;
}

/** The policy as it appears in JSON (GET /reader_groups?detail=true). */
export function policyJSON(p: ScalingPolicy): Record<string, number> {
  const o: Record<string, number> = {};
  for (const [snake, camel] of FIELDS) o[snake] = p[camel];
  return o;
}

/** What the decision sees of one replica. */
export interface ReplicaView {
  id: string;
  state: string;
  inFlight: number;
  /** ms since the replica last had something in flight (or since it started). */
  idleMs: number;
  /** A `remote:` reader: counted, never started or stopped. */
  remote: boolean;
}

export interface GroupView {
  policy: ScalingPolicy;
  /** Replicas not draining or stopped. */
  replicas: ReplicaView[];
  /** Requests queued inside the readers' schedulers. */
  queued: number;
  /** Requests waiting in `acquire` for a cold start (routed at their next poll once a replica is ready). */
  coldWaiters: number;
  /** A replica can be started (the group has a local reader spec to copy). */
  canStart: boolean;
}

export interface Decision {
  /** Replicas to start. */
  start: number;
  /** Replica ids to drain and stop. */
  stop: string[];
}

export function decide(g: GroupView): Decision {
  const { policy } = g;
  const live = g.replicas.filter((r) => r.state !== 'failed');
  const failed = g.replicas.length - live.length;
  const ready = live.filter((r) => r.state === 'ready');
  const loading = live.length - ready.length;
  // Cold-start waiters are demand only while no replica is ready: once one is, they are about
  // to be routed to it (they poll every 50 ms), and counting them then started a second
  // replica for the one request that woke the group. They always block scaling down, though:
  // stopping the replica they are about to take failed them with 503 reader_starting.
  const demand = g.queued + (ready.length === 0 ? g.coldWaiters : 0);
  // A failed replica means the spec does not load (a configuration error): never start copies of it in a loop.
  if (g.canStart && failed === 0) {
    if (live.length < policy.minReplicas) return { start: policy.minReplicas - live.length, stop: [] };
    if (loading === 0 && live.length < policy.maxReplicas && demand > 0 && demand >= policy.scaleUpQueueDepth * ready.length) return { start: 1, stop: [] };
  }
  if (g.queued === 0 && g.coldWaiters === 0 && live.length > policy.minReplicas) {
    const idle = ready.filter((r) => !r.remote && r.inFlight === 0 && r.idleMs >= policy.scaleDownAfterSeconds * 1000).sort((a, b) => b.idleMs - a.idleMs);
    if (idle.length > 0) return { start: 0, stop: [idle[0]!.id] };
  }
  return { start: 0, stop: [] };
}
