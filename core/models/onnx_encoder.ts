/**
 * OnnxEncoderModel: the fallback for encoder architectures Weft has no kernels for. An HF
 * model directory with `onnx/model.onnx` (+ tokenizer.json, config.json, and optionally the
 * sentence-transformers modules.json / 1_Pooling / 2_Dense) runs through onnxruntime-web,
 * behind the same API as EncoderModel: embed, rerank, classify, encode, hiddenStates,
 * kind, dims, maxTokens, labels, tokenizer, destroy.
 *
 * Only the transformer body runs in ORT. Everything around it is EncoderModel's code:
 * tokenization and pair building (bert/config.ts specialTemplate + buildInput), the head
 * and sentence-transformers spec (readEncoderHead), pooling / Dense / Normalize and score
 * functions (bert/pooling.ts), dynamic batching (EncoderBatcher). So the two backends
 * differ only in where the hidden states come from, and tests can compare them directly.
 *
 * The graph is fed input_ids, attention_mask and, when it has them, token_type_ids and
 * position_ids (int64 or int32, as it declares). It must output `last_hidden_state`
 * [B, S, D] (embedding models) or, for *ForSequenceClassification configs, `logits`
 * [B, labels] (optimum's export interfaces). One tiny input runs at load to learn D and
 * warm the session up.
 *
 * Execution providers: WebGPU on the context's own device where that works, else WASM.
 * Default: webgpu then wasm on navigator.gpu (browsers); wasm on Dawn (Node / Deno), where
 * the GPU adapters here are CPU emulations and ORT's first WebGPU run compiles its
 * pipelines while blocking the event loop for a minute or more (onnx_encoder.test.ts,
 * bench/embeddings.ts): ask for ['webgpu'] explicitly there. Each provider gets its runtime
 * build from onnxRuntime(ep) (the WASM one can be stopped in a worker thread; onnx_runtime.ts).
 */
import { EncoderBatcher } from '../engine/encoder_batcher.ts';
import { InvalidRequestError, ModelFormatError, UnsupportedModelError } from '../errors.ts';
import type { ModelSource } from '../formats/source.ts';
import type { GpuContext } from '../gpu/context.ts';
import { loadTokenizerFromSource, type Tokenizer } from '../tokenizer/tokenizer.ts';
import { buildInput, classifierActivation, readEncoderHead, readObject, specialTemplate, type EncodedInput, type EncoderHeadSpec, type SpecialTemplate, type StModule } from './bert/config.ts';
import type { EncoderInput, EncoderLoadOptions } from './bert/encoder.ts';
import { classScores, cosine, runStModules, sigmoid } from './bert/pooling.ts';
import { loadHostLinear, moduleTensors, type HostLinear } from './bert/weights.ts';
import { onnxRuntime, webgpuProvider, type OnnxExecutionProvider, type OrtModule } from './onnx_runtime.ts';
import type * as Ort from 'onnxruntime-web';

export const ONNX_MODEL_FILE = 'onnx/model.onnx';

export interface OnnxEncoderLoadOptions extends Omit<EncoderLoadOptions, 'dtype'> {
  /** Providers to try in order (default: webgpu then wasm in browsers, wasm on Dawn). */
  executionProviders?: OnnxExecutionProvider[];
  /** The graph inside the model directory (default onnx/model.onnx). */
  file?: string;
  /** An onnxruntime-web module to use instead of the registered / imported one. */
  ort?: OrtModule;
}

interface Job {
  input: EncodedInput;
  want: 'embed' | 'logits';
  normalize?: boolean;
}

type IntKind = 'int64' | 'int32';

/**
 * The head spec plus the one body figure readers use (vocabulary size, for detokenize
 * bounds): the same shape as EncoderModel's spec where the two meet (EncoderLike).
 */
export type OnnxEncoderSpec = EncoderHeadSpec & { readonly cfg: { readonly vocabSize: number } };

interface Io {
  ints: Map<string, IntKind>;
  output: string;
  padId: number;
  /** 0: positions 0..S-1; else RoBERTa positions from padding_idx + 1 (= this offset). */
  positionOffset: number;
}

