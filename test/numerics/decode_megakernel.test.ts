/**
 * The decode megakernel (core/ops/decode_megakernel.ts) against the generic
 * path and the plain-TS reference, on random tiny decoders of several shapes:
 * GQA ratios 1..4, odd intermediate sizes (I % 4 != 0), qkv bias (Qwen2), q/k
 * norms (Qwen3), sliding window (Mistral), llama3 rope scaling, tied and untied
 * heads, f32 and q8 KV, 1..8 sequences of different lengths per step (so 1..4
 * token rows per workgroup, one or two workgroups, and a last workgroup with a padding row), contexts
 * crossing 4-token KV blocks.
 *
 * Two LlamaModels share one packed weight buffer: `on` runs decode steps as the
 * megakernel, and prefills and mixed steps (prompt chunks of up to 32 tokens) in
 * its waves; `off` always the generic path. Both are fed the same tokens (greedy
 * from the generic logits); the prefill and one mixed step (3- and 6-token chunks
 * among decodes) must give the same logits bit for bit. A separate case covers
 * waves with padding rows, verify chunks (every row sampled), unsampled chunks and
 * the steps left to the generic path, and another a step of 16 prompts (240 chunk tokens:
 * waves on llvmpipe, the generic path on SwiftShader, the same logits; 272 tokens: generic on
 * both). Checked per decode step: logits
 * within 1e-5 of max |logit| (observed: bit-identical, the kernel mirrors the
 * cpu variants' arithmetic) and identical greedy ids; the megakernel's fused
 * argmax (RecordOptions.argmaxInto) against the sampler's reference on the
 * generic logits; at the end, the megakernel's logits against the reference
 * (f64 accumulation) within 1e-3 of max |logit|. A separate case gives the
 * fused argmax ties across invocations and NaN logits.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { parseDecoderConfig, type DecoderConfig } from '../../core/formats/hf_config.ts';
import type { GpuContext } from '../../core/gpu/context.ts';
import { isLlvmpipe } from '../../core/gpu/device.ts';
import { LlamaModel } from '../../core/models/llama/forward.ts';
import { destroyLlamaWeights, loadLlamaWeights, type LlamaWeights } from '../../core/models/llama/weights.ts';
import type { HostTensor, WeightSource } from '../../core/models/host_tensor.ts';
import { MEGAKERNEL_MAX_CHUNK, MEGAKERNEL_MAX_WAVES } from '../../core/models/llama/megakernel_waves.ts';
import type { StepGeometry, StepInputs } from '../../core/models/step.ts';
import { decodeStepRef } from '../../core/ops/decode_megakernel.ref.ts';
import type { KvDtype } from '../../core/ops/kv_write.ts';
import { sampleRef } from '../../core/ops/sample.ref.ts';
import { GREEDY } from '../../core/sampling/params.ts';
import { gpuFor, randn, rng, TEST_BACKENDS } from '../helpers/gpu.ts';

interface Case {
  name: string;
  config: Record<string, unknown>;
  /** Prompt lengths: one sequence each. */
  prompts: number[];
  kv?: KvDtype;
  /** KV block size (default BLOCK = 4; >= 8 takes the megakernel's two-block-lookup tiles). */
  block?: number;
}

const base = { max_position_embeddings: 64, hidden_act: 'silu', rms_norm_eps: 1e-5, rope_theta: 10000, bos_token_id: 1, eos_token_id: 2, torch_dtype: 'float32' };

