/**
 * safetensors: write -> read round trips for every dtype, sharded checkpoints,
 * malformed headers (each a ModelFormatError with a clear message, never a
 * crash, also under random truncation/corruption), and the real stories260K file.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ModelFormatError, UnsupportedModelError } from '../../core/errors.ts';
import { encodeBF16, encodeF16 } from '../../core/formats/gguf_quants.ts';
import {
  openSafetensors,
  openSafetensorsModel,
  SAFETENSORS_DTYPES,
  toFloat32,
  writeSafetensors,
  type SafetensorsDType,
} from '../../core/formats/safetensors.ts';
import { bytesSource, filesSource } from '../../core/formats/source.ts';
import { dirSource } from '../../server/fs_source.ts';

const STORIES = fileURLToPath(new URL('../../models/stories260K', import.meta.url));

/** A safetensors file from a raw JSON header text and data bytes. */
function rawFile(header: string, data: Uint8Array = new Uint8Array(0), lenOverride?: number): Uint8Array {
  const h = new TextEncoder().encode(header);
  const out = new Uint8Array(8 + h.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(lenOverride ?? h.length), true);
  out.set(h, 8);
  out.set(data, 8 + h.length);
  return out;
}

async function formatError(bytes: Uint8Array): Promise<ModelFormatError> {
  const e = await openSafetensors(bytesSource(bytes)).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(ModelFormatError);
  return e as ModelFormatError;
}

describe('safetensors round trip', () => {
  const samples: Record<SafetensorsDType, ArrayBufferView> = {
    F64: new Float64Array([1.5, -2.25, 1e300]),
    F32: new Float32Array([0.1, -3, 7, 8, 9, 10]),
    F16: encodeF16([1, -2, 0.5, 65504]),
    BF16: encodeBF16([1, -2, 3.140625, -0]),
    I64: new BigInt64Array([1n, -(2n ** 62n)]),
    I32: new Int32Array([1, -1, 2 ** 31 - 1]),
    I8: new Int8Array([-128, 0, 127, 5]),
    U8: new Uint8Array([0, 255, 3]),
  };

  it('writes and reads back every dtype, shapes and metadata intact', async () => {
    const tensors = Object.entries(samples).map(([dtype, data], i) => {
      const n = data.byteLength / SAFETENSORS_DTYPES[dtype as SafetensorsDType];
      return { name: `t${i}.${dtype}`, dtype: dtype as SafetensorsDType, shape: n % 2 === 0 ? [2, n / 2] : [n], data };
    });
    tensors.push({ name: 'empty', dtype: 'F32', shape: [0, 4], data: new Float32Array(0) });
    tensors.push({ name: 'scalar', dtype: 'F32', shape: [], data: new Float32Array([42]) });
    const file = writeSafetensors(tensors, { format: 'pt', note: 'héllo' });
    const headerLen = Number(new DataView(file.buffer).getBigUint64(0, true));
    expect(headerLen % 8).toBe(0);
    const st = await openSafetensors(bytesSource(file));
    expect(st.metadata).toEqual({ format: 'pt', note: 'héllo' });
    expect(st.tensors.size).toBe(tensors.length);
    for (const t of tensors) {
      const info = st.tensors.get(t.name)!;
      expect(info.dtype).toBe(t.dtype);
      expect(info.shape).toEqual(t.shape);
      const got = await st.read(t.name);
      expect([...got]).toEqual([...new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)]);
    }
    expect([...toFloat32('F32', await st.read('t1.F32'))]).toEqual([...(samples.F32 as Float32Array)]);
    expect([...toFloat32('F16', await st.read('t2.F16'))]).toEqual([1, -2, 0.5, 65504]);
    expect([...toFloat32('BF16', await st.read('t3.BF16'))]).toEqual([1, -2, 3.140625, -0]);
    expect([...toFloat32('F64', await st.read('t0.F64'))]).toEqual([1.5, -2.25, Infinity]); // 1e300 overflows f32
    expect([...toFloat32('F32', await st.read('scalar'))]).toEqual([42]);
    expect(() => toFloat32('I32', new Uint8Array(4))).toThrow(UnsupportedModelError);
  });

  it('writer rejects inconsistent input', () => {
    expect(() => writeSafetensors([{ name: 'a', dtype: 'F32', shape: [3], data: new Float32Array(2) }])).toThrow(/needs 12/);
    const a = { name: 'a', dtype: 'U8' as const, shape: [1], data: new Uint8Array(1) };
    expect(() => writeSafetensors([a, a])).toThrow(/duplicate/);
  });
});

