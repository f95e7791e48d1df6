/**
 * The reader's side of a reader on another machine (`weft reader --listen`):
 * one loaded reader served to every authenticated TCP connection over the
 * reader protocol (core/engine/protocol.ts serveReader), framed by
 * remote_frames.ts. Several servers may attach to one reader; each connection
 * has its own requests.
 *
 * A connection must send `hello` with the shared token within
 * HELLO_TIMEOUT_MS; the token is compared in constant time. When a connection
 * drops, its requests still running here are cancelled (their KV blocks
 * return to the pool), as a client that disconnects cancels its request.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import { serveReader, type Endpoint, type Msg } from '../../core/engine/protocol.ts';
import type { AnyReaderApi } from '../../core/engine/reader_api.ts';
import { FramedSocket } from './remote_frames.ts';
import { isControl, PING_INTERVAL_MS, PING_TIMEOUT_MS, PROTOCOL_VERSION, type Control } from './remote_transport.ts';

const HELLO_TIMEOUT_MS = 10_000;
/** An attached server pings every PING_INTERVAL_MS: this long without a byte means it is gone (its requests are cancelled). */
const IDLE_TIMEOUT_MS = 2 * PING_TIMEOUT_MS;

export interface RemoteReaderServer {
  server: Server;
  host: string;
  port: number;
  /** Connections currently attached. */
  connections(): number;
  close(): Promise<void>;
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/** Equal in constant time (over digests, so lengths leak nothing either). */
function tokenMatches(expected: string, got: unknown): boolean {
  return typeof got === 'string' && timingSafeEqual(digest(expected), digest(got));
}

export async function listenRemoteReader(
  api: AnyReaderApi,
  opts: { host: string; port: number; token: string | null; log?: (msg: string, fields?: Record<string, unknown>) => void },
): Promise<RemoteReaderServer> {
  const log = opts.log ?? (() => {});
  const open = new Set<FramedSocket>();
  const server = createServer((socket) => {
    const conn = new FramedSocket(socket);
    open.add(conn);
    const peer = `${socket.remoteAddress}:${socket.remotePort}`;
    const helloTimer = setTimeout(() => conn.close('no hello'), HELLO_TIMEOUT_MS);
    let attached = false;
    const handlers: ((m: Msg) => void)[] = [];
    /** Requests of this connection still running here, for cancel on drop. */
    const live = new Set<string>();
    conn.onClose((why) => {
      clearTimeout(helloTimer);
      open.delete(conn);
      if (attached) log('server detached', { peer, reason: why, cancelled: live.size });
      for (const uuid of live) for (const h of handlers) h({ kind: 'cancel', uuid });
      live.clear();
    });
    conn.onFrame((m) => {
      if (isControl(m)) {
        if (m.ctl === 'ping') conn.send({ ctl: 'pong' } satisfies Control);
        else if (m.ctl === 'hello' && !attached) {
          clearTimeout(helloTimer);
          if (opts.token !== null && !tokenMatches(opts.token, m.token)) {
            log('connection refused: bad token', { peer });
            conn.send({ ctl: 'denied', message: 'bad token' } satisfies Control);
            socket.end();
            return;
          }
          if (m.version !== PROTOCOL_VERSION) {
            conn.send({ ctl: 'denied', message: `protocol version ${String(m.version)} unsupported (this reader speaks ${PROTOCOL_VERSION})` } satisfies Control);
            socket.end();
            return;
          }
          attached = true;
          socket.setKeepAlive(true, PING_INTERVAL_MS);
          socket.setTimeout(IDLE_TIMEOUT_MS, () => conn.close(`nothing heard for ${IDLE_TIMEOUT_MS} ms`));
          conn.send({ ctl: 'welcome', version: PROTOCOL_VERSION } satisfies Control);
          log('server attached', { peer, as: m.reader_id });
          const ep: Endpoint = {
            post: (out: Msg) => {
              if (out.kind === 'end' || out.kind === 'result' || out.kind === 'error') live.delete(out.uuid);
              conn.send(out);
            },
            onMessage: (cb) => handlers.push(cb),
          };
          serveReader(api, ep); // sends `ready` with the reader's info
        }
        return;
      }
      if (!attached) return conn.close('message before hello');
      const msg = m as Msg;
      if (msg.kind === 'generate' || msg.kind === 'call') live.add(msg.uuid);
      for (const h of handlers) h(msg);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : opts.port;
  return {
    server,
    host: opts.host,
    port,
    connections: () => open.size,
    close: async () => {
      for (const c of open) c.close('reader shutting down');
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