const CASES: Case[] = [
  {
    name: 'llama GQA 2, odd intermediate, untied, 4 sequences',
    config: { ...base, architectures: ['LlamaForCausalLM'], hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 45, vocab_size: 97, tie_word_embeddings: false },
    prompts: [5, 9, 3, 12],
  },
  {
    name: 'qwen2 qkv bias, GQA 3, tied, llama3-free, 5 sequences (3 rows per workgroup, a padding row)',
    config: { ...base, architectures: ['Qwen2ForCausalLM'], hidden_size: 48, num_hidden_layers: 2, num_attention_heads: 6, num_key_value_heads: 2, intermediate_size: 50, vocab_size: 70, tie_word_embeddings: true, rope_theta: 1e6 },
    prompts: [7, 2, 10, 4, 6],
    block: 16,
  },
  {
    name: 'qwen3 q/k norms, GQA 4, head_dim 16, 1 sequence',
    config: { ...base, architectures: ['Qwen3ForCausalLM'], hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 1, head_dim: 16, intermediate_size: 36, vocab_size: 64, tie_word_embeddings: false, rms_norm_eps: 1e-6 },
    prompts: [6],
  },
  {
    name: 'mistral sliding window 5, MHA, 8 sequences (4 rows per workgroup)',
    config: { ...base, architectures: ['MistralForCausalLM'], hidden_size: 32, num_hidden_layers: 3, num_attention_heads: 4, num_key_value_heads: 4, intermediate_size: 40, vocab_size: 50, tie_word_embeddings: false, sliding_window: 5 },
    prompts: [3, 8, 1, 6, 11, 4, 9, 2],
    block: 8,
  },
  {
    name: 'llama3 rope scaling, q8 KV, 2 sequences',
    config: {
      ...base,
      architectures: ['LlamaForCausalLM'],
      hidden_size: 32,
      num_hidden_layers: 2,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      intermediate_size: 44,
      vocab_size: 80,
      tie_word_embeddings: true,
      rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 16 },
    },
    prompts: [9, 4],
    kv: 'q8',
  },
];

const DECODE_STEPS = 6;
const BLOCK = 4;

/** Random HF-named weights for cfg: N(0, 1) x 0.3 matrices, norms 1 + N(0, 0.1). */
function randomWeights(cfg: DecoderConfig, seed: number): Map<string, { shape: number[]; data: Float32Array }> {
  const m = new Map<string, { shape: number[]; data: Float32Array }>();
  let k = seed;
  const mat = (n: string, rows: number, cols: number): void => void m.set(n, { shape: [rows, cols], data: randn(rows * cols, k++, 0.3) });
  const vec = (n: string, len: number, one: boolean): void => {
    const d = randn(len, k++, one ? 0.1 : 0.3);
    if (one) for (let i = 0; i < len; i++) d[i] = d[i]! + 1;
    m.set(n, { shape: [len], data: d });
  };
  const D = cfg.hiddenSize;
  const hd = cfg.headDim;
  mat('model.embed_tokens.weight', cfg.vocabSize, D);
  for (let l = 0; l < cfg.layers; l++) {
    const p = `model.layers.${l}.`;
    vec(`${p}input_layernorm.weight`, D, true);
    vec(`${p}post_attention_layernorm.weight`, D, true);
    mat(`${p}self_attn.q_proj.weight`, cfg.heads * hd, D);
    mat(`${p}self_attn.k_proj.weight`, cfg.kvHeads * hd, D);
    mat(`${p}self_attn.v_proj.weight`, cfg.kvHeads * hd, D);
    if (cfg.attentionBias) {
      vec(`${p}self_attn.q_proj.bias`, cfg.heads * hd, false);
      vec(`${p}self_attn.k_proj.bias`, cfg.kvHeads * hd, false);
      vec(`${p}self_attn.v_proj.bias`, cfg.kvHeads * hd, false);
    }
    if (cfg.qkNorm) {
      vec(`${p}self_attn.q_norm.weight`, hd, true);
      vec(`${p}self_attn.k_norm.weight`, hd, true);
    }
    mat(`${p}self_attn.o_proj.weight`, D, cfg.heads * hd);
    mat(`${p}mlp.gate_proj.weight`, cfg.intermediateSize, D);
    mat(`${p}mlp.up_proj.weight`, cfg.intermediateSize, D);
    mat(`${p}mlp.down_proj.weight`, D, cfg.intermediateSize);
  }
  vec('model.norm.weight', D, true);
  if (!cfg.tieEmbeddings) mat('lm_head.weight', cfg.vocabSize, D);
  return m;
}

function source(m: Map<string, { shape: number[]; data: Float32Array }>): WeightSource {
  return {
    has: (n) => m.has(n),
    async load(n): Promise<HostTensor> {
      const t = m.get(n);
      if (!t) throw new Error(`missing ${n}`);
      return { kind: 'f32', shape: [...t.shape], data: t.data.slice() };
    },
  };
}

