/**
 * llvmpipe's loop budget (core/ops/loop_budget.ts): one counter of 65,535 loop iterations per
 * shader invocation, shared by every loop and never reset; past it loops silently run zero
 * times. Checked here on the drivers themselves:
 * - the counter: nested loops and a later loop behind a barrier stop where the shared count
 *   runs out on llvmpipe, and run in full on SwiftShader;
 * - megakernelLoopCount against what the decode megakernel really spends: a probe loop
 *   appended to the kernel counts the budget left at its end (read back through logits[0]),
 *   for shapes from stories260K's to a stories15M-sized model, so the estimate is checked to be
 *   an upper bound (and not a loose one) on the driver the engine runs on;
 * - the guard: LlamaModel takes the megakernel only for steps within the budget (by rows per
 *   workgroup and latest position); a model whose one-sequence step exceeds it never takes
 *   the megakernel but keeps the texture storage for its generic path.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { parseDecoderConfig, type DecoderConfig } from '../../core/formats/hf_config.ts';
import type { GpuContext } from '../../core/gpu/context.ts';
import { isLlvmpipe } from '../../core/gpu/device.ts';
import { SHADERS } from '../../core/gpu/shader_sources.gen.ts';
import { LlamaModel } from '../../core/models/llama/forward.ts';
import { destroyLlamaWeights, loadLlamaWeights, type LlamaWeights } from '../../core/models/llama/weights.ts';
import type { HostTensor } from '../../core/models/host_tensor.ts';
import type { StepGeometry, StepInputs } from '../../core/models/step.ts';
import { megakernelEligibility, megakernelGC, megakernelRows, megakernelTuning } from '../../core/ops/decode_megakernel.ts';
import { LLVMPIPE_LOOP_BUDGET, LLVMPIPE_LOOP_PLAN, megakernelLoopCount } from '../../core/ops/loop_budget.ts';
import { gpuFor, randn, TEST_BACKENDS } from '../helpers/gpu.ts';

const COUNTER = `
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> lim: array<u32>;
@compute @workgroup_size(8)
fn main(@builtin(local_invocation_index) lid: u32) {
  var outer = 0u;
  var inner = 0u;
  for (var o = 0u; o < lim[0]; o++) {
    outer += 1u;
    for (var k = 0u; k < lim[1]; k++) { inner += 1u; }
  }
  workgroupBarrier();
  var later = 0u;
  for (var s = 0u; s < lim[2]; s++) { later += 1u; }
  if (lid == 0u) { out[0] = outer; out[1] = inner; out[2] = later; }
}`;

/** Runs COUNTER with loop bounds [outer, inner, later]; returns the iterations each loop ran. */
async function countLoops(ctx: GpuContext, bounds: [number, number, number]): Promise<number[]> {
  const dev = ctx.device;
  const pipe = dev.createComputePipeline({ layout: 'auto', compute: { module: dev.createShaderModule({ code: COUNTER }), entryPoint: 'main' } });
  const out = dev.createBuffer({ size: 16, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const lim = dev.createBuffer({ size: 16, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
  const read = dev.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  try {
    dev.queue.writeBuffer(lim, 0, new Uint32Array([...bounds, 0]));
    const enc = dev.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipe);
    pass.setBindGroup(0, dev.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: out } }, { binding: 1, resource: { buffer: lim } }] }));
    pass.dispatchWorkgroups(1);
    pass.end();
    enc.copyBufferToBuffer(out, 0, read, 0, 16);
    dev.queue.submit([enc.finish()]);
    await read.mapAsync(GPUMapMode.READ);
    return Array.from(new Uint32Array(read.getMappedRange().slice(0, 12)));
  } finally {
    for (const b of [out, lim, read]) b.destroy();
  }
}

