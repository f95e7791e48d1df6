/**
 * Host overhead of one decode step (`npm run bench -- --only host`): the CPU time Weft spends
 * turning a decode step into GPU commands, with the device's own time left out.
 *
 * Models: the exact published configs of Llama-3.2-1B and Qwen2.5-0.5B (the dimensions
 * scripts/make_realshape.py writes) with random f16 weights made in memory (no checkpoint on
 * disk); `layers` cuts only the layer count, every other dimension stays exact. The generic
 * per-op decode path (the decode megakernel is off: it never serves these sizes).
 *
 * A step is what the engine's runner records for a greedy decode step of B sequences (each at
 * a mid-decode position in its own KV blocks): the model's forward pass, the sampling dispatch
 * and the ids readback. Two timings per (shape, B), medians:
 *   record — from the new Recorder to the end of recording (every dispatch encoded, bind groups
 *            and uniforms ready), `steps` steps that are then discarded unsubmitted, so the
 *            device never runs them (a B = 64 step of the 1B shape is minutes of SwiftShader);
 *            twice, on two models over the same weights in alternating blocks of steps: through
 *            the ops (step graphs off) and replaying the step's graph (the default path);
 *   step   — at the batches in `submitBatches` (default B = 1): record + `rec.submit()` (the
 *            uniform write and queue.submit, where Dawn translates the commands for the
 *            driver), to submit's return; the bench then waits for the device OUTSIDE the timing,
 *            so device work never overlaps the next step (on SwiftShader the device computes
 *            after submit, on its own threads).
 * µs per dispatch is either over the step's dispatch count. With cut layers the table adds the
 * dispatches of one layer and an explicitly labelled extrapolation to the full layer count:
 * µs per dispatch × the full model's dispatch count.
 */
import { GpuContext } from '../core/gpu/context.ts';
import { BACKENDS, type BackendName } from '../core/gpu/device.ts';
import type { Tensor } from '../core/gpu/tensor.ts';
import { parseDecoderConfig, type DecoderConfig } from '../core/formats/hf_config.ts';
import type { HostTensor, WeightSource } from '../core/models/host_tensor.ts';
import { LlamaModel } from '../core/models/llama/forward.ts';
import { destroyLlamaWeights, loadLlamaWeights, llamaTensorNames } from '../core/models/llama/weights.ts';
import type { StepGeometry, StepInputs } from '../core/models/step.ts';
import { sample, type SampleRow } from '../core/ops/sample.ts';
import { GREEDY } from '../core/sampling/params.ts';
import type { Variant } from '../core/ops/variant.ts';
import { f1, f2, median } from './stats.ts';

export type HostShape = 'llama-3.2-1b' | 'qwen2.5-0.5b';
export const HOST_SHAPES: HostShape[] = ['llama-3.2-1b', 'qwen2.5-0.5b'];

/** The published config.json of each shape (huggingface.co/meta-llama/Llama-3.2-1B, Qwen/Qwen2.5-0.5B). */
const CONFIGS: Record<HostShape, Record<string, unknown>> = {
  'llama-3.2-1b': {
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    attention_bias: false,
    head_dim: 64,
    hidden_act: 'silu',
    hidden_size: 2048,
    intermediate_size: 8192,
    max_position_embeddings: 131072,
    num_attention_heads: 32,
    num_hidden_layers: 16,
    num_key_value_heads: 8,
    rms_norm_eps: 1e-5,
    rope_scaling: { factor: 32.0, high_freq_factor: 4.0, low_freq_factor: 1.0, original_max_position_embeddings: 8192, rope_type: 'llama3' },
    rope_theta: 500000.0,
    tie_word_embeddings: true,
    torch_dtype: 'bfloat16',
    vocab_size: 128256,
    bos_token_id: 128000,
    eos_token_id: 128001,
  },
  'qwen2.5-0.5b': {
    architectures: ['Qwen2ForCausalLM'],
    model_type: 'qwen2',
    hidden_act: 'silu',
    hidden_size: 896,
    intermediate_size: 4864,
    max_position_embeddings: 32768,
    num_attention_heads: 14,
    num_hidden_layers: 24,
    num_key_value_heads: 2,
    rms_norm_eps: 1e-6,
    rope_theta: 1000000.0,
    sliding_window: 32768,
    use_sliding_window: false,
    tie_word_embeddings: true,
    torch_dtype: 'bfloat16',
    vocab_size: 151936,
    bos_token_id: 151643,
    eos_token_id: 151643,
  },
};