describe('safetensors sharded checkpoints', () => {
  const shard1 = writeSafetensors([{ name: 'a', dtype: 'F32', shape: [2], data: new Float32Array([1, 2]) }], { format: 'pt' });
  const shard2 = writeSafetensors([
    { name: 'b', dtype: 'F32', shape: [1], data: new Float32Array([3]) },
    { name: 'c', dtype: 'U8', shape: [2], data: new Uint8Array([4, 5]) },
  ]);
  const index = (wm: Record<string, string>): Uint8Array =>
    new TextEncoder().encode(JSON.stringify({ metadata: { total_size: 13 }, weight_map: wm }));

  it('unifies shards listed in model.safetensors.index.json', async () => {
    const ms = filesSource(
      new Map<string, Uint8Array>([
        ['m/model.safetensors.index.json', index({ a: 'model-00001-of-00002.safetensors', b: 'model-00002-of-00002.safetensors', c: 'model-00002-of-00002.safetensors' })],
        ['m/model-00001-of-00002.safetensors', shard1],
        ['m/model-00002-of-00002.safetensors', shard2],
      ]),
    );
    const m = await openSafetensorsModel(ms);
    expect([...m.tensors.keys()].sort()).toEqual(['a', 'b', 'c']);
    expect(m.tensors.get('c')!.file).toBe('model-00002-of-00002.safetensors');
    expect(m.files.length).toBe(2);
    expect(m.metadata).toEqual({ format: 'pt', total_size: 13 });
    expect([...toFloat32('F32', await m.read('a'))]).toEqual([1, 2]);
    expect([...(await m.read('c'))]).toEqual([4, 5]);
    await expect(m.read('zzz')).rejects.toThrow(ModelFormatError);
  });

  it('uses model.safetensors when there is no index', async () => {
    const m = await openSafetensorsModel(filesSource(new Map([['model.safetensors', shard2]])));
    expect([...m.tensors.keys()]).toEqual(['b', 'c']);
  });

  it('rejects bad indexes', async () => {
    const bad = async (files: [string, Uint8Array][], re: RegExp): Promise<void> => {
      await expect(openSafetensorsModel(filesSource(new Map(files), 'x'))).rejects.toThrow(re);
    };
    await bad([['model.safetensors.index.json', index({ b: 's1.safetensors' })], ['s1.safetensors', shard1]], /does not contain it/);
    await bad([['model.safetensors.index.json', index({ a: '../s1.safetensors' })], ['s1.safetensors', shard1]], /invalid file path/);
    await bad([['model.safetensors.index.json', index({ a: 'missing.safetensors' })]], /no file missing/);
    await bad([['model.safetensors.index.json', new TextEncoder().encode('{"weight_map": ')]], /not valid JSON/);
    await bad([['model.safetensors.index.json', new TextEncoder().encode('{}')]], /no weight_map/);
    await bad([['config.json', new Uint8Array(2)]], /no model.safetensors/);
  });
});

