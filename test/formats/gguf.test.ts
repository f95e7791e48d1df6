/**
 * GGUF reader and writer: metadata of every value type and tensors of every
 * supported ggml type round-trip; malformed files (magic, version, truncation,
 * bad types, unaligned offsets, impossible counts) raise typed errors and never
 * crash; headers larger than the first read are handled; GGUF -> DecoderConfig.
 */
import { describe, expect, it } from 'vitest';
import { ModelFormatError, UnsupportedModelError } from '../../core/errors.ts';
import { ggufToDecoderConfig, openGguf, type GgufValue } from '../../core/formats/gguf.ts';
import { decodeF16, dequantizeGguf, encodeF16, f32ToBf16, bf16ToF32, quantizeQ4_0, quantizeQ8_0 } from '../../core/formats/gguf_quants.ts';
import { writeGguf, type GgufMetaEntry } from '../../core/formats/gguf_write.ts';
import { bytesSource, type ByteSource } from '../../core/formats/source.ts';

function randf(n: number, seed: number): Float32Array {
  let a = seed;
  return Float32Array.from({ length: n }, () => ((a = (a * 1103515245 + 12345) >>> 0) / 2 ** 32 - 0.5) * 2);
}

const ALL_TYPES: GgufMetaEntry[] = [
  ['t.u8', 'u8', 200],
  ['t.i8', 'i8', -5],
  ['t.u16', 'u16', 65535],
  ['t.i16', 'i16', -32768],
  ['t.u32', 'u32', 4294967295],
  ['t.i32', 'i32', -2147483648],
  ['t.f32', 'f32', 1.5],
  ['t.bool', 'bool', true],
  ['t.false', 'bool', false],
  ['t.string', 'string', 'héllo ▁wörld 🙂'],
  ['t.u64.small', 'u64', 12345],
  ['t.u64.big', 'u64', 2n ** 60n + 3n],
  ['t.i64.small', 'i64', -7],
  ['t.i64.big', 'i64', -(2n ** 60n)],
  ['t.f64', 'f64', Math.PI],
  ['t.arr.string', 'array<string>', ['<unk>', '<s>', '', '▁the']],
  ['t.arr.i32', 'array<i32>', [1, -2, 3]],
  ['t.arr.f32', 'array<f32>', [0.5, -1000]],
  ['t.arr.empty', 'array<u8>', []],
  ['t.arr.nested', 'array<array<u8>>', [[1, 2], [], [3]]],
];

async function open(bytes: Uint8Array): Promise<Awaited<ReturnType<typeof openGguf>>> {
  return openGguf(bytesSource(bytes));
}

/** Byte offset right after tensor `name`'s name in the tensor-info section. */
function infoAt(file: Uint8Array, name: string): number {
  const needle = new TextEncoder().encode(name);
  outer: for (let i = file.length - needle.length; i >= 0; i--) {
    for (let k = 0; k < needle.length; k++) if (file[i + k] !== needle[k]) continue outer;
    return i + needle.length;
  }
  throw new Error(`no ${name}`);
}