export interface HostBenchOptions {
  shapes?: HostShape[];
  /** Sequences per decode step (default 1, 16, 64). */
  batches?: number[];
  /** Layers built per shape (default: 2 of Llama-3.2-1B's 16, all 24 of Qwen2.5-0.5B). */
  layers?: Partial<Record<HostShape, number>>;
  /** Recorded-only timed steps per (shape, batch) (default 30) after `warmup` untimed ones (default 5). */
  steps?: number;
  warmup?: number;
  /** Batches whose steps are also submitted and timed to submit's return (default [1]), `submitSteps` each (default 5). */
  submitBatches?: number[];
  submitSteps?: number;
  /** Dawn backend (default swiftshader: its device computes after submit, not inside it). */
  backend?: string;
  /**
   * Kernel family recorded (default `gpu`: the fused path a GPU host runs, whatever adapter
   * records it; `cpu` is the emulators' own path).
   */
  variant?: Variant;
  log?: (s: string) => void;
}

export interface HostRow {
  shape: HostShape;
  batch: number;
  /** Layers built, and the shape's full layer count. */
  layers: number;
  fullLayers: number;
  /** Dispatches of the timed step, and of one layer (the step's dispatches that repeat per layer). */
  dispatches: number;
  perLayer: number;
  /** Median host µs from the Recorder's creation to the end of recording through the ops (step graphs off), and that per dispatch. */
  recordUs: number;
  recordPerDispatchUs: number;
  /** The same with step graphs on (the default): the step replays its graph (core/gpu/step_graph.ts). */
  graphRecordUs: number;
  graphRecordPerDispatchUs: number;
  /** Submitted steps (NaN where not submitted): median host µs to queue.submit()'s return, of the submit call alone, per dispatch. */
  stepUs: number;
  submitUs: number;
  perDispatchUs: number;
  /** The device's time for a submitted step (submit's return to the ids read), for context only. */
  deviceMs: number;
}

export interface HostReport {
  backend: string;
  variant: Variant;
  adapter: string;
  steps: number;
  submitSteps: number;
  position: number;
  rows: HostRow[];
}

export const HOST_DEFAULTS = {
  batches: [1, 16, 64],
  layers: { 'llama-3.2-1b': 2, 'qwen2.5-0.5b': 24 } as Record<HostShape, number>,
  steps: 30,
  warmup: 5,
  submitBatches: [1],
  submitSteps: 5,
  backend: 'swiftshader',
  variant: 'gpu' as Variant,
};

/** Rounds the recorded steps are spread over, and the idle pause before each submitted step (ms). */
const ROUNDS = 3;
const IDLE_MS = 300;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Context position of every sequence's decode token. */
const POSITION = 100;
const BLOCK = 16;

/** The shape's config with `layers` layers (every other field as published). */
export function hostShapeConfig(shape: HostShape, layers?: number): DecoderConfig {
  const raw = CONFIGS[shape];
  return parseDecoderConfig({ ...raw, num_hidden_layers: layers ?? raw.num_hidden_layers });
}

/** xorshift32 over a word; returns the next state (never 0 from a non-zero seed). */
function xorshift(x: number): number {
  x ^= x << 13;
  x ^= x >>> 17;
  x ^= x << 5;
  return x >>> 0;
}