/** Step inputs for sequences s contributing tokens[s] at positions start[s].. (blocks: seq s owns blocks s * maxBlocks ..). */
function stepInputs(geo: StepGeometry, parts: { seq: number; start: number; tokens: number[]; sample: boolean }[]): StepInputs {
  const tokens: number[] = [];
  const positions: number[] = [];
  const tokenSeq: number[] = [];
  const slots: number[] = [];
  const logitRows: number[] = [];
  const blockTables = new Uint32Array(parts.length * geo.maxBlocksPerSeq);
  parts.forEach((p, i) => {
    for (let b = 0; b < geo.maxBlocksPerSeq; b++) blockTables[i * geo.maxBlocksPerSeq + b] = p.seq * geo.maxBlocksPerSeq + b;
    p.tokens.forEach((t, k) => {
      const pos = p.start + k;
      tokens.push(t);
      positions.push(pos);
      tokenSeq.push(i);
      slots.push((p.seq * geo.maxBlocksPerSeq + Math.floor(pos / geo.blockSize)) * geo.blockSize + (pos % geo.blockSize));
    });
    if (p.sample) logitRows.push(tokens.length - 1);
  });
  return {
    tokens: Uint32Array.from(tokens),
    positions: Uint32Array.from(positions),
    tokenSeq: Uint32Array.from(tokenSeq),
    slots: Uint32Array.from(slots),
    blockTables,
    numSeqs: parts.length,
    logitRows: Uint32Array.from(logitRows),
  };
}

async function run(ctx: GpuContext, model: LlamaModel, s: StepInputs): Promise<Float32Array> {
  const rec = ctx.recorder();
  const logits = await model.record(rec, s);
  if (!logits) throw new Error('no logits');
  const read = rec.readback(logits);
  rec.submit();
  return new Float32Array(await read);
}

/** The megakernel's fused greedy ids of step s's logit rows (run once more: the KV writes of s are idempotent). */
async function runArgmax(ctx: GpuContext, model: LlamaModel, s: StepInputs): Promise<number[]> {
  expect(model.fusesArgmax(s)).toBe(true);
  const rec = ctx.recorder();
  const ids = ctx.scratch([s.logitRows.length], 'u32');
  try {
    const out = await model.record(rec, s, { argmaxInto: ids });
    expect(out?.shape).toEqual([s.logitRows.length]);
    const read = rec.readback(ids);
    rec.submit();
    return Array.from(new Uint32Array(await read));
  } finally {
    ctx.free(ids);
  }
}

/** The sampler's greedy ids (argmax_plain's rules: NaN never wins, ties to the lowest id). */
function greedyRef(logits: Float32Array, V: number): number[] {
  const rows = logits.length / V;
  return Array.from(sampleRef(logits, V, Array.from({ length: rows }, () => ({ params: GREEDY, step: 0 }))));
}

function argmaxRows(a: Float32Array, V: number): number[] {
  const out: number[] = [];
  for (let r = 0; r < a.length / V; r++) {
    let best = 0;
    for (let v = 1; v < V; v++) if (a[r * V + v]! > a[r * V + best]!) best = v;
    out.push(best);
  }
  return out;
}

const absMax = (a: Float32Array): number => a.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
const maxDiff = (a: Float32Array, b: Float32Array): number => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i]!)), 0);

