/**
 * Checkpoints as users download them, loaded compactly: a bf16 checkpoint sharded in four
 * safetensors files runs as f16 on the device (dtype f16, what `auto` picks on a GPU; device weight bytes within 1.05x of the
 * file's) while the loader never holds more than about one shard of host memory, and a GGUF
 * mixing Q4_K / Q5_K / Q6_K tensors (as Q4_K_M files do) keeps its super-blocks on the device.
 * Logits are compared with the plain-TS reference on the same (dequantized) weights. Bad
 * checkpoints fail with typed errors that name the file, tensor and numbers.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelFormatError, UnsupportedModelError } from '../../core/errors.ts';
import { parseDecoderConfig } from '../../core/formats/hf_config.ts';
import { decodeBF16, encodeBF16 } from '../../core/formats/gguf_quants.ts';
import { openGgufWeights } from '../../core/models/gguf_weights.ts';
import { hostToF32 } from '../../core/models/host_tensor.ts';
import { loadDecoder } from '../../core/api/load_decoder.ts';
import { dirSource, openModelPath } from '../../server/fs_source.ts';
import { gpuFor, TEST_BACKENDS } from '../helpers/gpu.ts';
import { randomLlamaTensors, smallLlamaConfig, writeKQuantGguf, writeShardedBf16 } from '../helpers/realsize_ckpt.ts';
import { absMax, allPositionLogits, maxAbsDiff, referenceRun } from '../helpers/tiny_decoder.ts';

const IDS = [1, 17, 99, 300, 5];
/** Host bytes the loader may hold beyond the largest shard (fused q/k/v and gate/up copies). */
const HOST_MARGIN = 1 << 20;

// The decode megakernel (f32 only) would otherwise take this small model on the emulators.
const OFF = { decodeMegakernel: 'off' } as const;

let root: string;
const raw = smallLlamaConfig(4);
const cfg = parseDecoderConfig(raw);
const tensors = randomLlamaTensors(raw);
let shardSizes: number[] = [];

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'weft-realsize-'));
  mkdirSync(join(root, 'bf16'));
  shardSizes = writeShardedBf16(join(root, 'bf16'), raw, tensors, 4);
  writeKQuantGguf(join(root, 'mixed.gguf'), cfg, tensors, (n) =>
    /layers\.1\.self_attn\.v_proj|down_proj|lm_head/.test(n) ? 'Q6_K' : /gate_proj|up_proj/.test(n) ? 'Q5_K' : 'Q4_K',
  );
});
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

describe.each(TEST_BACKENDS)('real-layout checkpoints on %s', (backend) => {
  it('sharded bf16 safetensors: f16 on the device at ~file size, host peak within a shard, logits match', async () => {
    const ctx = await gpuFor(backend);
    // dtype f16: what `auto` picks for such a checkpoint on a GPU (on CPU emulation `auto` keeps
    // models of at most 256 MiB of f32 in f32 for the emulator paths; the slow group checks auto).
    const d = await loadDecoder(ctx, dirSource(join(root, 'bf16')), { maxSeqs: 8, maxContext: 64, dtype: 'f16', decode: OFF });
    try {
      expect(d.weights.layers[0]!.qkv.w.dtype).toBe('f16');
      expect(d.weights.head.w.dtype).toBe('f16');
      expect(d.weights.embed.dtype).toBe('f16');
      const fileTensorBytes = [...tensors.values()].reduce((a, t) => a + 2 * t.data.length, 0);
      expect(d.loadStats.deviceWeightBytes / fileTensorBytes).toBeLessThanOrEqual(1.05);
      const largest = Math.max(...shardSizes);
      expect(d.loadStats.peakHostBytes).toBeGreaterThan(0);
      expect(d.loadStats.peakHostBytes).toBeLessThanOrEqual(largest + HOST_MARGIN);
      expect(d.loadStats.peakHostBytes).toBeLessThan(shardSizes.reduce((a, b) => a + b, 0) / 2);
      // Reference on the bf16 values (bf16 -> f16 is exact at these magnitudes but for f16 subnormals).
      const bf = new Map([...tensors].map(([n, t]) => [n, decodeBF16(encodeBF16(t.data))]));
      const ref = referenceRun(cfg, (n) => bf.get(n)!, IDS, 1);
      const got = await allPositionLogits(d, IDS);
      const err = maxAbsDiff(got, ref.logits) / absMax(ref.logits);
      expect(err).toBeLessThan(2e-3);
    } finally {
      d.destroy();
    }
  });

  it('GGUF with Q4_K / Q5_K / Q6_K tensors: blocks kept on the device, logits match the dequantized reference', async () => {
    const ctx = await gpuFor(backend);
    const ms = await openModelPath(join(root, 'mixed.gguf'));
    const d = await loadDecoder(ctx, ms, { maxSeqs: 8, maxContext: 64, decode: OFF });
    try {
      const L = d.weights.layers;
      expect(L[0]!.qkv.w.dtype).toBe('q4_k');
      expect(L[0]!.qkv.parts).toBeUndefined();
      // v is Q6_K there: the parts keep their blocks, each into its columns of the qkv output.
      expect(L[1]!.qkv.parts!.map((p) => [p.w.dtype, p.col])).toEqual([['q4_k', 0], ['q4_k', cfg.heads * cfg.headDim], ['q6_k', (cfg.heads + cfg.kvHeads) * cfg.headDim]]);
      expect(L[0]!.gu.w.dtype).toBe('q5_k');
      expect(L[0]!.down.w.dtype).toBe('q6_k');
      expect(d.weights.embed.dtype).toBe('q4_k');
      expect(d.weights.head.w.dtype).toBe('q6_k');
      const g = await openGgufWeights(await (await openModelPath(join(root, 'mixed.gguf'))).open('model.gguf'));
      const deq = new Map<string, Float32Array>();
      for (const n of tensors.keys()) deq.set(n, hostToF32(await g.weights.load(n)));
      const ref = referenceRun(cfg, (n) => deq.get(n)!, IDS, 1);
      const got = await allPositionLogits(d, IDS);
      // f32 kernels on the dequantized blocks, every layer (before parts, layer 1's mixed qkv was
      // joined in f16: 5e-3 was its tolerance).
      const err = maxAbsDiff(got, ref.logits) / absMax(ref.logits);
      console.info(`mixed K-quant GGUF: max |Δlogit| / max |ref| = ${err.toExponential(2)}`);
      expect(err).toBeLessThan(1e-4);
    } finally {
      d.destroy();
    }
  });
});