/**
 * Random f16 tensors of the config's shapes in Hugging Face naming: matrix entries of
 * magnitude 2^-7 .. 2^-6 with random sign and mantissa, norm weights 1 .. 1.25, biases as
 * matrices. Values are irrelevant to host time; they only have to be finite.
 */
function randomWeights(cfg: DecoderConfig, seed = 1234): WeightSource {
  const D = cfg.hiddenSize;
  const hd = cfg.headDim;
  const shapeOf = (name: string): number[] => {
    const leaf = name.replace(/^model\.layers\.\d+\./, '');
    const q = cfg.heads * hd;
    const kv = cfg.kvHeads * hd;
    const I = cfg.intermediateSize;
    const table: Record<string, number[]> = {
      'model.embed_tokens.weight': [cfg.vocabSize, D],
      'lm_head.weight': [cfg.vocabSize, D],
      'model.norm.weight': [D],
      'input_layernorm.weight': [D],
      'post_attention_layernorm.weight': [D],
      'self_attn.q_proj.weight': [q, D],
      'self_attn.k_proj.weight': [kv, D],
      'self_attn.v_proj.weight': [kv, D],
      'self_attn.q_proj.bias': [q],
      'self_attn.k_proj.bias': [kv],
      'self_attn.v_proj.bias': [kv],
      'self_attn.o_proj.weight': [D, q],
      'self_attn.q_norm.weight': [hd],
      'self_attn.k_norm.weight': [hd],
      'mlp.gate_proj.weight': [I, D],
      'mlp.up_proj.weight': [I, D],
      'mlp.down_proj.weight': [D, I],
    };
    const s = table[leaf] ?? table[name];
    if (!s) throw new Error(`host bench: no shape for ${name}`);
    return s;
  };
  const names = new Set(llamaTensorNames(cfg, !cfg.tieEmbeddings));
  let state = seed >>> 0 || 1;
  return {
    has: (n) => names.has(n),
    load: async (n): Promise<HostTensor> => {
      const shape = shapeOf(n);
      const count = shape.reduce((a, b) => a * b, 1);
      const words = new Uint32Array(Math.ceil(count / 2));
      const norm = /norm\.weight$/.test(n);
      for (let i = 0; i < words.length; i++) {
        state = xorshift(state);
        // Two halves per word: sign + mantissa random, exponent fixed (norms: 1 + small mantissa).
        const lo = norm ? 0x3c00 | (state & 0xff) : 0x2000 | (state & 0x83ff);
        const hi = norm ? 0x3c00 | ((state >>> 16) & 0xff) : 0x2000 | ((state >>> 16) & 0x83ff);
        words[i] = lo | (hi << 16);
      }
      return { kind: 'f16', shape, data: new Uint16Array(words.buffer, 0, count) };
    },
  };
}

/** A greedy decode step of B sequences, sequence s at POSITION + s % 7 in its own KV blocks. */
function decodeStep(geo: StepGeometry, B: number): StepInputs {
  const mb = geo.maxBlocksPerSeq;
  const need = Math.ceil((POSITION + 8) / geo.blockSize);
  const blockTables = new Uint32Array(B * mb);
  for (let s = 0; s < B; s++) for (let b = 0; b < need; b++) blockTables[s * mb + b] = s * need + b;
  const positions = Uint32Array.from({ length: B }, (_, s) => POSITION + (s % 7));
  const slots = positions.map((p, s) => blockTables[s * mb + Math.floor(p / geo.blockSize)]! * geo.blockSize + (p % geo.blockSize));
  const seqIdx = Uint32Array.from({ length: B }, (_, s) => s);
  return { tokens: Uint32Array.from({ length: B }, (_, s) => 1000 + 37 * s), positions, tokenSeq: seqIdx, slots, blockTables, numSeqs: B, logitRows: seqIdx };
}