describe.each(TEST_BACKENDS)('decode megakernel on %s', (backend) => {
  const cleanup: (() => void)[] = [];
  afterAll(() => cleanup.forEach((f) => f()));

  // Every case with the weights read from the packed buffer and from its texture copy.
  const RUNS = CASES.flatMap((c) => (['buffer', 'texture'] as const).map((weightsFrom) => ({ ...c, weightsFrom })));
  it.each(RUNS)('$name, weights (and KV) from $weightsFrom', async (c) => {
    const ctx = await gpuFor(backend);
    const cfg = parseDecoderConfig(c.config);
    const host = randomWeights(cfg, 1000 + CASES.findIndex((x) => x.name === c.name) * 100);
    const weights: LlamaWeights = await loadLlamaWeights(ctx, cfg, source(host), 'f32', { pack: true });
    cleanup.push(() => destroyLlamaWeights(weights));
    expect(weights.packed).toBeDefined();
    const S = c.prompts.length;
    const block = c.block ?? BLOCK;
    const maxBlocksPerSeq = Math.ceil(cfg.maxPositions / block);
    const geo: StepGeometry = { maxTokens: 64, maxSeqs: S, numBlocks: S * maxBlocksPerSeq, blockSize: block, maxBlocksPerSeq };
    const kv = c.kv ?? 'f32';
    // The texture runs keep the KV cache in textures too (llvmpipe's layout; q8 as r32uint words), prefill included.
    const kvStorage = c.weightsFrom === 'texture' ? 'texture' : 'buffer';
    const on = new LlamaModel(ctx, cfg, weights, geo, kv, { decodeMegakernel: 'on', megakernelWeights: c.weightsFrom, kvStorage });
    expect(on.megakernelWeightSource).toBe(c.weightsFrom);
    expect(on.kvStorage).toBe(kvStorage);
    const off = new LlamaModel(ctx, cfg, weights, geo, kv, { decodeMegakernel: 'off' });
    cleanup.push(() => on.destroy(), () => off.destroy());
    expect(on.megakernelOff).toBeNull();
    expect(off.megakernelOff).toMatch(/off/);

    const r = rng(7 + S);
    const seqs = c.prompts.map((n) => Array.from({ length: n }, () => 3 + Math.floor(r() * (cfg.vocabSize - 3))));
    // Prefill: every prompt in one step — through the megakernel in waves of 4 tokens per
    // sequence when every prompt fits MEGAKERNEL_MAX_WAVES waves, else the generic path.
    const prefill = stepInputs(geo, seqs.map((t, i) => ({ seq: i, start: 0, tokens: t, sample: true })));
    expect(on.decodePath(prefill)).toBe(Math.max(...c.prompts) <= MEGAKERNEL_MAX_WAVES * MEGAKERNEL_MAX_CHUNK ? 'megakernel' : 'generic');
    let logits: Float32Array = await run(ctx, off, prefill);
    expect(Array.from(await run(ctx, on, prefill)), 'prefill logits (both paths, both KV storages)').toEqual(Array.from(logits));
    const V = cfg.vocabSize;
    let worst = 0;
    let exact = true;
    let onLogits: Float32Array = new Float32Array(0);
    for (let step = 0; step < DECODE_STEPS; step++) {
      const next = argmaxRows(logits, V);
      // Step 1 is mixed: sequence 0 adds a 3-token chunk (one wave, one workgroup) and the last
      // sequence a 6-token chunk (two waves), the others decode.
      const extra = (i: number): number => (step !== 1 ? 0 : i === 0 ? 2 : i === S - 1 ? 5 : 0);
      seqs.forEach((t, i) => {
        t.push(next[i]!);
        for (let k = 0; k < extra(i); k++) t.push(3 + ((next[i]! + 7 * k) % (V - 3)));
      });
      const s = stepInputs(geo, seqs.map((t, i) => ({ seq: i, start: t.length - 1 - extra(i), tokens: t.slice(t.length - 1 - extra(i)), sample: true })));
      expect(on.decodePath(s)).toBe('megakernel');
      expect(off.decodePath(s)).toBe('generic');
      onLogits = await run(ctx, on, s);
      logits = await run(ctx, off, s);
      const d = maxDiff(onLogits, logits);
      exact &&= d === 0;
      worst = Math.max(worst, d / absMax(logits));
      expect(d, `step ${step}: max |mega - generic|`).toBeLessThanOrEqual(1e-5 * absMax(logits));
      expect(argmaxRows(onLogits, V), `step ${step}: greedy ids`).toEqual(argmaxRows(logits, V));
      expect(await runArgmax(ctx, on, s), `step ${step}: fused argmax`).toEqual(greedyRef(logits, V));
    }
    // Against the independent plain-TS forward (f64 accumulation).
    const get = (n: string): Float32Array => {
      const t = host.get(n);
      if (!t) throw new Error(`missing ${n}`);
      return t.data;
    };
    if (kv === 'f32') {
      const ref = decodeStepRef(cfg, get, seqs);
      expect(maxDiff(onLogits, ref)).toBeLessThanOrEqual(1e-3 * absMax(ref));
    }
    console.log(`[${backend}] ${c.name}: max |mega - generic| / max|logit| = ${worst.toExponential(2)}${exact ? ' (bit-identical)' : ''}`);
  }, 300_000);

  it('fused argmax: ties go to the lowest id across invocations, NaN logits never win', async () => {
    const ctx = await gpuFor(backend);
    const cfg = parseDecoderConfig({ ...CASES[0]!.config, vocab_size: 61 });
    const host = randomWeights(cfg, 77);
    // LM head rows: 0 NaN, every other row the same vector w, except rows 37 and 60 (another
    // invocation's columns, the last a tail column) = 2w. Logits: NaN, c, .., 2c at 37 and 60:
    // id 37 where c > 0 (a tie with 60), else id 1 (a tie with every row but 0, 37, 60).
    const D = cfg.hiddenSize;
    const head = host.get('lm_head.weight')!.data;
    for (let v = 0; v < cfg.vocabSize; v++) for (let k = 0; k < D; k++) head[v * D + k] = v === 0 ? NaN : (v === 37 || v === 60 ? 2 : 1) * head[D + k]!;
    const weights = await loadLlamaWeights(ctx, cfg, source(host), 'f32', { pack: true });
    const S = 5; // 3 + 2 rows: two workgroups, a padding row
    const geo: StepGeometry = { maxTokens: 16, maxSeqs: S, numBlocks: S * 16, blockSize: BLOCK, maxBlocksPerSeq: 16 };
    const on = new LlamaModel(ctx, cfg, weights, geo, 'f32', { decodeMegakernel: 'on' });
    const off = new LlamaModel(ctx, cfg, weights, geo, 'f32', { decodeMegakernel: 'off' });
    try {
      const prompts = Array.from({ length: S }, (_, i) => [3 + i, 10 + 2 * i, 20 + i]);
      const prefill = stepInputs(geo, prompts.map((t, i) => ({ seq: i, start: 0, tokens: t, sample: true })));
      await run(ctx, on, prefill);
      await run(ctx, off, prefill);
      const s = stepInputs(geo, prompts.map((t, i) => ({ seq: i, start: t.length, tokens: [5 + i], sample: true })));
      const logits = await run(ctx, off, s);
      const expected = greedyRef(logits, cfg.vocabSize);
      expect(new Set(expected.map((id) => (id === 37 || id === 1 ? 'ok' : id)))).toEqual(new Set(['ok']));
      expect(await runArgmax(ctx, on, s)).toEqual(expected);
    } finally {
      on.destroy();
      off.destroy();
      destroyLlamaWeights(weights);
    }
  });

  it('takes prompt chunks, verify rows and unsampled rows in waves; leaves image rows, split sequences and long chunks to the generic path', async () => {
    const ctx = await gpuFor(backend);
    const cfg = parseDecoderConfig(CASES[0]!.config);
    const weights = await loadLlamaWeights(ctx, cfg, source(randomWeights(cfg, 5)), 'f32', { pack: true });
    const geo: StepGeometry = { maxTokens: 48, maxSeqs: 4, maxLogitRows: 48, numBlocks: 64, blockSize: BLOCK, maxBlocksPerSeq: 16 };
    const on = new LlamaModel(ctx, cfg, weights, geo, 'f32', { decodeMegakernel: 'on' });
    const off = new LlamaModel(ctx, cfg, weights, geo, 'f32', { decodeMegakernel: 'off' });
    const V = cfg.vocabSize;
    const toks = (n: number, salt: number): number[] => Array.from({ length: n }, (_, k) => 3 + ((salt * 13 + k * 7) % (V - 3)));
    /** Both models run s; the megakernel's logits must equal the generic path's, and its fused argmax their greedy ids. */
    const same = async (s: StepInputs, what: string): Promise<void> => {
      expect(on.decodePath(s), what).toBe('megakernel');
      const want = await run(ctx, off, s);
      expect(Array.from(await run(ctx, on, s)), what).toEqual(Array.from(want));
      expect(await runArgmax(ctx, on, s), `${what}: fused argmax`).toEqual(greedyRef(want, V));
    };
    try {
      const one = stepInputs(geo, [{ seq: 0, start: 3, tokens: [5], sample: true }, { seq: 1, start: 7, tokens: [9], sample: true }]);
      expect(on.decodePath({ ...one, embedAt: Uint32Array.of(1), embedRows: new Float32Array(cfg.hiddenSize) } as StepInputs)).toBe('generic');
      expect(on.decodePath({ ...one, embedAt: new Uint32Array(0) } as StepInputs)).toBe('megakernel');
      // A sequence's tokens split around another's, or out of position order: generic.
      const split = stepInputs(geo, [{ seq: 0, start: 0, tokens: [5], sample: true }, { seq: 1, start: 0, tokens: [9], sample: true }]);
      expect(on.decodePath({ ...split, tokens: Uint32Array.of(5, 9, 6), positions: Uint32Array.of(0, 0, 1), tokenSeq: Uint32Array.of(0, 1, 0), slots: Uint32Array.of(0, 64, 1) })).toBe('generic');
      expect(on.decodePath({ ...split, tokens: Uint32Array.of(5, 6), positions: Uint32Array.of(1, 0), tokenSeq: Uint32Array.of(0, 0), slots: Uint32Array.of(1, 0), numSeqs: 1 })).toBe('generic');
      // More than MEGAKERNEL_MAX_WAVES waves: generic.
      const long = MEGAKERNEL_MAX_WAVES * MEGAKERNEL_MAX_CHUNK + 1;
      expect(on.decodePath(stepInputs(geo, [{ seq: 0, start: 0, tokens: toks(long, 1), sample: true }]))).toBe('generic');

      // Prompts of 16, 3, 2 and 1 tokens in one step: four waves, chunks of 3 and 2 packed with
      // padding rows (the sentinel), every prompt's last row sampled.
      const prompts = [toks(16, 2), toks(3, 3), toks(2, 4), toks(1, 5)];
      const before = { ...on.pathCounts };
      await same(stepInputs(geo, prompts.map((t, i) => ({ seq: i, start: 0, tokens: t, sample: true }))), 'prefill in waves');
      // Two records (logits, then fused argmax) of a 4-wave step; the generic model counts its own.
      expect(on.pathCounts).toEqual({ megakernelSteps: before.megakernelSteps + 2, megakernelDispatches: before.megakernelDispatches + 8, genericSteps: before.genericSteps });
      expect(off.pathCounts.megakernelSteps).toBe(0);
      // Decodes mixed with a verify chunk whose every row is sampled (speculative decoding's
      // k + 1 rows) and a chunk with no sampled row (a prompt's middle).
      const verify = stepInputs(geo, [
        { seq: 0, start: 16, tokens: [7], sample: true },
        { seq: 1, start: 3, tokens: toks(4, 6), sample: true },
        { seq: 2, start: 2, tokens: toks(5, 7), sample: false },
        { seq: 3, start: 1, tokens: [11], sample: true },
      ]);
      const lr: number[] = [0, 1, 2, 3, 4, 10];
      await same({ ...verify, logitRows: Uint32Array.from(lr) }, 'decodes, a verify chunk, an unsampled chunk');
      // A step of prompt chunks with no sampled row: nothing to return.
      const rec = ctx.recorder();
      const none = stepInputs(geo, [{ seq: 0, start: 17, tokens: toks(4, 8), sample: false }]);
      expect(on.decodePath(none)).toBe('megakernel');
      expect(await on.record(rec, none)).toBeNull();
      rec.submit();
    } finally {
      on.destroy();
      off.destroy();
      destroyLlamaWeights(weights);
    }
  });

  it("sends many prompts in one step through waves up to the adapter's chunk-token cap, past it the generic path", async () => {
    const ctx = await gpuFor(backend);
    const cfg = parseDecoderConfig(CASES[0]!.config);
    const weights = await loadLlamaWeights(ctx, cfg, source(randomWeights(cfg, 11)), 'f32', { pack: true });
    // The serving bench's prefill shape: 16 fresh prompts of 15 tokens (240 chunk tokens, 4 waves).
    const geo: StepGeometry = { maxTokens: 16 * 17, maxSeqs: 16, numBlocks: 16 * 16, blockSize: BLOCK, maxBlocksPerSeq: 16 };
    const on = new LlamaModel(ctx, cfg, weights, geo, 'f32');
    const off = new LlamaModel(ctx, cfg, weights, geo, 'f32', { decodeMegakernel: 'off' });
    const V = cfg.vocabSize;
    const prompts = (n: number): StepInputs =>
      stepInputs(geo, Array.from({ length: 16 }, (_, i) => ({ seq: i, start: 0, tokens: Array.from({ length: n }, (_, k) => 3 + ((i * 13 + k * 7) % (V - 3))), sample: true })));
    try {
      expect(on.megakernelOff).toBeNull(); // `auto` runs the megakernel on both CPU emulators
      // llvmpipe (texture weights by default) takes up to 256 chunk tokens in waves, SwiftShader 64.
      const llvmpipe = isLlvmpipe(ctx.gpu.info);
      expect(on.megakernelWeightSource).toBe(llvmpipe ? 'texture' : 'buffer');
      const p15 = prompts(15);
      expect(on.decodePath(p15)).toBe(llvmpipe ? 'megakernel' : 'generic');
      const want = await run(ctx, off, p15);
      expect(Array.from(await run(ctx, on, p15)), '16 prompts of 15: the same logits on either path').toEqual(Array.from(want));
      // 16 prompts of 17 (272 chunk tokens, 5 waves): past every adapter's cap.
      expect(on.decodePath(prompts(17))).toBe('generic');
    } finally {
      on.destroy();
      off.destroy();
      destroyLlamaWeights(weights);
    }
  });
});