/** A Llama config of the given shape (tied head, f32). */
function shape(V: number, D: number, H: number, KV: number, I: number, L: number): DecoderConfig {
  return parseDecoderConfig({
    architectures: ['LlamaForCausalLM'],
    max_position_embeddings: 8192,
    hidden_act: 'silu',
    rms_norm_eps: 1e-5,
    rope_theta: 10000,
    bos_token_id: 1,
    eos_token_id: 2,
    torch_dtype: 'float32',
    hidden_size: D,
    num_hidden_layers: L,
    num_attention_heads: H,
    num_key_value_heads: KV,
    intermediate_size: I,
    vocab_size: V,
    tie_word_embeddings: true,
  });
}

/** Random packed f32 weights for cfg (values do not matter to loop counts). */
async function weightsFor(ctx: GpuContext, cfg: DecoderConfig): Promise<LlamaWeights> {
  const D = cfg.hiddenSize;
  const hd = cfg.headDim;
  const shapes = new Map<string, number[]>([['model.embed_tokens.weight', [cfg.vocabSize, D]], ['model.norm.weight', [D]]]);
  for (let l = 0; l < cfg.layers; l++) {
    const p = `model.layers.${l}.`;
    shapes.set(`${p}input_layernorm.weight`, [D]).set(`${p}post_attention_layernorm.weight`, [D]);
    shapes.set(`${p}self_attn.q_proj.weight`, [cfg.heads * hd, D]).set(`${p}self_attn.k_proj.weight`, [cfg.kvHeads * hd, D]).set(`${p}self_attn.v_proj.weight`, [cfg.kvHeads * hd, D]);
    shapes.set(`${p}self_attn.o_proj.weight`, [D, cfg.heads * hd]);
    shapes.set(`${p}mlp.gate_proj.weight`, [cfg.intermediateSize, D]).set(`${p}mlp.up_proj.weight`, [cfg.intermediateSize, D]).set(`${p}mlp.down_proj.weight`, [D, cfg.intermediateSize]);
  }
  let seed = 1;
  const src = {
    has: (n: string): boolean => shapes.has(n),
    load: async (n: string): Promise<HostTensor> => {
      const s = shapes.get(n)!;
      return { kind: 'f32', shape: s, data: randn(s.reduce((a, b) => a * b, 1), seed++, 0.1) };
    },
  };
  return loadLlamaWeights(ctx, cfg, src, 'f32', { pack: true });
}

/** S sequences, one token each at position `pos`, sequence i in blocks i * maxBlocks ... */
function decodeStep(geo: StepGeometry, S: number, pos: number): StepInputs {
  const mb = geo.maxBlocksPerSeq;
  const seq = Uint32Array.from({ length: S }, (_, i) => i);
  return {
    tokens: seq.map((i) => 5 + i),
    positions: seq.map(() => pos),
    tokenSeq: seq,
    slots: seq.map((i) => (i * mb + Math.floor(pos / geo.blockSize)) * geo.blockSize + (pos % geo.blockSize)),
    blockTables: Uint32Array.from({ length: S * mb }, (_, i) => i),
    numSeqs: S,
    logitRows: seq,
  };
}

describe.each(TEST_BACKENDS)('loop budget on %s', (backend) => {
  it('caps the loops of one invocation in all on llvmpipe, not at all elsewhere', async () => {
    const ctx = await gpuFor(backend);
    const small = await countLoops(ctx, [100, 16, 1000]);
    expect(small).toEqual([100, 1600, 1000]);
    const [outer = NaN, inner = NaN, later = NaN] = await countLoops(ctx, [5000, 16, 70_000]);
    if (!isLlvmpipe(ctx.gpu.info)) {
      expect([outer, inner, later]).toEqual([5000, 80_000, 70_000]);
      return;
    }
    // Each outer iteration takes 1 + 16 + 1 (the inner loop's exit): the counter runs out in
    // the nested loops, and the loop behind the barrier gets (next to) nothing.
    expect(outer).toBe(Math.ceil(LLVMPIPE_LOOP_BUDGET / 18));
    expect(inner).toBeLessThan(outer * 16);
    expect(later).toBeLessThanOrEqual(1);
  });
});