interface Timed {
  /** Host µs from the new Recorder to the end of recording (everything before the queue is touched). */
  recordUs: number;
  /** Full steps: host µs of rec.submit() (uniform write + queue.submit), and the device's ms after it. */
  submitUs: number;
  deviceMs: number;
  dispatches: number;
}

/**
 * One decode step as the runner records it: forward pass, sampling, the ids readback. `submit`:
 * submitted, and the device's time waited for after the timing; otherwise discarded unsubmitted.
 */
async function oneStep(ctx: GpuContext, model: LlamaModel, inputs: StepInputs, rows: SampleRow[], out: Tensor, submit: boolean): Promise<Timed> {
  const t0 = performance.now();
  const rec = ctx.recorder();
  const logits = await model.record(rec, inputs);
  await sample(rec, logits!, rows, out);
  const read = rec.readback(out, rows.length * 4);
  const t1 = performance.now();
  if (!submit) {
    read.catch(() => undefined);
    rec.discard();
    return { recordUs: (t1 - t0) * 1000, submitUs: NaN, deviceMs: NaN, dispatches: rec.dispatches };
  }
  rec.submit();
  const t2 = performance.now();
  await read;
  return { recordUs: (t1 - t0) * 1000, submitUs: (t2 - t1) * 1000, deviceMs: performance.now() - t2, dispatches: rec.dispatches };
}