describe('malformed safetensors', () => {
  const f32 = (n: number): Uint8Array => new Uint8Array(n * 4);
  it.each([
    ['empty file', new Uint8Array(0), /too short/],
    ['truncated length', new Uint8Array(5), /too short/],
    ['header past EOF', rawFile('{}', new Uint8Array(0), 100), /runs past the end/],
    ['absurd header length', rawFile('{}', new Uint8Array(0), 2 ** 40), /implausible/],
    ['bad JSON', rawFile('{"a": {"dtype": "F32",'), /not valid JSON/],
    ['non-object header', rawFile('[1, 2]'), /not a JSON object/],
    ['unknown dtype', rawFile('{"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}', new Uint8Array(1)), /unknown dtype "F8_E4M3"; supported: F64, F32, F16, BF16, I64, I32, I8, U8/],
    ['negative dim', rawFile('{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}', f32(1)), /shape must be/],
    ['fractional dim', rawFile('{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}', f32(1)), /shape must be/],
    ['missing offsets', rawFile('{"a":{"dtype":"F32","shape":[1]}}', f32(1)), /data_offsets must be/],
    ['size mismatch', rawFile('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', f32(2)), /needs 8/],
    ['reversed offsets', rawFile('{"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}', f32(1)), /span/],
    ['out of bounds', rawFile('{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}', f32(2)), /past the data section/],
    ['overlap', rawFile('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}', f32(3)), /overlap/],
    ['non-string metadata', rawFile('{"__metadata__":{"n":1}}'), /must be a string/],
    ['entry not an object', rawFile('{"a":5}'), /not an object/],
  ])('%s', async (_name, bytes, re) => {
    const e = await formatError(bytes);
    expect(e.message).toMatch(/^safetensors: /);
    expect(e.message).toMatch(re);
    expect(e.code).toBe('model_format');
  });

  it('read of an unknown tensor is a ModelFormatError', async () => {
    const st = await openSafetensors(bytesSource(writeSafetensors([])));
    expect(st.tensors.size).toBe(0);
    await expect(st.read('nope')).rejects.toThrow(/no tensor nope/);
  });

  it('never throws anything but ModelFormatError on truncated or corrupted files', async () => {
    const good = writeSafetensors(
      [
        { name: 'w', dtype: 'F32', shape: [3, 2], data: new Float32Array(6) },
        { name: 'b', dtype: 'BF16', shape: [5], data: new Uint16Array(5) },
      ],
      { format: 'pt' },
    );
    let a = 12345;
    const rand = (n: number): number => ((a = (a * 1103515245 + 12345) >>> 0) % n);
    for (let i = 0; i < 400; i++) {
      const bytes = i < good.length ? good.slice(0, i) : good.slice();
      if (i >= good.length || i % 3 === 0) for (let k = 0; k < 3; k++) bytes[rand(Math.max(1, bytes.length))] = rand(256);
      try {
        const st = await openSafetensors(bytesSource(bytes));
        for (const n of st.tensors.keys()) await st.read(n);
      } catch (e) {
        expect(e).toBeInstanceOf(ModelFormatError);
      }
    }
  });
});

describe('stories260K model.safetensors', () => {
  it('parses with the expected tensors, shapes and values', async () => {
    const m = await openSafetensorsModel(dirSource(STORIES));
    expect(m.tensors.size).toBe(47); // 5 layers x 9 + embed_tokens + norm (lm_head tied)
    expect(m.metadata).toEqual({ format: 'pt' });
    const shape = (n: string): number[] => m.tensors.get(n)!.info.shape;
    expect(shape('model.embed_tokens.weight')).toEqual([512, 64]);
    expect(shape('model.layers.0.self_attn.q_proj.weight')).toEqual([64, 64]);
    expect(shape('model.layers.4.self_attn.k_proj.weight')).toEqual([32, 64]);
    expect(shape('model.layers.2.mlp.gate_proj.weight')).toEqual([172, 64]);
    expect(shape('model.layers.2.mlp.down_proj.weight')).toEqual([64, 172]);
    expect(shape('model.norm.weight')).toEqual([64]);
    expect(m.tensors.has('lm_head.weight')).toBe(false);
    for (const { info } of m.tensors.values()) expect(info.dtype).toBe('F32');
    const norm = toFloat32('F32', await m.read('model.norm.weight'));
    expect(norm[0]).toBeCloseTo(2.4583089351654053, 7);
    expect(norm[63]).toBeCloseTo(1.7077769041061401, 7);
    expect(norm.reduce((s, v) => s + v, 0)).toBeCloseTo(115.95276230573654, 3);
    const emb = toFloat32('F32', await m.read('model.embed_tokens.weight'));
    expect(emb.length).toBe(32768);
    expect(emb[1]).toBeCloseTo(0.5617791414260864, 7);
    expect(emb.reduce((s, v) => s + v, 0)).toBeCloseTo(-749.7675120187923, 2);
  });
});