describe('GGUF round trip', () => {
  it('metadata of every value type keeps values and types', async () => {
    const g = await open(writeGguf(ALL_TYPES, []));
    expect(g.version).toBe(3);
    expect(g.tensors.size).toBe(0);
    for (const [k, t, v] of ALL_TYPES) {
      expect(g.metadataTypes.get(k), k).toBe(t);
      expect(g.metadata.get(k), k).toEqual(v);
    }
    expect(typeof g.metadata.get('t.u64.small')).toBe('number');
    expect(typeof g.metadata.get('t.u64.big')).toBe('bigint');
  });

  it('tensors of every type: shapes, offsets, bytes and dequantized values', async () => {
    const x = randf(2 * 256, 1);
    const q4k = new Uint8Array(144 * 2).map((_, i) => (i * 37 + 11) & 0xff);
    const q6k = new Uint8Array(210).map((_, i) => (i * 53 + 7) & 0xff);
    for (const o of [0, 144]) q4k.set(encodeF16([0.01, 0.002]), o); // sane d, dmin
    q6k.set(encodeF16([0.003]), 208);
    const file = writeGguf(
      [['general.architecture', 'string', 'llama']],
      [
        { name: 'f32', shape: [2, 256], type: 'F32', data: x },
        { name: 'f16', shape: [4, 8, 16], type: 'F16', data: x },
        { name: 'bf16', shape: [512], type: 'BF16', data: x },
        { name: 'q8', shape: [2, 256], type: 'Q8_0', data: x },
        { name: 'q4', shape: [16, 32], type: 'Q4_0', data: x },
        { name: 'q4k', shape: [2, 256], type: 'Q4_K', raw: q4k },
        { name: 'q6k', shape: [1, 256], type: 'Q6_K', raw: q6k },
        { name: 'odd', shape: [3], type: 'F32', data: new Float32Array([1, 2, 3]) }, // forces padding
        { name: 'after', shape: [1], type: 'F32', data: new Float32Array([9]) },
      ],
    );
    const g = await open(file);
    expect(g.alignment).toBe(32);
    expect(g.dataOffset % 32).toBe(0);
    const t = (n: string) => g.tensors.get(n)!;
    expect(t('f16').shape).toEqual([4, 8, 16]);
    expect(t('f16').dims).toEqual([16, 8, 4]);
    expect(t('q4k').type).toBe('Q4_K');
    expect(t('q8').end - t('q8').begin).toBe(16 * 34);
    for (const ti of g.tensors.values()) expect((ti.begin - g.dataOffset) % 32).toBe(0);

    expect([...(await g.readTensorF32('f32'))]).toEqual([...x]);
    expect([...(await g.readTensorF32('f16'))]).toEqual([...decodeF16(encodeF16(x))]);
    expect([...(await g.readTensorF32('bf16'))]).toEqual([...x].map((v) => bf16ToF32(f32ToBf16(v))));
    expect([...(await g.readTensor('q8'))]).toEqual([...quantizeQ8_0(x)]);
    expect([...(await g.readTensor('q4'))]).toEqual([...quantizeQ4_0(x)]);
    expect([...(await g.readTensorF32('q8'))]).toEqual([...dequantizeGguf('Q8_0', quantizeQ8_0(x), 512)]);
    expect([...(await g.readTensor('q4k'))]).toEqual([...q4k]);
    expect([...(await g.readTensorF32('q4k'))]).toEqual([...dequantizeGguf('Q4_K', q4k, 512)]);
    expect([...(await g.readTensorF32('q6k'))]).toEqual([...dequantizeGguf('Q6_K', q6k, 256)]);
    expect([...(await g.readTensorF32('after'))]).toEqual([9]);
    await expect(g.readTensor('nope')).rejects.toThrow(/no tensor nope/);
  });

  it('honours general.alignment', async () => {
    const g = await open(
      writeGguf(
        [['general.alignment', 'u32', 64]],
        [
          { name: 'a', shape: [3], type: 'F32', data: new Float32Array([1, 2, 3]) },
          { name: 'b', shape: [2], type: 'F32', data: new Float32Array([4, 5]) },
        ],
      ),
    );
    expect(g.alignment).toBe(64);
    expect(g.dataOffset % 64).toBe(0);
    expect(g.tensors.get('b')!.offset).toBe(64);
    expect([...(await g.readTensorF32('b'))]).toEqual([4, 5]);
  });

  it('reads headers larger than the first 1 MiB read, reading only a prefix', async () => {
    const tokens = Array.from({ length: 120_000 }, (_, i) => `token_${i}_▁x`);
    const file = writeGguf(
      [['tokenizer.ggml.tokens', 'array<string>', tokens]],
      [{ name: 'w', shape: [1 << 20], type: 'F32', data: new Float32Array(1 << 20) }],
    );
    const inner = bytesSource(file);
    const reads: [number, number][] = [];
    const src: ByteSource = { size: inner.size, read: (o, l) => (reads.push([o, l]), inner.read(o, l)) };
    const g = await openGguf(src);
    expect((g.metadata.get('tokenizer.ggml.tokens') as string[])[119_999]).toBe('token_119999_▁x');
    expect(reads.length).toBeGreaterThan(1);
    expect(Math.max(...reads.map(([, l]) => l))).toBeLessThan(file.length); // never the whole file
  });
});