/** model_types whose positions start at padding_idx + 1 (RoBERTa family). */
const ROBERTA_LIKE = new Set(['roberta', 'xlm-roberta', 'camembert', 'mpnet', 'longformer', 'data2vec-text', 'xmod']);

export class OnnxEncoderModel {
  readonly backend = 'onnx' as const;
  readonly kind: 'embed' | 'classify';
  readonly dims: number;
  readonly maxTokens: number;
  readonly labels: readonly string[];
  private readonly batcher: EncoderBatcher<Job, Float32Array>;
  private readonly st: StModule[];
  /** Token slots (B * S) per session run. */
  private readonly maxBatchTokens: number;
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(
    readonly spec: OnnxEncoderSpec,
    readonly tokenizer: Tokenizer,
    /** The execution provider the session runs on. */
    readonly executionProvider: OnnxExecutionProvider,
    /** Width of the last hidden states (0 for logits-only graphs). */
    readonly hiddenSize: number,
    private readonly ort: OrtModule,
    private readonly session: Ort.InferenceSession,
    private readonly template: SpecialTemplate,
    private readonly io: Io,
    private readonly dense: Map<string, HostLinear>,
    nLabels: number,
    opts: OnnxEncoderLoadOptions,
  ) {
    const logits = io.output === 'logits';
    this.kind = logits ? 'classify' : 'embed';
    this.maxTokens = spec.maxTokens;
    this.labels = logits ? (spec.labels.length === nLabels ? spec.labels : Array.from({ length: nLabels }, (_, i) => `LABEL_${i}`)) : [];
    this.st = spec.st ?? [{ kind: 'pooling', modes: [opts.pooling ?? (spec.wantsClassifier ? 'cls' : 'mean')] }];
    let dims = hiddenSize;
    for (const m of this.st) dims = m.kind === 'pooling' ? m.modes.length * hiddenSize : m.kind === 'dense' ? m.outFeatures : dims;
    this.dims = logits ? 0 : dims;
    this.batcher = new EncoderBatcher((jobs) => this.runJobs(jobs), {
      ...(opts.maxBatchSize !== undefined ? { maxBatchSize: opts.maxBatchSize } : {}),
      ...(opts.batchDurationMs !== undefined ? { batchDurationMs: opts.batchDurationMs } : {}),
    });
    this.maxBatchTokens = Math.max(spec.maxTokens, opts.maxBatchTokens ?? 4096);
  }