describe('bad checkpoints fail with typed errors naming file, tensor and numbers', () => {
  const copyBf16 = (name: string): string => {
    const dir = join(root, name);
    mkdirSync(dir);
    for (const f of ['config.json', 'tokenizer.json', 'tokenizer_config.json', 'model.safetensors.index.json', ...shardSizes.map((_, i) => `model-0000${i + 1}-of-00004.safetensors`)]) {
      writeFileSync(join(dir, f), readFileSync(join(root, 'bf16', f)));
    }
    return dir;
  };

  it('a missing shard', async () => {
    const dir = copyBf16('missing');
    unlinkSync(join(dir, 'model-00003-of-00004.safetensors'));
    const ctx = await gpuFor(TEST_BACKENDS[0]!);
    await expect(loadDecoder(ctx, dirSource(dir))).rejects.toThrow(/model-00003-of-00004\.safetensors/);
  });

  it('a truncated shard', async () => {
    const dir = copyBf16('truncated');
    const f = join(dir, 'model-00002-of-00004.safetensors');
    truncateSync(f, shardSizes[1]! - 1000);
    const ctx = await gpuFor(TEST_BACKENDS[0]!);
    const e = await loadDecoder(ctx, dirSource(dir)).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ModelFormatError);
    expect(String((e as Error).message)).toMatch(/model-00002-of-00004\.safetensors/);
  });

  it('a tensor of the wrong shape, before any weight is uploaded', async () => {
    const dir = copyBf16('shape');
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...raw, intermediate_size: 768 }));
    const ctx = await gpuFor(TEST_BACKENDS[0]!);
    const e = await loadDecoder(ctx, dirSource(dir)).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ModelFormatError);
    expect((e as Error).message).toMatch(/model\.layers\.0\.mlp\.(gate|up)_proj\.weight in model-0000\d-of-00004\.safetensors has shape \[512, 256\] \(131072 elements\); the config needs 196608/);
  });

  it('an unknown architecture', async () => {
    const dir = copyBf16('arch');
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...raw, architectures: ['FooForCausalLM'] }));
    const ctx = await gpuFor(TEST_BACKENDS[0]!);
    await expect(loadDecoder(ctx, dirSource(dir))).rejects.toBeInstanceOf(UnsupportedModelError);
  });

  it('a GGUF tensor of a quant type without kernel or dequantizer', async () => {
    const path = join(root, 'q2k.gguf');
    writeKQuantGguf(path, cfg, tensors, (n) => (n === 'model.layers.2.mlp.down_proj.weight' ? 'Q2_K' : 'Q4_K'));
    const ctx = await gpuFor(TEST_BACKENDS[0]!);
    const e = await openModelPath(path).then((ms) => loadDecoder(ctx, ms)).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(UnsupportedModelError);
    expect((e as Error).message).toMatch(/GGUF tensor blk\.2\.ffn_down\.weight has type Q2_K/);
  });
});