describe('malformed GGUF', () => {
  const good = writeGguf(
    [
      ['general.architecture', 'string', 'llama'],
      ['a.flag', 'bool', true],
    ],
    [{ name: 'weight.x', shape: [2, 32], type: 'Q8_0', data: randf(64, 2) }],
  );
  const patch = (f: (b: Uint8Array, dv: DataView) => void): Uint8Array => {
    const b = good.slice();
    f(b, new DataView(b.buffer));
    return b;
  };
  const err = async (bytes: Uint8Array): Promise<Error> => {
    const e = await open(bytes).then(() => undefined, (x: unknown) => x as Error);
    expect(e).toBeDefined();
    return e!;
  };

  it.each([
    ['wrong magic', patch((b) => b.set([0x47, 0x47, 0x4d, 0x4c], 0)), /not a GGUF file: magic is "GGML"/],
    ['version 1', patch((_, dv) => dv.setUint32(4, 1, true)), /unsupported GGUF version 1; supported: 2, 3 \(GGUF v1/],
    ['version 4', patch((_, dv) => dv.setUint32(4, 4, true)), /unsupported GGUF version 4/],
    ['big-endian', patch((_, dv) => dv.setUint32(4, 3, false)), /big-endian/],
    ['too short', good.slice(0, 20), /shorter than the 24-byte header/],
    ['huge tensor count', patch((_, dv) => dv.setBigUint64(8, 2n ** 40n, true)), /tensor count .* impossible/],
    ['huge kv count', patch((_, dv) => dv.setBigUint64(16, 2n ** 62n, true)), /metadata count .* impossible/],
    ['huge key length', patch((_, dv) => dv.setBigUint64(24, 2n ** 50n, true)), /length .* impossible/],
    ['unknown value type', patch((b, dv) => dv.setUint32(infoAt(b, 'general.architecture'), 13, true)), /unknown value type 13/],
    ['bad bool', patch((b) => (b[infoAt(b, 'a.flag') + 4] = 2)), /bool byte 2/],
    ['5 dimensions', patch((b, dv) => dv.setUint32(infoAt(b, 'weight.x'), 5, true)), /5 dimensions/],
    ['unaligned offset', patch((b, dv) => dv.setBigUint64(infoAt(b, 'weight.x') + 4 + 16 + 4, 4n, true)), /not 32-aligned/],
    ['row not whole blocks', patch((b, dv) => dv.setBigUint64(infoAt(b, 'weight.x') + 4, 31n, true)), /not a multiple of the Q8_0 block/],
    ['data past EOF', good.slice(0, good.length - 40), /runs past the end/],
  ])('%s', async (_n, bytes, re) => {
    const e = await err(bytes);
    expect(e).toBeInstanceOf(ModelFormatError);
    expect(e.message).toMatch(re);
  });

  it('an unknown ggml type is UnsupportedModelError naming the supported ones', async () => {
    const e = await err(patch((b, dv) => dv.setUint32(infoAt(b, 'weight.x') + 4 + 16, 16, true)));
    expect(e).toBeInstanceOf(UnsupportedModelError);
    expect(e.message).toMatch(/type #16.*supported: F32, F16, Q4_0/);
  });

  it('bad general.alignment and duplicate keys are rejected', async () => {
    await expect(open(writeGguf([['general.alignment', 'u32', 48]], []))).rejects.toThrow(/power-of-two u32/);
    await expect(open(writeGguf([['general.alignment', 'u64', 64]], []))).rejects.toThrow(/power-of-two u32/);
    await expect(open(writeGguf([['k', 'u8', 1], ['k', 'u8', 2]], []))).rejects.toThrow(/appears twice/);
    const two = [{ name: 'w', shape: [1], type: 'F32' as const, data: new Float32Array(1) }];
    await expect(open(writeGguf([], [...two, ...two]))).rejects.toThrow(/appears twice/);
  });

  it('every truncation before the end of the last tensor is a ModelFormatError', async () => {
    const end = (await open(good)).tensors.get('weight.x')!.end;
    expect(end).toBeLessThanOrEqual(good.length); // the rest is trailing alignment padding
    for (let n = 24; n < end; n++) {
      const e = await open(good.slice(0, n)).then(() => undefined, (x: unknown) => x);
      expect(e, `cut at ${n}`).toBeInstanceOf(ModelFormatError);
    }
  });

  it('random corruption never raises anything but typed format errors', async () => {
    let a = 99;
    const rand = (n: number): number => ((a = (a * 1103515245 + 12345) >>> 0) % n);
    for (let i = 0; i < 500; i++) {
      const b = good.slice();
      for (let k = 0; k < 1 + (i % 4); k++) b[rand(Math.min(b.length, 200))] = rand(256);
      try {
        const g = await open(b);
        for (const n of g.tensors.keys()) await g.readTensorF32(n);
      } catch (e) {
        expect(e instanceof ModelFormatError || e instanceof UnsupportedModelError, String(e)).toBe(true);
      }
    }
  });
});

describe('ggufToDecoderConfig', () => {
  const base = (arch: string, extra: [string, GgufValue][] = []): Map<string, GgufValue> =>
    new Map<string, GgufValue>([
      ['general.architecture', arch],
      [`${arch}.embedding_length`, 1024],
      [`${arch}.block_count`, 28],
      [`${arch}.attention.head_count`, 16],
      [`${arch}.attention.head_count_kv`, 8],
      [`${arch}.feed_forward_length`, 3072],
      [`${arch}.context_length`, 40960],
      [`${arch}.attention.layer_norm_rms_epsilon`, 1e-6],
      [`${arch}.rope.freq_base`, 1000000],
      ['tokenizer.ggml.tokens', ['a', 'b', 'c']],
      ['tokenizer.ggml.bos_token_id', 1],
      ['tokenizer.ggml.eos_token_id', 2],
      ...extra,
    ]);

  it('maps qwen3 metadata, reading features off the tensor names', () => {
    const md = base('qwen3', [
      ['qwen3.attention.key_length', 128],
      ['qwen3.attention.value_length', 128],
      ['qwen3.rope.dimension_count', 128],
      ['tokenizer.ggml.eot_token_id', 7],
      ['general.file_type', 32],
    ]);
    const c = ggufToDecoderConfig(md, ['token_embd.weight', 'blk.0.attn_q_norm.weight', 'blk.0.attn_q.weight']);
    expect(c).toEqual({
      architecture: 'Qwen3ForCausalLM',
      hiddenSize: 1024,
      layers: 28,
      heads: 16,
      kvHeads: 8,
      headDim: 128,
      intermediateSize: 3072,
      vocabSize: 3,
      maxPositions: 40960,
      rmsEps: 1e-6,
      ropeTheta: 1000000,
      ropeScaling: null,
      tieEmbeddings: true,
      attentionBias: false,
      qkNorm: true,
      slidingWindow: null,
      hiddenAct: 'silu',
      bosTokenId: 1,
      eosTokenIds: [2, 7],
      torchDtype: 'bfloat16',
    });
  });

  it('defaults per arch without tensor names; per-layer arrays; linear rope; sliding window', () => {
    const q2 = ggufToDecoderConfig(base('qwen2', [['qwen2.attention.head_count_kv', [8, 8, 8]]]));
    expect([q2.architecture, q2.attentionBias, q2.qkNorm, q2.tieEmbeddings, q2.headDim, q2.kvHeads]).toEqual(['Qwen2ForCausalLM', true, false, false, 64, 8]);
    const m = ggufToDecoderConfig(
      base('mistral', [
        ['mistral.rope.scaling.type', 'linear'],
        ['mistral.rope.scaling.factor', 4],
        ['mistral.attention.sliding_window', 4096],
        ['mistral.vocab_size', 32000],
      ]),
    );
    expect([m.architecture, m.ropeScaling, m.slidingWindow, m.vocabSize]).toEqual(['MistralForCausalLM', { type: 'linear', factor: 4 }, 4096, 32000]);
  });

  it('rejects unsupported and incomplete metadata with typed errors', () => {
    const e = (() => {
      try {
        ggufToDecoderConfig(base('gemma'));
      } catch (x) {
        return x as Error;
      }
    })();
    expect(e).toBeInstanceOf(UnsupportedModelError);
    expect(e!.message).toMatch(/"gemma"; supported: llama, mistral, qwen2, qwen3/);
    const md = base('llama');
    md.delete('llama.block_count');
    expect(() => ggufToDecoderConfig(md)).toThrow(/lacks llama.block_count/);
    expect(() => ggufToDecoderConfig(base('llama', [['llama.attention.head_count_kv', [8, 4]]]))).toThrow(UnsupportedModelError);
    expect(() => ggufToDecoderConfig(base('llama', [['llama.rope.scaling.type', 'yarn']]))).toThrow(/yarn/);
    expect(() => ggufToDecoderConfig(base('llama', [['llama.rope.dimension_count', 32]]))).toThrow(/partial rotary/);
    expect(() => ggufToDecoderConfig(base('llama', [['llama.block_count', 'x']]))).toThrow(ModelFormatError);
  });
});
