/**
 * EncoderModel: a BERT / RoBERTa / XLM-R checkpoint (plain, sentence-transformers or
 * *ForSequenceClassification) loaded onto a GPU context, serving embed, rerank and
 * classify. Every call tokenizes its inputs (pairs through the tokenizer's special-token
 * template, truncated to the model's limit; see config.ts), then queues them on a shared
 * EncoderBatcher so concurrent calls run in common batches. A batch is sorted by length
 * and cut into padded GPU passes of at most `maxBatchTokens` token slots (B * S), at least
 * half of them real tokens; each pass reads back either all hidden states (token pooling)
 * or only each row's first token (CLS pooling, classifier heads), and the host finishes
 * pooling / heads (pooling.ts).
 *
 * Scores: classify applies HF text-classification's function (softmax, or sigmoid for one
 * label / multi-label); rerank with a one-label cross-encoder scores sigmoid(logit) per
 * (query, document) pair, and with an embedding model the cosine similarity of embeddings.
 * The request side (encode, embed, classify, rerank, batching) is EncoderFront's
 * (../encoder_front.ts), shared with OnnxEncoderModel; this file holds the GPU passes and
 * the host ClassifierHead.
 */
import { ModelFormatError } from '../../errors.ts';
import type { ModelSource } from '../../formats/source.ts';
import type { GpuContext } from '../../gpu/context.ts';
import { loadTokenizerFromSource, type Tokenizer } from '../../tokenizer/tokenizer.ts';
import { EncoderFront, loadDenseModules, type EncoderFrontOptions, type EncoderJob } from '../encoder_front.ts';
import type { WeightDType } from '../host_tensor.ts';
import { classifierActivation, readEncoderSpec, specialTemplate, type EncodedInput, type EncoderSpec, type SpecialTemplate } from './config.ts';
import { BertEncoder, type PaddedBatch } from './forward.ts';
import { classifierLogits, type ClassifierHead } from './pooling.ts';
import { destroyBertWeights, encoderPrefix, loadBertWeights, loadHostLinear, modelTensors, type BertWeights, type HostLinear } from './weights.ts';

export type { EncodedInput } from './config.ts';
export type { EncoderInput } from '../encoder_front.ts';

export interface EncoderLoadOptions extends EncoderFrontOptions {
  /** GPU weight dtype (default `auto`: f32). */
  dtype?: WeightDType;
  /** Inputs per batch (WEFT_MAX_BATCH_SIZE; default 32). */
  maxBatchSize?: number;
  /** Longest wait before a partial batch runs, ms (WEFT_BATCH_DURATION_MILLIS; default 5). */
  batchDurationMs?: number;
  /** Token slots (B * S) per GPU pass; sizes the activation buffers (default 4096). */
  maxBatchTokens?: number;
  /** Lower the model's input limit (tokens, specials included). */
  maxTokens?: number;
}

export class EncoderModel extends EncoderFront<EncoderSpec> {
  private constructor(
    readonly ctx: GpuContext,
    spec: EncoderSpec,
    tokenizer: Tokenizer,
    template: SpecialTemplate,
    private readonly weights: BertWeights,
    private readonly forward: BertEncoder,
    private readonly head: ClassifierHead | null,
    dense: Map<string, HostLinear>,
    opts: EncoderLoadOptions,
  ) {
    super(spec, tokenizer, template, head?.spec ?? null, spec.cfg.hiddenSize, dense, opts);
  }