// The probe: after the kernel's last statement, a loop of up to 70,000 iterations counts how
// much of the budget is left and writes it to logits[0] (invocation 0 of workgroup 0).
const PROBE = `  var probe = 0u;\n  for (var pi = 0u; pi < 70000u; pi++) { probe += 1u; }\n#if !ARGMAX\n  if (wid == 0u && lid == 0u) { logits[0] = f32(probe); }\n#endif\n`;

describe.runIf(TEST_BACKENDS.includes('opengles'))('decode megakernel loop count on llvmpipe', () => {
  const S_ = SHADERS as Record<string, string>;
  const original = S_['decode_megakernel']!;
  afterAll(() => void (S_['decode_megakernel'] = original));

  // [vocab, hidden, heads, kv heads, intermediate, layers, sequences, position]
  const CASES: [number, number, number, number, number, number, number, number][] = [
    [512, 64, 8, 4, 172, 5, 1, 40], // stories260K
    [512, 64, 8, 4, 172, 5, 16, 400], // stories260K, 4 rows per workgroup, longer context
    [512, 256, 2, 1, 256, 1, 1, 800], // head_dim 128, GQA 2: attention's per-tile loops not unrolled
    [8000, 288, 6, 6, 768, 2, 4, 100], // stories15M's layer shape
  ];
  it.each(CASES)('V %i, hidden %i, heads %i/%i, intermediate %i, %i layers, %i sequences at position %i: estimate >= spent', async (V, D, H, KV, I, L, S, pos) => {
    const ctx = await gpuFor('opengles');
    if (!isLlvmpipe(ctx.gpu.info)) return;
    const end = original.lastIndexOf('}');
    S_['decode_megakernel'] = `${original.slice(0, end)}${PROBE}}\n`;
    const cfg = shape(V, D, H, KV, I, L);
    const weights = await weightsFor(ctx, cfg);
    const geo: StepGeometry = { maxTokens: 64, maxSeqs: S, numBlocks: S * 64, blockSize: 16, maxBlocksPerSeq: 64 };
    const model = new LlamaModel(ctx, cfg, weights, geo, 'f32', { decodeMegakernel: 'on' });
    try {
      const step = decodeStep(geo, S, pos);
      const rec = ctx.recorder();
      const logits = await model.record(rec, step);
      const read = rec.readback(logits!, 4);
      rec.submit();
      const left = new Float32Array(await read)[0]!;
      const spent = LLVMPIPE_LOOP_BUDGET - left;
      const t = megakernelTuning(ctx.gpu.info);
      const MR = megakernelRows(cfg, S, ctx.gpu.limits.maxComputeWorkgroupStorageSize);
      const estimate = megakernelLoopCount(cfg, { MR, WG: t.wg, NO: t.octs, GC: megakernelGC(cfg), argmax: false }, pos);
      console.log(`[llvmpipe] ${V}/${D}/${H}/${KV}/${I}/${L} S=${S} pos=${pos}: spent ${spent}, estimate ${estimate} (${(estimate / spent).toFixed(2)}x)`);
      expect(Number.isInteger(left) && left > 0, 'the probe ran: the kernel stayed within the budget').toBe(true);
      expect(estimate).toBeGreaterThanOrEqual(spent);
      expect(estimate).toBeLessThanOrEqual(1.5 * spent);
    } finally {
      S_['decode_megakernel'] = original;
      model.destroy();
      destroyLlamaWeights(weights);
    }
  }, 300_000);
});

