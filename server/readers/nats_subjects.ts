/**
 * Subjects and timings shared by a reader attached over NATS
 * (nats_reader.ts) and the front ends that use it (nats_transport.ts,
 * nats_directory.ts). Every reader process runs one NATS service named
 * SERVICE_NAME (the services framework answers `$SRV.PING|INFO|STATS` for
 * it), with its consumer group, reader id, model and type in the service
 * metadata, and four endpoints under `weft.reader.<reader_id>`:
 *
 *   hello   request -> {info: ReaderInfo, service_id}      (attach)
 *   call    request {uuid, content: {method, args}} -> {kind: result|error, content}
 *   gen     request {uuid, inbox, content: GenerateRequest} -> {ok: true};
 *           then `<inbox>.s` gets {seq, kind: event|end|error, content} in order,
 *           and `<inbox>.hb` a request every HEARTBEAT_MS the front end answers
 *   cancel  publish {uuid}
 *
 * Payloads are wire_codec.ts messages. The endpoints subscribe in a queue
 * group named for the consumer group.
 */
export const SERVICE_NAME = 'weft-reader';
export const readerSubject = (readerId: string, op: 'hello' | 'call' | 'gen' | 'cancel'): string => `weft.reader.${readerId}.${op}`;

/** A reader id must be one subject token. */
export const READER_ID_RE = /^[A-Za-z0-9_-]{1,64}$/;

/** The reader pings each open stream's inbox this often, ms. */
export const HEARTBEAT_MS = 1_000;
/** A stream with nothing heard (event or heartbeat) for this long fails with reader_disconnected, ms. */
export const STREAM_IDLE_MS = 30_000;
/** Front ends poll each attached reader's `$SRV.STATS` this often (liveness and load), ms. */
export const LIVENESS_MS = 500;
/**
 * A stats poll unanswered this long counts as a missed beat; LIVENESS_MISSES in
 * a row detach the reader, ms. Generous: a reader's event loop can be busy
 * with a long GPU step (CPU emulation); a process that is gone is detected at
 * once by "no responders" instead (on the next poll: hence the short timeout,
 * since a poll sent just before the process died is never answered).
 */
export const LIVENESS_TIMEOUT_MS = 1_000;
export const LIVENESS_MISSES = 10;
/** Longest wait for a call's answer (tokenize ... embed), ms. */
export const CALL_TIMEOUT_MS = 120_000;
/** Longest wait for hello and for a stream's acceptance, ms. */
export const ATTACH_TIMEOUT_MS = 5_000;

/** What a reader reports in `$SRV.STATS` (each endpoint's `data`): its load across every front end. */
export interface ReaderLoad {
  /** Streams and calls being served for all front ends. */
  in_flight: number;
  /** Sequences waiting in its scheduler (not yet running): the queue-depth signal. */
  waiting: number;
  running: number;
}