  /** Opens `onnx/model.onnx` of `ms` in onnxruntime-web; `ctx` (may be null) lends its device to the WebGPU EP. */
  static async load(ctx: GpuContext | null, ms: ModelSource, opts: OnnxEncoderLoadOptions = {}): Promise<OnnxEncoderModel> {
    const file = opts.file ?? ONNX_MODEL_FILE;
    if (!(await ms.exists(file))) throw new ModelFormatError(`${ms.name}: no ${file}`, { path: file });
    const raw = await readObject(ms, 'config.json');
    const modelType = typeof raw.model_type === 'string' ? raw.model_type : '';
    const roberta = ROBERTA_LIKE.has(modelType);
    const maxPos = typeof raw.max_position_embeddings === 'number' ? raw.max_position_embeddings : 512;
    const cfgPad = typeof raw.pad_token_id === 'number' ? raw.pad_token_id : null;
    const positionOffset = roberta ? (cfgPad ?? 1) + 1 : 0;
    const head = await readEncoderHead(ms, raw, modelType || 'onnx', maxPos - positionOffset, opts.maxTokens !== undefined ? { maxTokens: opts.maxTokens } : {});
    const tokenizer = await loadTokenizerFromSource(ms);
    const vocabSize = typeof raw.vocab_size === 'number' && Number.isSafeInteger(raw.vocab_size) && raw.vocab_size > 0 ? raw.vocab_size : tokenizer.vocabSize;
    const spec: OnnxEncoderSpec = { ...head, cfg: { vocabSize } };
    const family = tokenizer.tokenToId('[CLS]') !== undefined ? 'bert' : 'roberta';
    const template = specialTemplate(JSON.parse(await ms.readText('tokenizer.json')), tokenizer, family);

    const dense = new Map<string, HostLinear>();
    for (const m of spec.st ?? []) {
      if (m.kind !== 'dense') continue;
      const l = await loadHostLinear(await moduleTensors(ms, `${m.path}/model.safetensors`), 'linear', m.bias);
      if (l.inFeatures !== m.inFeatures || l.outFeatures !== m.outFeatures) throw new ModelFormatError(`${m.path}: weight shape does not match its config`);
      dense.set(m.path, l);
    }

    const bytes = await readAll(ms, file);
    const wanted = opts.executionProviders ?? (ctx?.gpu.info.backend === 'navigator' ? ['webgpu', 'wasm'] : ['wasm']);
    let session: Ort.InferenceSession | null = null;
    let ort: OrtModule | null = null;
    let ep: OnnxExecutionProvider = 'wasm';
    const errors: string[] = [];
    for (const name of wanted) {
      if (name === 'webgpu' && !ctx) {
        errors.push('webgpu: no GPU context');
        continue;
      }
      try {
        ort = opts.ort ?? (await onnxRuntime(name));
        const provider = name === 'webgpu' ? webgpuProvider(ctx!) : 'wasm';
        session = await ort.InferenceSession.create(bytes, { executionProviders: [provider], graphOptimizationLevel: 'all' });
        ep = name;
        break;
      } catch (e) {
        // e.g. a runtime build without the WebGPU EP: try the next provider.
        errors.push(`${name}: ${(e as Error).message}`);
      }
    }
    if (!session || !ort) throw new UnsupportedModelError(`${ms.name}: onnxruntime-web could not open ${file} (${errors.join('; ')})`);

    const ints = new Map<string, IntKind>();
    for (const meta of session.inputMetadata) {
      const type = meta.isTensor ? meta.type : 'int64';
      if (!['input_ids', 'attention_mask', 'token_type_ids', 'position_ids'].includes(meta.name)) {
        throw new UnsupportedModelError(`${ms.name}/${file}: unsupported graph input ${meta.name}`, { input: meta.name });
      }
      if (type !== 'int64' && type !== 'int32') throw new UnsupportedModelError(`${file}: input ${meta.name} is ${type}, expected int64 or int32`);
      ints.set(meta.name, type);
    }
    if (!ints.has('input_ids') || !ints.has('attention_mask')) throw new UnsupportedModelError(`${file}: graph needs input_ids and attention_mask inputs`);
    const outs = session.outputNames;
    const output = spec.wantsClassifier && outs.includes('logits') ? 'logits' : outs.includes('last_hidden_state') ? 'last_hidden_state' : null;
    if (!output) {
      throw new UnsupportedModelError(`${file}: no ${spec.wantsClassifier ? 'logits' : 'last_hidden_state'} output (has ${outs.join(', ')})`);
    }
    if (!ints.has('token_type_ids') || (typeof raw.type_vocab_size === 'number' && raw.type_vocab_size < 2)) template.zeroTypes = true;
    const padId = cfgPad ?? tokenizer.padId ?? 0;
    const io: Io = { ints, output, padId, positionOffset };

    // Probe: the shortest input tells the output width and warms the session up.
    const probe = buildInput(template, [], null, spec.maxTokens);
    const out = (await session.run(feeds(ort, io, [probe], probe.ids.length)))[output]!;
    const width = Number(out.dims[out.dims.length - 1]);
    const model = new OnnxEncoderModel(spec, tokenizer, ep, output === 'logits' ? 0 : width, ort, session, template, io, dense, output === 'logits' ? width : 0, opts);
    return model;
  }

