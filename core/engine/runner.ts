/**
 * The only bridge from the scheduler to the GPU. Turns a StepPlan (plain
 * data) into the model's StepInputs, records the forward pass and GPU
 * sampling into one Recorder, submits once and reads back only the sampled
 * ids ([R] u32). When every row is plain greedy and the model fuses the
 * argmax for the step (the decode megakernel), the model writes the ids
 * itself and the sampler's dispatch is skipped.
 */
import type { GpuContext } from '../gpu/context.ts';
import type { Recorder } from '../gpu/recorder.ts';
import type { Tensor } from '../gpu/tensor.ts';
import type { DecodePathCounts, RecordOptions, StepGeometry, StepInputs } from '../models/step.ts';
import { logitBias } from '../ops/logit_bias.ts';
import { logprobs, logprobWords, type RowLogprobs, unpackLogprobs } from '../ops/logprobs.ts';
import { isPlainGreedy, sample, type SampleRow } from '../ops/sample.ts';
import type { KvCacheManager } from './kv_cache.ts';
import { EmbedCollector } from './prompt_embeds.ts';
import type { StepPlan } from './scheduler.ts';

/** A decoder the runner can drive (LlamaModel and friends). */
export interface StepModel {
  readonly geo: StepGeometry;
  readonly cfg: { vocabSize: number };
  record(rec: Recorder, s: StepInputs, opts?: RecordOptions): Promise<Tensor | null>;
  /** True when record() can write greedy ids instead of logits for s (RecordOptions.argmaxInto). */
  fusesArgmax?(s: StepInputs): boolean;
  /** Steps recorded per decode path, for metrics (LlamaModel). */
  readonly pathCounts?: Readonly<DecodePathCounts>;
}


/** Per sampled row: its sampling state and an optional allowed-token bitmask [ceil(V/32)]. */
export interface RowSampling extends SampleRow {
  mask?: Uint32Array | null;
  /**
   * The allowed-token mask, computed once the step's forward is submitted (a constraint's
   * mask: CPU work that then overlaps the device's forward instead of delaying it). Null = any.
   */
  deferredMask?: () => Uint32Array | null;
  /** Log-probabilities of the sampled token and this many alternatives (0-20); absent = none. */
  logprobs?: number;
  /** Token id -> bias added to the logits before sampling (OpenAI logit_bias). */
  bias?: ReadonlyMap<number, number>;
}

export interface StepResult {
  /** Sampled id per logit row: one per plan entry with `sample: true` (1 + draft length for speculative entries), in plan order. */
  ids: Uint32Array;
  /** With `readLogits`: the logits [rows, V] of every logit row. */
  logits?: Float32Array;
  /** Tokens computed this step. */
  tokens: number;
  /** When a row asked for logprobs: one entry per logit row (rows that did not ask get the step's widest top list too). */
  logprobs?: RowLogprobs[];
}

export class Runner {
  private readonly out: Tensor;
  private readonly maskWords: number;
  /** Forward passes run (for tests: proves prefix reuse computes fewer tokens). */
  computedTokens = 0;
  /** Steps whose greedy ids the model wrote itself (no sampler dispatch), for tests and metrics. */
  fusedArgmaxSteps = 0;
  /** Steps whose masks were computed while their forward was already on the device (tests, metrics). */
  overlappedMaskSteps = 0;

  constructor(
    readonly ctx: GpuContext,
    readonly model: StepModel,
    readonly kv: KvCacheManager,
  ) {
    const R = model.geo.maxLogitRows ?? model.geo.maxSeqs;
    this.out = ctx.scratch([R], 'u32');
    ctx.timeSteps(); // GPU busy time for metrics, where the adapter has timestamp queries
    this.maskWords = Math.ceil(model.cfg.vocabSize / 32);
  }

  /** Builds the plain step inputs for a plan. */
  inputs(plan: StepPlan): StepInputs {
    const geo = this.model.geo;
    const T = plan.tokens;
    const S = plan.scheduled.length;
    const tokens = new Uint32Array(T);
    const positions = new Uint32Array(T);
    const tokenSeq = new Uint32Array(T);
    const slots = new Uint32Array(T);
    const blockTables = new Uint32Array(S * geo.maxBlocksPerSeq);
    const logitRows: number[] = [];
    const embeds = new EmbedCollector();
    let t = 0;
    plan.scheduled.forEach((s, i) => {
      const table = this.kv.blockTable(s.seq.id);
      if (table.length > geo.maxBlocksPerSeq) throw new Error(`sequence ${s.seq.id} exceeds the block table width`);
      blockTables.set(table, i * geo.maxBlocksPerSeq);
      const known = s.seq.tokens.length;
      const firstRow = s.draft ? t + s.count - 1 - s.draft.length : -1;
      for (let k = 0; k < s.count; k++, t++) {
        const pos = s.start + k;
        tokens[t] = pos < known ? s.seq.tokens[pos]! : s.draft![pos - known]!;
        if (s.draft && t >= firstRow) logitRows.push(t);
        positions[t] = pos;
        tokenSeq[t] = i;
        slots[t] = table[Math.floor(pos / geo.blockSize)]! * geo.blockSize + (pos % geo.blockSize);
      }
      if (s.sample && !s.draft) logitRows.push(t - 1);
      if (s.seq.embeds) embeds.add(s.seq.embeds, s.start, s.count, t - s.count);
    });
    return { tokens, positions, tokenSeq, slots, blockTables, numSeqs: S, logitRows: Uint32Array.from(logitRows), ...embeds.inputs() };
  }

