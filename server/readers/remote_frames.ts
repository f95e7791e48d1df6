/**
 * Length-prefixed frames over a byte stream (node:net), carrying the reader
 * protocol's messages (core/engine/protocol.ts) between machines. Node has no
 * WebSocket server built in, and the protocol needs only ordered, reliable
 * delivery of whole messages, which this gives.
 *
 * One frame (all integers unsigned 32-bit big-endian):
 *
 *   [body_len][json_len][json: json_len bytes UTF-8][blob 0][blob 1]...
 *
 * `json` is `{"m": <message>, "b": [byte length of each blob]}`. Typed arrays
 * in a message travel as blobs (raw bytes, never as JSON numbers) and stand in
 * the JSON as `{"__bin": index, "t": "Float32Array"}`; non-finite numbers
 * (logprob -Infinity) as `{"__num": "-Infinity"}`, which JSON cannot hold.
 * A frame larger than MAX_FRAME_BYTES is a protocol error: the connection is
 * closed rather than buffering without bound.
 */
import type { Socket } from 'node:net';

/** Largest frame accepted, bytes. */
export const MAX_FRAME_BYTES = 256 * 2 ** 20;

type View = Exclude<ArrayBufferView, DataView>;
const VIEWS: Record<string, new (b: ArrayBuffer) => View> = {
  Int8Array,
  Uint8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
};

/** Encodes one message as a whole frame (length prefix included). */
export function encodeFrame(msg: unknown): Buffer {
  const blobs: Buffer[] = [];
  const json = JSON.stringify(msg, function (this: Record<string, unknown>, k: string, v: unknown) {
    const raw = this[k]; // before toJSON (a Buffer's toJSON would turn it into numbers)
    if (ArrayBuffer.isView(raw) && !(raw instanceof DataView)) {
      blobs.push(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength));
      return { __bin: blobs.length - 1, t: Buffer.isBuffer(raw) ? 'Uint8Array' : raw.constructor.name };
    }
    if (typeof v === 'number' && !Number.isFinite(v)) return { __num: String(v) };
    return v;
  });
  const head = Buffer.from(`{"b":${JSON.stringify(blobs.map((b) => b.length))},"m":${json ?? 'null'}}`, 'utf8');
  const bodyLen = 4 + head.length + blobs.reduce((a, b) => a + b.length, 0);
  if (bodyLen > MAX_FRAME_BYTES) throw new Error(`frame of ${bodyLen} bytes exceeds ${MAX_FRAME_BYTES}`);
  const prefix = Buffer.alloc(8);
  prefix.writeUInt32BE(bodyLen, 0);
  prefix.writeUInt32BE(head.length, 4);
  return Buffer.concat([prefix, head, ...blobs]);
}

/** Decodes one frame body (without its length prefix). */
export function decodeBody(body: Buffer): unknown {
  const jsonLen = body.readUInt32BE(0);
  const head = JSON.parse(body.subarray(4, 4 + jsonLen).toString('utf8'), (_k, v: unknown) => {
    if (v && typeof v === 'object' && '__num' in v) return Number((v as { __num: string }).__num);
    return v;
  }) as { m: unknown; b: number[] };
  const blobs: Buffer[] = [];
  let at = 4 + jsonLen;
  for (const n of head.b) {
    blobs.push(body.subarray(at, at + n));
    at += n;
  }
  const revive = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(revive);
    if (v && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      if (typeof o.__bin === 'number' && typeof o.t === 'string') {
        const C = VIEWS[o.t] ?? Uint8Array;
        const src = blobs[o.__bin]!;
        const copy = new ArrayBuffer(src.length); // aligned, and detached from the frame's buffer
        new Uint8Array(copy).set(src);
        return new C(copy);
      }
      for (const k of Object.keys(o)) o[k] = revive(o[k]);
    }
    return v;
  };
  return revive(head.m);
}

/**
 * Frames over one socket: `send` writes a message, `onFrame` receives each
 * decoded message in order, `onClose` fires once when the socket is gone
 * (with the reason when it failed).
 */
export class FramedSocket {
  private buf: Buffer = Buffer.alloc(0);
  private readonly frameCbs: ((m: unknown) => void)[] = [];
  private readonly closeCbs: ((reason: string) => void)[] = [];
  private closedReason: string | null = null;

  constructor(readonly socket: Socket) {
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.receive(chunk));
    socket.on('error', (e) => this.close(e.message));
    socket.on('close', () => this.close('connection closed'));
  }

  get closed(): boolean {
    return this.closedReason !== null;
  }

  send(msg: unknown): void {
    if (this.closed) return;
    this.socket.write(encodeFrame(msg));
  }

  onFrame(cb: (m: unknown) => void): void {
    this.frameCbs.push(cb);
  }

  onClose(cb: (reason: string) => void): void {
    if (this.closedReason !== null) cb(this.closedReason);
    else this.closeCbs.push(cb);
  }

  close(reason = 'closed'): void {
    if (this.closedReason !== null) return;
    this.closedReason = reason;
    this.socket.destroy();
    for (const cb of this.closeCbs.splice(0)) cb(reason);
  }

  private receive(chunk: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    while (!this.closed && this.buf.length >= 4) {
      const len = this.buf.readUInt32BE(0);
      if (len < 4 || len > MAX_FRAME_BYTES) return this.close(`bad frame length ${len}`);
      if (this.buf.length < 4 + len) return;
      const body = this.buf.subarray(4, 4 + len);
      this.buf = this.buf.subarray(4 + len);
      let msg: unknown;
      try {
        msg = decodeBody(body);
      } catch (e) {
        return this.close(`bad frame: ${(e as Error).message}`);
      }
      for (const cb of this.frameCbs) cb(msg);
    }
  }
}

/** "host:port" or "[v6]:port" -> parts; throws on anything else. */
export function splitHostPort(s: string): { host: string; port: number } {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(s) ?? /^([^:\s]+):(\d+)$/.exec(s);
  const port = m ? Number(m[2]) : NaN;
  if (!m || !Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`expected HOST:PORT, got "${s}"`);
  return { host: m[1]!, port };
}