  /** Token ids / types of a text or a (text, text) pair, truncated to maxTokens. */
  encode(input: EncoderInput): EncodedInput {
    const seg = (s: unknown): number[] => {
      if (typeof s !== 'string') throw new InvalidRequestError('invalid_input', 'encoder inputs must be strings or [string, string] pairs');
      return this.tokenizer.encode(s, { addSpecialTokens: false });
    };
    if (Array.isArray(input)) {
      if (input.length !== 2) throw new InvalidRequestError('invalid_input', 'a pair input must have exactly two strings');
      return buildInput(this.template, seg(input[0]), seg(input[1]), this.maxTokens);
    }
    return buildInput(this.template, seg(input), null, this.maxTokens);
  }

  async embed(texts: string[], opts: { normalize?: boolean; signal?: AbortSignal } = {}): Promise<{ vectors: Float32Array[]; dims: number; truncated: boolean[]; tokens: number[] }> {
    if (this.kind !== 'embed') throw new InvalidRequestError('not_an_embedding_model', 'embed needs an embedding model; this ONNX graph outputs classifier logits');
    const inputs = strings(texts).map((t) => this.encode(t));
    const jobs = inputs.map((input): Job => ({ input, want: 'embed', ...(opts.normalize !== undefined ? { normalize: opts.normalize } : {}) }));
    const vectors = await this.batcher.submit(jobs, opts.signal ? { signal: opts.signal } : {});
    return { vectors, dims: this.dims, truncated: inputs.map((i) => i.truncated), tokens: inputs.map((i) => i.ids.length) };
  }

  async classify(inputs: EncoderInput[], opts: { signal?: AbortSignal } = {}): Promise<{ label: string; score: number; scores: Record<string, number> }[]> {
    if (this.kind !== 'classify') throw new InvalidRequestError('not_a_classifier', 'classify needs a *ForSequenceClassification model; this is an embedding model');
    if (!Array.isArray(inputs)) throw new InvalidRequestError('invalid_input', 'inputs must be an array');
    const activation = classifierActivation(this.spec.problemType, this.labels.length);
    const logits = await this.batcher.submit(inputs.map((i): Job => ({ input: this.encode(i), want: 'logits' })), opts.signal ? { signal: opts.signal } : {});
    return logits.map((l) => {
      const s = classScores(l, activation);
      const best = s.reduce((bi, v, i) => (v > s[bi]! ? i : bi), 0);
      return { label: this.labels[best]!, score: s[best]!, scores: Object.fromEntries(this.labels.map((n, i) => [n, s[i]!])) };
    });
  }

  /** Relevance of each document to the query (cross-encoder sigmoid, or embedding cosine), and the ranking. */
  async rerank(query: string, documents: string[], opts: { signal?: AbortSignal } = {}): Promise<{ scores: number[]; ranking: { index: number; score: number }[] }> {
    const [q] = strings([query]);
    const docs = strings(documents);
    const sig = opts.signal ? { signal: opts.signal } : {};
    let scores: number[];
    if (this.kind === 'classify') {
      if (this.labels.length !== 1) throw new InvalidRequestError('not_a_reranker', `rerank needs a one-label cross-encoder; this classifier has ${this.labels.length} labels`);
      const logits = await this.batcher.submit(docs.map((d): Job => ({ input: this.encode([q!, d]), want: 'logits' })), sig);
      scores = logits.map((l) => sigmoid(l[0]!));
    } else {
      const [qv, ...dv] = await this.batcher.submit([q!, ...docs].map((t): Job => ({ input: this.encode(t), want: 'embed' })), sig);
      scores = dv.map((v) => cosine(qv!, v));
    }
    const ranking = scores.map((score, index) => ({ index, score })).sort((a, b) => b.score - a.score || a.index - b.index);
    return { scores, ranking };
  }

  /** Last hidden states of each input, [ids.length, D] f32 (embedding graphs only). */
  async hiddenStates(inputs: readonly EncodedInput[]): Promise<Float32Array[]> {
    if (this.kind !== 'embed') throw new InvalidRequestError('not_an_embedding_model', 'this ONNX graph outputs logits, not hidden states');
    return this.exclusive(() => this.passes(inputs));
  }

  destroy(): void {
    this.batcher.close();
    void this.queue.finally(() => this.session.release()).catch(() => undefined);
  }