  /** Runs one step: forward, sampling of the rows that need a token, one readback. */
  async step(plan: StepPlan, rows: readonly RowSampling[], opts: { readLogits?: boolean } = {}): Promise<StepResult> {
    const inputs = this.inputs(plan);
    const R = inputs.logitRows.length;
    if (rows.length !== R) throw new Error(`runner: ${rows.length} sampling rows for ${R} logit rows`);
    const out: Tensor = { ...this.out, shape: [R] };
    const K = rows.reduce((k, r) => (r.logprobs === undefined ? k : Math.max(k, r.logprobs)), -1);
    const biased = rows.some((r) => r.bias?.size);
    const fused = R > 0 && K < 0 && !biased && !opts.readLogits && rows.every((r) => isPlainGreedy(r, !!r.mask || !!r.deferredMask)) && (this.model.fusesArgmax?.(inputs) ?? false);
    const rec = this.ctx.recorder();
    let logits: Tensor | null;
    try {
      logits = await this.model.record(rec, inputs, fused ? { argmaxInto: out } : {});
    } catch (e) {
      rec.discard(); // scratch and uniform staging back to their pools; nothing reaches the device
      throw e;
    }
    this.computedTokens += inputs.tokens.length;
    if (R === 0 || !logits) {
      rec.submit();
      return { ids: new Uint32Array(0), tokens: inputs.tokens.length };
    }
    if (fused) {
      // A model (or a wrapper of record()) that ignored argmaxInto returns logits: fail loudly
      // rather than read back whatever `out` held.
      if (logits.buffer !== out.buffer || logits.dtype !== 'u32') throw new Error('runner: the model returned logits for a fused-argmax step (argmaxInto ignored)');
      this.fusedArgmaxSteps++;
      const read = rec.readback(out);
      rec.submit();
      return { ids: new Uint32Array(await read), tokens: inputs.tokens.length };
    }
    let final = rows;
    if (rows.some((r) => r.deferredMask)) {
      // The forward goes to the device now; the masks are computed while it runs.
      rec.flush();
      try {
        final = rows.map(({ deferredMask, ...r }) => (deferredMask ? { ...r, mask: deferredMask() } : r));
      } catch (e) {
        rec.discard(); // the forward already went; the sampling half is dropped with its scratch
        throw e;
      }
      this.overlappedMaskSteps++;
    }
    let mask: Tensor | undefined;
    if (final.some((r) => r.mask)) {
      const words = new Uint32Array(R * this.maskWords);
      final.forEach((r, i) => {
        if (r.mask) words.set(r.mask, i * this.maskWords);
        else words.fill(0xffffffff, i * this.maskWords, (i + 1) * this.maskWords);
      });
      mask = { buffer: rec.upload(words).buffer, offset: 0, shape: [R, this.maskWords], dtype: 'u32' };
    }
    if (biased) await logitBias(rec, logits, final.map((r) => r.bias));
    await sample(rec, logits, final, out, mask ? { mask } : {});
    // Logprobs from the same logits the sampler read, in the same submission.
    let lpOut: Tensor | null = null;
    if (K >= 0) {
      lpOut = { buffer: rec.temp(R * logprobWords(K) * 4), offset: 0, shape: [R * logprobWords(K)], dtype: 'u32' };
      await logprobs(rec, logits, out, K, lpOut);
    }
    const read = rec.readback(out);
    const readLp = lpOut ? rec.readback(lpOut) : null;
    const readLogits = opts.readLogits ? rec.readback(logits) : null;
    rec.submit();
    const ids = new Uint32Array(await read);
    return {
      ids,
      tokens: inputs.tokens.length,
      ...(readLogits ? { logits: new Float32Array(await readLogits) } : {}),
      ...(readLp ? { logprobs: unpackLogprobs(new Uint32Array(await readLp), R, K) } : {}),
    };
  }

  destroy(): void {
    this.ctx.free(this.out);
  }
}
