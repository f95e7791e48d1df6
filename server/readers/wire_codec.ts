/**
 * The reader protocol's messages (core/engine/protocol.ts) as bytes, for
 * carrying them between processes over NATS (nats_reader.ts,
 * nats_transport.ts). JSON alone would turn typed arrays (embeddings) into
 * number lists and cannot hold non-finite numbers (logprob -Infinity), so:
 *
 *   [json_len: u32 big-endian][json: json_len bytes UTF-8][blob 0][blob 1]...
 *
 * `json` is `{"m": <message>, "b": [byte length of each blob]}`. Typed arrays
 * travel as blobs (raw bytes) and stand in the JSON as
 * `{"__bin": index, "t": "Float32Array"}`; non-finite numbers as
 * `{"__num": "-Infinity"}`.
 */

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

export function encodeMessage(msg: unknown): Uint8Array {
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
  const prefix = Buffer.alloc(4);
  prefix.writeUInt32BE(head.length, 0);
  return Buffer.concat([prefix, head, ...blobs]);
}

export function decodeMessage(bytes: Uint8Array): unknown {
  const body = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (body.length < 4) throw new Error('message shorter than its header');
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
        const copy = new ArrayBuffer(src.length); // aligned, and detached from the message's buffer
        new Uint8Array(copy).set(src);
        return new C(copy);
      }
      for (const k of Object.keys(o)) o[k] = revive(o[k]);
    }
    return v;
  };
  return revive(head.m);
}