  /** One session run at a time (ORT sessions are not re-entrant). */
  private exclusive<T>(f: () => Promise<T>): Promise<T> {
    const run = this.queue.then(f, f);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async runJobs(jobs: Job[]): Promise<Float32Array[]> {
    const D = this.hiddenSize;
    const rows = await this.exclusive(() => this.passes(jobs.map((j) => j.input)));
    return jobs.map((j, k) => (j.want === 'logits' ? rows[k]! : runStModules(rows[k]!, j.input.ids.length, D, this.st, this.dense, j.normalize)));
  }

  /**
   * Session runs over `inputs`, grouped as EncoderModel groups its GPU passes: sorted by
   * length, each group padded to its longest input while rows * longest fits
   * maxBatchTokens and at least half the slots are real tokens. Returns per input its
   * hidden states [len, D], or its logits.
   */
  private async passes(inputs: readonly EncodedInput[]): Promise<Float32Array[]> {
    const len = (i: number): number => inputs[i]!.ids.length;
    const order = inputs.map((_, i) => i).sort((a, b) => len(b) - len(a) || a - b);
    const out: Float32Array[] = new Array(inputs.length);
    for (let start = 0; start < order.length; ) {
      const S = Math.max(1, len(order[start]!));
      let real = S;
      let B = 1;
      for (; start + B < order.length && (B + 1) * S <= this.maxBatchTokens; B++) {
        const next = len(order[start + B]!);
        if (2 * (real + next) < (B + 1) * S) break;
        real += next;
      }
      const group = order.slice(start, start + B);
      start += B;
      const result = (await this.session.run(feeds(this.ort, this.io, group.map((i) => inputs[i]!), S)))[this.io.output]!;
      const data = (await result.getData()) as Float32Array;
      const W = Number(result.dims[result.dims.length - 1]);
      group.forEach((i, b) => {
        out[i] = this.io.output === 'logits' ? data.slice(b * W, (b + 1) * W) : data.slice(b * S * W, (b * S + len(i)) * W);
      });
      result.dispose();
    }
    return out;
  }
}

/**
 * Graph inputs for rows padded to S: ids (pad id), mask, types, and position ids as
 * EncoderModel.padded makes them (RoBERTa: create_position_ids_from_input_ids, pad tokens
 * at padding_idx and not counted; used only by graphs that take position_ids).
 */
function feeds(ort: OrtModule, io: Io, rows: readonly EncodedInput[], S: number): Record<string, Ort.Tensor> {
  const n = rows.length * S;
  const ids = new Array<number>(n).fill(io.padId);
  const mask = new Array<number>(n).fill(0);
  const types = new Array<number>(n).fill(0);
  const pos = new Array<number>(n).fill(io.positionOffset ? io.padId : 0);
  rows.forEach((r, b) => {
    let count = 0;
    for (let i = 0; i < S; i++) {
      const t = b * S + i;
      if (i < r.ids.length) {
        ids[t] = r.ids[i]!;
        mask[t] = 1;
        types[t] = r.typeIds[i]!;
        pos[t] = !io.positionOffset ? i : r.ids[i] === io.padId ? io.padId : io.positionOffset + count++;
      } else if (!io.positionOffset) pos[t] = i;
    }
  });
  const all: Record<string, number[]> = { input_ids: ids, attention_mask: mask, token_type_ids: types, position_ids: pos };
  const out: Record<string, Ort.Tensor> = {};
  for (const [name, kind] of io.ints) {
    const v = all[name]!;
    out[name] = kind === 'int64' ? new ort.Tensor('int64', BigInt64Array.from(v, BigInt), [rows.length, S]) : new ort.Tensor('int32', Int32Array.from(v), [rows.length, S]);
  }
  return out;
}

function strings(v: unknown): string[] {
  if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) throw new InvalidRequestError('invalid_input', 'expected an array of strings');
  return v as string[];
}

/** A whole model file as one fresh Uint8Array (ORT takes bytes; it would fetch() a path). */
async function readAll(ms: ModelSource, path: string): Promise<Uint8Array> {
  const src = await ms.open(path);
  const bytes = await src.read(0, src.size);
  return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : bytes.slice();
}