  static async load(ctx: GpuContext, ms: ModelSource, opts: EncoderLoadOptions = {}): Promise<EncoderModel> {
    const spec = await readEncoderSpec(ms, opts.maxTokens !== undefined ? { maxTokens: opts.maxTokens } : {});
    const tokenizer = await loadTokenizerFromSource(ms);
    const template = specialTemplate(JSON.parse(await ms.readText('tokenizer.json')), tokenizer, spec.cfg.architecture === 'BertModel' ? 'bert' : 'roberta');
    if (spec.cfg.typeVocabSize < 2) template.zeroTypes = true; // one token-type row: every type is 0
    const src = await modelTensors(ms);
    const prefix = encoderPrefix(src);
    let head: ClassifierHead | null = null;
    if (spec.wantsClassifier) {
      const roberta = src.has('classifier.out_proj.weight');
      if (!roberta && !src.has('classifier.weight')) throw new ModelFormatError(`${spec.architecture}: no classifier weights in ${ms.name}`);
      if (!roberta && !src.has(`${prefix}pooler.dense.weight`)) throw new ModelFormatError(`${spec.architecture}: classifier without pooler weights`);
      const dense = await loadHostLinear(src, roberta ? 'classifier.dense' : `${prefix}pooler.dense`);
      const out = await loadHostLinear(src, roberta ? 'classifier.out_proj' : 'classifier');
      const n = out.outFeatures;
      const labels = spec.labels.length === n ? spec.labels : Array.from({ length: n }, (_, i) => `LABEL_${i}`);
      head = { spec: { style: roberta ? 'roberta' : 'bert', labels, activation: classifierActivation(spec.problemType, n) }, dense, out };
    }
    const dense = await loadDenseModules(ms, spec.st);
    const weights = await loadBertWeights(ctx, spec.cfg, src, prefix, opts.dtype ?? 'auto');
    const forward = new BertEncoder(ctx, spec.cfg, weights, Math.max(spec.maxTokens, opts.maxBatchTokens ?? 4096));
    return new EncoderModel(ctx, spec, tokenizer, template, weights, forward, head, dense, opts);
  }

  /** Last hidden states of each input, [ids.length, D] f32 (one GPU pass per length-sorted group). */
  override async hiddenStates(inputs: readonly EncodedInput[]): Promise<Float32Array[]> {
    return this.exclusive(() => this.passes(inputs, 'all'));
  }

  protected override release(): void {
    this.forward.destroy();
    destroyBertWeights(this.weights);
  }

  /** CLS pooling and classifier heads read only each input's first row. */
  protected override firstRowsOnly(jobs: readonly EncoderJob[]): boolean {
    return jobs.every((j) => j.want === 'logits' || this.clsOnly());
  }

  /** The host head over the first ([CLS] / <s>) hidden row. */
  protected override logits(h: Float32Array): Float32Array {
    return classifierLogits(this.head!, h.subarray(0, this.spec.cfg.hiddenSize));
  }

  /**
   * Forward passes over `inputs`, grouped by passGroups() within the encoder's capacity.
   * Returns per input its hidden states [len, D] ('all') or its first row [1, D] ('first').
   */
  protected override async passes(inputs: readonly EncodedInput[], rows: 'all' | 'first'): Promise<Float32Array[]> {
    const D = this.spec.cfg.hiddenSize;
    const len = (i: number): number => inputs[i]!.ids.length;
    const out: Float32Array[] = new Array(inputs.length);
    for (const { group, S } of this.passGroups(inputs, this.forward.maxTokens)) {
      const batch = this.padded(group.map((i) => inputs[i]!), S);
      const rec = this.ctx.recorder();
      const first = rows === 'first' ? Uint32Array.from(group, (_, b) => b * S) : undefined;
      const t = await this.forward.record(rec, batch, first);
      const pending = rec.readback(t);
      rec.submit();
      const data = new Float32Array(await pending);
      group.forEach((i, b) => {
        out[i] = first ? data.slice(b * D, (b + 1) * D) : data.slice(b * S * D, (b * S + len(i)) * D);
      });
    }
    return out;
  }

  /** Host arrays of one padded batch; positions per model family (RoBERTa: from padding_idx + 1). */
  private padded(rows: EncodedInput[], S: number): PaddedBatch {
    const { positionOffset, padTokenId } = this.spec.cfg;
    const B = rows.length;
    const pad = padTokenId ?? 0;
    const b: PaddedBatch = { B, S, ids: new Uint32Array(B * S).fill(pad), positions: new Uint32Array(B * S), typeIds: new Uint32Array(B * S), lengths: new Uint32Array(B) };
    rows.forEach((r, row) => {
      b.lengths[row] = r.ids.length;
      let count = 0; // create_position_ids_from_input_ids: pad tokens sit at padding_idx and are not counted
      for (let i = 0; i < S; i++) {
        const t = row * S + i;
        if (i < r.ids.length) {
          b.ids[t] = r.ids[i]!;
          b.typeIds[t] = r.typeIds[i]!;
          b.positions[t] = positionOffset === 0 ? i : r.ids[i] === pad ? pad : positionOffset + count++;
        } else b.positions[t] = positionOffset === 0 ? i : pad;
      }
    });
    return b;
  }
}
