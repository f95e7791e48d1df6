/**
 * The server's side of a reader on another machine (`remote: host:port` in a
 * reader entry): a WorkerTransport whose "worker" is a TCP connection to a
 * `weft reader --listen` process. ManagedReader sees the same handle as for a
 * worker thread: protocol messages (`ready`, results, events), and one exit
 * when the connection drops, which it answers like a worker crash (reconnect
 * with backoff, in-flight requests failed with 503 `reader_disconnected`).
 *
 * Connection: TCP connect (timeout CONNECT_TIMEOUT_MS), then a `hello` control
 * frame with the shared token; the reader answers `welcome` and then the
 * protocol's `ready`, or `denied` (reported as the reader's load failure
 * `remote_auth_failed`: a configuration error, not retried). While connected,
 * a ping every PING_INTERVAL_MS; no frame for PING_TIMEOUT_MS counts as a
 * dropped connection (a machine that vanished sends no FIN).
 */
import { connect } from 'node:net';
import type { ErrorJSON } from '../../core/errors.ts';
import type { Msg } from '../../core/engine/protocol.ts';
import { FramedSocket, splitHostPort } from './remote_frames.ts';
import type { WorkerHandle, WorkerTransport } from './transport.ts';

export const PROTOCOL_VERSION = 1;
const CONNECT_TIMEOUT_MS = 5_000;
export const PING_INTERVAL_MS = 5_000;
export const PING_TIMEOUT_MS = 15_000;

/** Transport-level frames beside the protocol's messages. */
export type Control =
  | { ctl: 'hello'; token: string | null; version: number; reader_id: string }
  | { ctl: 'welcome'; version: number }
  | { ctl: 'denied'; message: string }
  | { ctl: 'ping' }
  | { ctl: 'pong' };

export const isControl = (m: unknown): m is Control => typeof m === 'object' && m !== null && typeof (m as { ctl?: unknown }).ctl === 'string';

const disconnected = (where: string, why: string): ErrorJSON => ({
  name: 'UnavailableError',
  code: 'reader_disconnected',
  message: `remote reader ${where} disconnected: ${why}`,
});

export const remoteTransport: WorkerTransport = ({ readerId, spec }) => {
  const where = spec.remote!;
  const { host, port } = splitHostPort(where);
  const token = spec.remoteToken ?? process.env.WEFT_READER_TOKEN ?? null;
  const msgCbs: ((m: Msg) => void)[] = [];
  const exitCbs: ((reason?: ErrorJSON) => void)[] = [];
  let exited = false;
  let lastHeard = Date.now();
  let ping: ReturnType<typeof setInterval> | null = null;

  const socket = connect({ host, port });
  socket.setTimeout(CONNECT_TIMEOUT_MS, () => conn.close(`no connection within ${CONNECT_TIMEOUT_MS} ms`));
  const conn = new FramedSocket(socket);
  const exit = (reason: ErrorJSON | undefined): void => {
    if (exited) return;
    exited = true;
    if (ping) clearInterval(ping);
    conn.close();
    for (const cb of exitCbs) cb(reason);
  };

  socket.once('connect', () => {
    socket.setTimeout(0);
    socket.setKeepAlive(true, PING_INTERVAL_MS);
    conn.send({ ctl: 'hello', token, version: PROTOCOL_VERSION, reader_id: readerId } satisfies Control);
    ping = setInterval(() => {
      if (Date.now() - lastHeard > PING_TIMEOUT_MS) conn.close(`no answer for ${PING_TIMEOUT_MS} ms`);
      else conn.send({ ctl: 'ping' } satisfies Control);
    }, PING_INTERVAL_MS);
    ping.unref();
  });
  conn.onFrame((m) => {
    lastHeard = Date.now();
    if (isControl(m)) {
      if (m.ctl === 'ping') conn.send({ ctl: 'pong' } satisfies Control);
      else if (m.ctl === 'denied') {
        const failed: Msg = { kind: 'failed', uuid: '', content: { name: 'InvalidRequestError', code: 'remote_auth_failed', message: `remote reader ${where} refused the connection: ${m.message}` } satisfies ErrorJSON };
        for (const cb of msgCbs) cb(failed);
      }
      return;
    }
    for (const cb of msgCbs) cb(m as Msg);
  });
  conn.onClose((why) => exit(disconnected(where, why)));

  return {
    post: (m) => conn.send(m),
    onMessage: (cb) => msgCbs.push(cb),
    onError: () => {
      // connection errors arrive as the exit reason
    },
    onExit: (cb) => exitCbs.push(cb),
    terminate: async () => exit(undefined),
  } satisfies WorkerHandle;
};