describe.each(TEST_BACKENDS)('megakernel loop guard on %s', (backend) => {
  it('takes the generic path for steps past the budget, and for every step of a model past it at position 0', async () => {
    const ctx = await gpuFor(backend);
    const llvmpipe = isLlvmpipe(ctx.gpu.info);
    // head_dim 128, GQA 2: ~67 loop counts per 8-key tile per invocation, so the budget ends
    // near position 7,000.
    const cfg = shape(512, 256, 2, 1, 256, 1);
    const weights = await weightsFor(ctx, cfg);
    const geo: StepGeometry = { maxTokens: 8, maxSeqs: 2, numBlocks: 2 * 512, blockSize: 16, maxBlocksPerSeq: 512 };
    const model = new LlamaModel(ctx, cfg, weights, geo, 'f32', { decodeMegakernel: 'on' });
    // A 300,000-token vocabulary: the LM head alone is ~4,700 passes of 16 chunks.
    const wide = shape(300_000, 64, 4, 2, 64, 1);
    const wideWeights = await weightsFor(ctx, wide);
    const wideModel = new LlamaModel(ctx, wide, wideWeights, geo, 'f32', { decodeMegakernel: 'on' });
    // Its 77 MB of weights are past auto's 64 MiB bound for buffer weights, within it for a texture.
    const wideAuto = new LlamaModel(ctx, wide, wideWeights, geo, 'f32', { decodeMegakernel: 'auto' });
    try {
      expect(model.megakernelOff).toBeNull();
      const t = megakernelTuning(ctx.gpu.info);
      const at = (pos: number): number => megakernelLoopCount(cfg, { MR: 1, WG: t.wg, NO: t.octs, GC: megakernelGC(cfg), argmax: false }, pos);
      let last = 0; // the latest position within the plan
      while (at(last + 8) <= LLVMPIPE_LOOP_PLAN) last += 8;
      expect(last).toBeGreaterThan(4000);
      expect(last).toBeLessThan(8000);
      expect(model.decodePath(decodeStep(geo, 1, 100))).toBe('megakernel');
      expect(model.decodePath(decodeStep(geo, 1, last))).toBe('megakernel');
      // Past the plan: generic on llvmpipe only (no loop budget elsewhere).
      expect(model.decodePath(decodeStep(geo, 1, last + 16))).toBe(llvmpipe ? 'generic' : 'megakernel');
      expect(model.decodePath(decodeStep(geo, 2, 7500))).toBe(llvmpipe ? 'generic' : 'megakernel');
      // The one eligibility decision load.ts (GGUF dequantization) and LlamaModel share: the
      // budget is its own verdict, and only for a model the megakernel supports.
      const input = { mode: 'on' as const, kvDtype: 'f32' as const, f32Weights: true, weightBytes: wideWeights.packed!.size };
      expect(megakernelEligibility(ctx, wide, input, t)).toEqual({ support: null, budget: wideModel.megakernelOff });
      expect(megakernelEligibility(ctx, wide, { ...input, f32Weights: false }, t)).toEqual({ support: 'weights are not f32', budget: null });
      expect(megakernelEligibility(ctx, cfg, { ...input, weightBytes: weights.packed!.size }, t)).toEqual({ support: null, budget: null });
      if (llvmpipe) {
        expect(wideModel.megakernelOff).toMatch(/^one sequence's step runs ~\d+ loop iterations per invocation, over llvmpipe's budget \(60000 of 65535\)$/);
        expect(wideModel.decodePath(decodeStep(geo, 1, 0))).toBe('generic');
        // ... while its generic path keeps llvmpipe's texture storage.
        expect(wideModel.megakernelWeightSource).toBe('texture');
        expect(wideModel.kvStorage).toBe('texture');
        expect(wideAuto.megakernelOff).toBe(wideModel.megakernelOff);
        expect(wideAuto.megakernelWeightSource).toBe('texture');
      } else {
        expect(wideModel.megakernelOff).toBeNull();
        expect(wideModel.decodePath(decodeStep(geo, 1, 0))).toBe('megakernel');
        expect(wideAuto.megakernelOff).toMatch(/^auto: packed weights 7\d\.\d MiB > 64 MiB \(weights read from a buffer\)$/);
        expect(wideAuto.megakernelWeightSource).toBeNull();
      }
    } finally {
      model.destroy();
      wideModel.destroy();
      wideAuto.destroy();
      destroyLlamaWeights(weights);
      destroyLlamaWeights(wideWeights);
    }
  }, 300_000);
});