/** Builds one shape with random weights and times decode steps at each batch size. */
async function measureShape(ctx: GpuContext, shape: HostShape, layers: number, o: Required<Omit<HostBenchOptions, 'shapes' | 'layers' | 'log' | 'backend' | 'variant'>>, log: (s: string) => void): Promise<HostRow[]> {
  const cfg = hostShapeConfig(shape, layers);
  const published = hostShapeConfig(shape);
  const maxB = Math.max(...o.batches);
  const perSeq = Math.ceil((POSITION + 8) / BLOCK);
  const geo: StepGeometry = { maxTokens: maxB, maxSeqs: maxB, numBlocks: maxB * perSeq, blockSize: BLOCK, maxBlocksPerSeq: perSeq };
  const t = performance.now();
  const weights = await loadLlamaWeights(ctx, cfg, randomWeights(cfg), 'f16');
  log(`host: ${shape}, ${layers} of ${published.layers} layers, f16 weights (${(weights.bytes / 2 ** 20).toFixed(0)} MiB) in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  // The same weights through two models: recording through the ops every step, and replaying step graphs (the default).
  const ops = new LlamaModel(ctx, cfg, weights, geo, 'f32', { decodeMegakernel: 'off', stepGraphs: 'off' });
  const model = new LlamaModel(ctx, cfg, weights, geo, 'f32', { decodeMegakernel: 'off' });
  const out = ctx.scratch([maxB], 'u32');
  const rows: HostRow[] = [];
  try {
    const cases = o.batches.map((B) => ({
      B,
      inputs: decodeStep(geo, B),
      sampling: Array.from({ length: B }, (): SampleRow => ({ params: GREEDY, step: 0 })),
      recorded: [] as Timed[],
      graphs: [] as Timed[],
      full: [] as Timed[],
    }));
    // Warm-up: compiles every pipeline and fills the caches a serving engine has after its first steps (and captures the graphs).
    for (const c of cases) {
      for (let i = 0; i < o.warmup; i++) {
        await oneStep(ctx, ops, c.inputs, c.sampling, out, false);
        await oneStep(ctx, model, c.inputs, c.sampling, out, false);
      }
    }
    // Recorded steps in ROUNDS rounds over all batches, the order rotated per round: the host's
    // speed drifts (other processes, the allocator settling after the load), and rounds spread
    // that drift over every batch alike.
    const per = Math.ceil(o.steps / ROUNDS);
    for (let r = 0; r < ROUNDS; r++) {
      for (let k = 0; k < cases.length; k++) {
        const c = cases[(k + r) % cases.length]!;
        // Each model in a block of steps, after one untimed step: the recorder's per-dispatch bind
        // slots are the context's, and a step of the other model leaves them holding its groups.
        for (const [m, into] of [[ops, c.recorded], [model, c.graphs]] as const) {
          await oneStep(ctx, m, c.inputs, c.sampling, out, false);
          for (let i = 0; i < per; i++) into.push(await oneStep(ctx, m, c.inputs, c.sampling, out, false));
        }
      }
    }
    for (const c of cases) {
      if (!o.submitBatches.includes(c.B) || o.submitSteps === 0) continue;
      await oneStep(ctx, model, c.inputs, c.sampling, out, true); // the device's first touch of each buffer (lazy clears)
      for (let i = 0; i < o.submitSteps; i++) {
        // The emulated device's worker threads share the host's cores and linger after a step;
        // a pause lets them go idle so the timed step sees the host as a GPU machine would.
        await sleep(IDLE_MS);
        c.full.push(await oneStep(ctx, model, c.inputs, c.sampling, out, true));
      }
    }
    for (const { B, inputs, sampling, recorded, graphs, full } of cases) {
      const dispatches = recorded[0]!.dispatches;
      if (graphs[0]!.dispatches !== dispatches) throw new Error(`host bench: a replayed step recorded ${graphs[0]!.dispatches} dispatches, the ops ${dispatches}`);
      const graphRecordUs = median(graphs.map((x) => x.recordUs));
      const perLayer = (await layerDispatches(ctx, model, inputs, sampling, out, dispatches, layers)) ?? NaN;
      const recordUs = median(recorded.map((x) => x.recordUs));
      const stepUs = full.length ? median(full.map((x) => x.recordUs + x.submitUs)) : NaN;
      const row: HostRow = {
        shape,
        batch: B,
        layers,
        fullLayers: published.layers,
        dispatches,
        perLayer,
        recordUs,
        recordPerDispatchUs: recordUs / dispatches,
        graphRecordUs,
        graphRecordPerDispatchUs: graphRecordUs / dispatches,
        stepUs,
        submitUs: full.length ? median(full.map((x) => x.submitUs)) : NaN,
        perDispatchUs: stepUs / dispatches,
        deviceMs: full.length ? median(full.map((x) => x.deviceMs)) : NaN,
      };
      log(
        `host: ${shape} B=${B}: ${dispatches} dispatches; record ${f1(recordUs)} µs/step = ${f2(row.recordPerDispatchUs)} µs/dispatch; ` +
          `graph replay ${f1(graphRecordUs)} µs/step = ${f2(row.graphRecordPerDispatchUs)} µs/dispatch` +
          (full.length ? `; record + submit ${f1(stepUs)} µs/step = ${f2(row.perDispatchUs)} µs/dispatch (submit ${f1(row.submitUs)} µs, device ${f1(row.deviceMs)} ms)` : ''),
      );
      rows.push(row);
    }
  } finally {
    ctx.free(out);
    ops.destroy();
    model.destroy();
    destroyLlamaWeights(weights);
  }
  return rows;
}

/**
 * Dispatches per layer: the same step through a model one layer shallower (the same weights'
 * first layers) records that many fewer dispatches. Run once, untimed.
 */
async function layerDispatches(ctx: GpuContext, model: LlamaModel, inputs: StepInputs, rows: SampleRow[], out: Tensor, dispatches: number, layers: number): Promise<number | null> {
  if (layers < 2) return null;
  const shallow = new LlamaModel(ctx, { ...model.cfg, layers: layers - 1 }, { ...model.weights, layers: model.weights.layers.slice(0, layers - 1) }, model.geo, 'f32', { decodeMegakernel: 'off' });
  try {
    const r = await oneStep(ctx, shallow, inputs, rows, out, false);
    return dispatches - r.dispatches;
  } finally {
    shallow.destroy();
  }
}

export async function benchHost(o: HostBenchOptions = {}): Promise<HostReport> {
  const log = o.log ?? ((s: string) => void process.stderr.write(`${s}\n`));
  const backend = o.backend ?? HOST_DEFAULTS.backend;
  if (!(BACKENDS as readonly string[]).includes(backend)) throw new Error(`host bench: unknown backend ${backend} (have ${BACKENDS.join(', ')})`);
  const variant = o.variant ?? HOST_DEFAULTS.variant;
  const ctx = await GpuContext.create({ backend: backend as BackendName, variant });
  const opts = {
    batches: o.batches ?? HOST_DEFAULTS.batches,
    steps: o.steps ?? HOST_DEFAULTS.steps,
    warmup: o.warmup ?? HOST_DEFAULTS.warmup,
    submitBatches: o.submitBatches ?? HOST_DEFAULTS.submitBatches,
    submitSteps: o.submitSteps ?? HOST_DEFAULTS.submitSteps,
  };
  const rows: HostRow[] = [];
  try {
    for (const shape of o.shapes ?? HOST_SHAPES) {
      rows.push(...(await measureShape(ctx, shape, o.layers?.[shape] ?? HOST_DEFAULTS.layers[shape], opts, log)));
    }
  } finally {
    ctx.destroy();
  }
  const info = ctx.gpu.info;
  return { backend, variant, adapter: `${info.name} (${info.backend})`, steps: opts.steps, submitSteps: opts.submitSteps, position: POSITION, rows };
}

/** Markdown: one row per (shape, B); extrapolated full-depth figures labelled as such. */
export function hostTable(r: HostReport): string {
  const lines = [
    `Host time of one greedy decode step (Dawn ${r.adapter}; generic per-op path, \`${r.variant}\` kernel variant, f16 weights, f32 KV; every sequence at position ~${r.position}). ` +
      `Record: a new Recorder to the end of recording (forward pass, sampling, ids readback; bind groups and uniforms ready), median of ${r.steps} steps recorded and discarded: ` +
      'through the ops (step graphs off), and replaying the step\'s graph (the default; the same dispatches), in alternating blocks. ' +
      `Record + submit: the default path plus \`rec.submit()\` (one uniform write, \`queue.submit\`) to its return, median of ${r.submitSteps} submitted steps; ` +
      'the device computes afterwards, outside the timing (its time in the last column, for context). ' +
      'Where layers are cut, the full-depth columns are **extrapolated**: µs/dispatch × the full model\'s dispatch count (layers × dispatches/layer + the rest).',
    '',
    '| shape | B | layers built | dispatches / step | dispatches / layer | record µs / step, ops | record µs / dispatch, ops | record µs / step, graph | record µs / dispatch, graph | record + submit µs / step | of which submit µs | record + submit µs / dispatch | full-depth dispatches | full-depth record + submit µs / step | device ms / step |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const x of r.rows) {
    const cut = x.layers < x.fullLayers && Number.isFinite(x.perLayer);
    const fullDispatches = cut ? x.dispatches + (x.fullLayers - x.layers) * x.perLayer : x.dispatches;
    const fullUs = !Number.isFinite(x.stepUs) ? '—' : cut ? `${f1(x.perDispatchUs * fullDispatches)} (extrapolated)` : f1(x.stepUs);
    lines.push(
      `| ${x.shape} | ${x.batch} | ${x.layers} of ${x.fullLayers} | ${x.dispatches} | ${Number.isFinite(x.perLayer) ? x.perLayer : '—'} | ${f1(x.recordUs)} | ${f2(x.recordPerDispatchUs)} | ${f1(x.graphRecordUs)} | ${f2(x.graphRecordPerDispatchUs)} | ` +
        `${f1(x.stepUs)} | ${f1(x.submitUs)} | ${f2(x.perDispatchUs)} | ${fullDispatches} | ${fullUs} | ${f1(x.deviceMs)} |`,
    );
  }
  return lines.join('\n');
}
