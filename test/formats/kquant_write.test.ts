/**
 * The Q4_K / Q5_K / Q6_K writers (core/formats/gguf_kquant_write.ts) against the GGUF dequantizer:
 * random rows (Gaussian, shifted, with outliers, all-zero and constant super-blocks) round-trip
 * within each format's resolution — RMS error under 1/9 (Q4_K: 4-bit levels plus a min per 32),
 * 1/18 (Q5_K: 5-bit levels plus a min per 32) and 1/30 (Q6_K: 6-bit levels per 16) of the rows' RMS — and every Q6_K element within half a
 * level of its sub-block. hfToGguf writes K-quants where rows are whole super-blocks and falls
 * back to Q8_0 (or F16) elsewhere; a K-quant GGUF written here loads, keeps its super-blocks on
 * the device, and its logits match the plain-TS reference on the dequantized file weights
 * (within 2e-3 of max |logit|: the kernels decode blocks in their own f32 operation order).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UnsupportedModelError } from '../../core/errors.ts';
import { openGguf } from '../../core/formats/gguf.ts';
import { kquantFallback, quantizeQ4_K, quantizeQ5_K, quantizeQ6_K } from '../../core/formats/gguf_kquant_write.ts';
import { dequantizeGguf, f16ToF32 } from '../../core/formats/gguf_quants.ts';
import { hfToGguf } from '../../core/formats/gguf_write.ts';
import { parseDecoderConfig } from '../../core/formats/hf_config.ts';
import { openGgufWeights } from '../../core/models/gguf_weights.ts';
import { hostToF32 } from '../../core/models/host_tensor.ts';
import { loadDecoder } from '../../core/api/load_decoder.ts';
import { fileSource, openModelPath } from '../../server/fs_source.ts';
import { gpuFor, randn, TEST_BACKENDS } from '../helpers/gpu.ts';
import { randomLlamaTensors, smallLlamaConfig } from '../helpers/realsize_ckpt.ts';
import { absMax, allPositionLogits, fixtureDir, maxAbsDiff, referenceRun } from '../helpers/tiny_decoder.ts';
import { readFileSync } from 'node:fs';

function rows(seed: number): Float32Array {
  const x = randn(256 * 24, seed);
  for (let i = 256 * 4; i < 256 * 8; i++) x[i] = x[i]! + 3; // shifted: the Q4_K min matters
  for (let i = 256 * 8; i < 256 * 24; i += 97) x[i] = x[i]! * 12; // outliers
  x.fill(0, 256 * 10, 256 * 11); // an all-zero super-block
  x.fill(0.75, 256 * 11, 256 * 12); // a constant one
  return x;
}

function rms(a: ArrayLike<number>, b?: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += (a[i]! - (b ? b[i]! : 0)) ** 2;
  return Math.sqrt(s / a.length);
}

describe('K-quant writers', () => {
  it.each([
    ['Q4_K', quantizeQ4_K, 144, 1 / 9],
    ['Q5_K', quantizeQ5_K, 176, 1 / 18],
    ['Q6_K', quantizeQ6_K, 210, 1 / 30],
  ] as const)('%s round-trips within its resolution', (type, quantize, blockBytes, bound) => {
    for (const seed of [1, 2, 3]) {
      const x = rows(seed);
      const q = quantize(x);
      expect(q.byteLength).toBe((x.length / 256) * blockBytes);
      const y = dequantizeGguf(type, q, x.length);
      expect(rms(x, y) / rms(x)).toBeLessThan(bound);
      // The all-zero super-block decodes to zeros, the constant one to nearly its value.
      for (let i = 256 * 10; i < 256 * 11; i++) expect(y[i] === 0).toBe(true);
      for (let i = 256 * 11; i < 256 * 12; i++) expect(Math.abs(y[i]! - 0.75)).toBeLessThan(0.75 * 0.02);
    }
  });

  it('each bit per weight lowers the error: Q4_K > Q5_K > Q6_K on the same rows', () => {
    const x = rows(4);
    const err = (['Q4_K', 'Q5_K', 'Q6_K'] as const).map((t, i) => rms(x, dequantizeGguf(t, [quantizeQ4_K, quantizeQ5_K, quantizeQ6_K][i]!(x), x.length)));
    expect(err[1]!).toBeLessThan(err[0]! * 0.7);
    expect(err[2]!).toBeLessThan(err[1]!);
  });

  it('Q6_K: every element within half a level of its sub-block (no clamping at these scales)', () => {
    const x = randn(256 * 8, 9);
    const q = quantizeQ6_K(x);
    const y = dequantizeGguf('Q6_K', q, x.length);
    for (let b = 0; b < 8; b++) {
      const d = f16ToF32(q[b * 210 + 208]! | (q[b * 210 + 209]! << 8));
      for (let j = 0; j < 16; j++) {
        const step = Math.abs(d * ((q[b * 210 + 192 + j]! << 24) >> 24));
        for (let l = 0; l < 16; l++) {
          const i = b * 256 + 16 * j + l;
          expect(Math.abs(x[i]! - y[i]!)).toBeLessThanOrEqual(step / 2 + 1e-6);
        }
      }
    }
  });

  it('falls back where rows are not whole super-blocks: Q8_0, else F16', () => {
    expect(kquantFallback('Q4_K', 2048)).toBe('Q4_K');
    expect(kquantFallback('Q6_K', 4864)).toBe('Q6_K');
    expect(kquantFallback('Q4_K', 896)).toBe('Q8_0'); // Qwen2.5-0.5B's hidden size
    expect(kquantFallback('Q6_K', 896)).toBe('Q8_0');
    expect(kquantFallback('Q4_K', 100)).toBe('F16');
  });
});

describe('a K-quant GGUF written by hfToGguf', () => {
  let dir: string;
  const raw = { ...smallLlamaConfig(2), intermediate_size: 640 }; // down_proj rows of 640: not whole super-blocks
  const cfg = parseDecoderConfig(raw);
  const tensors = randomLlamaTensors(raw);
  // The decode megakernel (f32 only) would otherwise take this small model on the emulators.
  const NO_MEGAKERNEL = { decodeMegakernel: 'off' } as const;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'weft-kq-'));
    const tok = JSON.parse(readFileSync(join(fixtureDir('llama'), 'tokenizer.json'), 'utf8')) as unknown;
    // As Q4_K_M files do: Q6_K for the LM head, Q4_K elsewhere.
    writeFileSync(join(dir, 'model.gguf'), hfToGguf({ config: cfg, tensors, tokenizer: tok, type: 'Q4_K', typeOf: (n) => (/lm_head/.test(n) ? 'Q6_K' : undefined) }));
    writeFileSync(join(dir, 'q4_0.gguf'), hfToGguf({ config: cfg, tensors, tokenizer: tok, type: 'Q4_0' }));
    writeFileSync(join(dir, 'q5_k.gguf'), hfToGguf({ config: cfg, tensors, tokenizer: tok, type: 'Q5_K' }));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('has K-quant tensors where rows allow, Q8_0 elsewhere', async () => {
    const g = await openGguf(await fileSource(join(dir, 'model.gguf')));
    expect(g.tensors.get('blk.0.attn_q.weight')!.type).toBe('Q4_K');
    expect(g.tensors.get('blk.0.attn_v.weight')!.type).toBe('Q4_K');
    expect(g.tensors.get('output.weight')!.type).toBe('Q6_K');
    expect(g.tensors.get('blk.0.ffn_down.weight')!.type).toBe('Q8_0');
    expect(g.tensors.get('blk.0.attn_norm.weight')!.type).toBe('F32');
    expect(g.metadata.get('general.file_type')).toBe(14);
  });

  it('a quantized matrix over the device tensor limit is refused with the numbers (only float matrices split)', async () => {
    const ctx = await gpuFor(TEST_BACKENDS[0]!);
    const err = await loadDecoder(ctx, await openModelPath(join(dir, 'model.gguf')), { maxSeqs: 8, maxContext: 64, maxTensorBytes: 20_000, decode: NO_MEGAKERNEL }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnsupportedModelError);
    expect((err as UnsupportedModelError).message).toMatch(/q4_k matrix \[512, 256\] exceeds the device's 20000-byte tensor limit/);
  });

  it.each(TEST_BACKENDS)('loads with its blocks on the device; logits equal the reference on the file weights (%s)', async (backend) => {
    const ctx = await gpuFor(backend);
    const d = await loadDecoder(ctx, await openModelPath(join(dir, 'model.gguf')), { maxSeqs: 8, maxContext: 64, dtype: 'auto', decode: NO_MEGAKERNEL });
    try {
      const w = await openGgufWeights(await fileSource(join(dir, 'model.gguf')));
      const cache = new Map<string, Float32Array>();
      const get = (n: string): Float32Array => {
        const v = cache.get(n);
        if (!v) throw new Error(`missing ${n}`);
        return v;
      };
      for (const n of tensors.keys()) cache.set(n, hostToF32(await w.weights.load(n)));
      const ids = [1, 17, 99, 300, 5];
      const ref = referenceRun(cfg, get, ids, 0);
      const got = await allPositionLogits(d, ids);
      expect(d.weights.layers[0]!.qkv.w.dtype).toBe('q4_k');
      expect(d.weights.layers[0]!.down.w.dtype).toBe('q8_0');
      expect(d.weights.head.w.dtype).toBe('q6_k');
      // The kernels decode the blocks in registers (f32, their own operation order).
      expect(maxAbsDiff(got, ref.logits)).toBeLessThanOrEqual(2e-3 * absMax(ref.logits));
      // ... and the K-quant file is closer to the unquantized model than the same weights in
      // Q4_0 (ggml's reference quantizer, 4.5 bits per weight against Q4_K's 4.5 + Q6_K head).
      const f32 = referenceRun(cfg, (n) => tensors.get(n)!.data, ids, 0).logits;
      const q40 = await openGgufWeights(await fileSource(join(dir, 'q4_0.gguf')));
      const q40w = new Map<string, Float32Array>();
      for (const n of tensors.keys()) q40w.set(n, hostToF32(await q40.weights.load(n)));
      const refQ40 = referenceRun(cfg, (n) => q40w.get(n)!, ids, 0).logits;
      const [errK, err40] = [maxAbsDiff(ref.logits, f32), maxAbsDiff(refQ40, f32)];
      console.info(`K-quant file vs f32: max |dLogit| ${errK.toFixed(4)}; Q4_0 file: ${err40.toFixed(4)} (max |logit| ${absMax(f32).toFixed(3)})`);
      expect(errK).toBeLessThan(err40);
    } finally {
      d.destroy();
    }
  });

  it.each(TEST_BACKENDS)('a Q5_K file runs from its blocks; logits equal the reference on the file weights (%s)', async (backend) => {
    const path = join(dir, 'q5_k.gguf');
    const g = await openGguf(await fileSource(path));
    expect(g.tensors.get('blk.0.attn_q.weight')!.type).toBe('Q5_K');
    expect(g.metadata.get('general.file_type')).toBe(16);
    const ctx = await gpuFor(backend);
    const d = await loadDecoder(ctx, await openModelPath(path), { maxSeqs: 8, maxContext: 64, dtype: 'auto', decode: NO_MEGAKERNEL });
    try {
      const w = await openGgufWeights(await fileSource(path));
      const fileWeights = new Map<string, Float32Array>();
      for (const n of tensors.keys()) fileWeights.set(n, hostToF32(await w.weights.load(n)));
      const ids = [1, 17, 99, 300, 5];
      const ref = referenceRun(cfg, (n) => fileWeights.get(n)!, ids, 0);
      expect(d.weights.layers[0]!.qkv.w.dtype).toBe('q5_k');
      expect(d.weights.head.w.dtype).toBe('q5_k');
      expect(maxAbsDiff(await allPositionLogits(d, ids), ref.logits)).toBeLessThanOrEqual(2e-3 * absMax(ref.logits));
    } finally {
      d.destroy();
    }
  });
});
