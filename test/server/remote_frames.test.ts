/**
 * The remote reader's wire format over a real loopback socket: messages
 * arrive whole and in order however TCP splits them, typed arrays travel as
 * binary blobs and come back with their type, non-finite numbers survive, an
 * oversized length prefix closes the connection. (The token handshake and
 * the protocol over these frames are tested end to end in remote.test.ts.)
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { decodeBody, encodeFrame, FramedSocket, MAX_FRAME_BYTES, splitHostPort } from '../../server/readers/remote_frames.ts';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise<void>((r) => s.close(() => r()))));
});

async function pair(): Promise<{ client: Socket; server: Socket }> {
  let accept!: (s: Socket) => void;
  const accepted = new Promise<Socket>((r) => (accept = r));
  const srv = createServer((s) => accept(s));
  servers.push(srv);
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  const client = connect({ host: '127.0.0.1', port });
  await new Promise<void>((r) => client.once('connect', () => r()));
  return { client, server: await accepted };
}

describe('frames', () => {
  it('round-trips typed arrays as binary, non-finite numbers and nested data', () => {
    const msg = { kind: 'result', uuid: 'c1', content: { v: new Float32Array([1.5, -2, Number.NaN]), ids: new Uint32Array([7, 2 ** 32 - 1]), lp: -Infinity, big: Infinity, list: [1, 'a', null], nested: { b: new Uint8Array([255, 0]) } } };
    const frame = encodeFrame(msg);
    expect(frame.readUInt32BE(0)).toBe(frame.length - 4);
    // The float32 bytes are in the frame as raw bytes, not as JSON text.
    expect(frame.includes(Buffer.from(new Float32Array([1.5, -2]).buffer))).toBe(true);
    const back = decodeBody(frame.subarray(4)) as typeof msg;
    expect(back.content.v).toBeInstanceOf(Float32Array);
    expect([...back.content.v].slice(0, 2)).toEqual([1.5, -2]);
    expect(Number.isNaN(back.content.v[2])).toBe(true);
    expect(back.content.ids).toEqual(new Uint32Array([7, 2 ** 32 - 1]));
    expect(back.content.lp).toBe(-Infinity);
    expect(back.content.big).toBe(Infinity);
    expect(back.content.list).toEqual([1, 'a', null]);
    expect(back.content.nested.b).toEqual(new Uint8Array([255, 0]));
  });

  it('delivers whole messages in order over a socket, whatever the chunking', async () => {
    const { client, server } = await pair();
    const got: unknown[] = [];
    const rx = new FramedSocket(server);
    rx.onFrame((m) => got.push(m));
    const msgs = Array.from({ length: 50 }, (_, i) => ({ kind: 'event', uuid: `g${i}`, content: { text: 'x'.repeat(i * 37), id: i, emb: new Float32Array(i) } }));
    const bytes = Buffer.concat(msgs.map((m) => encodeFrame(m)));
    // Write in awkward pieces: 1, 3, 7, ... bytes, so prefixes and bodies straddle chunks.
    for (let at = 0, n = 1; at < bytes.length; at += n, n = (n * 3 + 1) % 97 || 1) client.write(bytes.subarray(at, at + n));
    await new Promise<void>((r) => {
      const check = (): void => (got.length === msgs.length ? r() : void setTimeout(check, 5));
      check();
    });
    expect((got as { uuid: string }[]).map((m) => m.uuid)).toEqual(msgs.map((m) => m.uuid));
    expect((got[49] as { content: { emb: Float32Array; text: string } }).content.emb).toHaveLength(49);
    client.destroy();
  });

  it('closes the connection on a length prefix past the limit', async () => {
    const { client, server } = await pair();
    const rx = new FramedSocket(server);
    const why = new Promise<string>((r) => rx.onClose(r));
    const head = Buffer.alloc(4);
    head.writeUInt32BE(MAX_FRAME_BYTES + 1);
    client.write(head);
    expect(await why).toMatch(/bad frame length/);
    client.destroy();
  });

  it('parses host:port and [v6]:port', () => {
    expect(splitHostPort('10.0.0.2:9000')).toEqual({ host: '10.0.0.2', port: 9000 });
    expect(splitHostPort('[::1]:80')).toEqual({ host: '::1', port: 80 });
    expect(() => splitHostPort('host')).toThrow(/HOST:PORT/);
    expect(() => splitHostPort('host:99999')).toThrow(/HOST:PORT/);
  });
});
