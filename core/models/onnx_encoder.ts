/**
 * OnnxEncoderModel: the fallback for encoder architectures Weft has no kernels for. An HF
 * model directory with `onnx/model.onnx` (+ tokenizer.json, config.json, and optionally the
 * sentence-transformers modules.json / 1_Pooling / 2_Dense) runs through onnxruntime-web,
 * behind the same API as EncoderModel: embed, rerank, classify, encode, hiddenStates,
 * kind, dims, maxTokens, labels, tokenizer, destroy.
 *
 * Only the transformer body runs in ORT. Everything around it is EncoderModel's code:
 * the request side, EncoderFront (encoder_front.ts: tokenization and pair building,
 * dynamic batching, pooling / Dense / Normalize and score functions), and the head and
 * sentence-transformers spec (readEncoderHead). So the two backends differ only in where
 * the hidden states (or logits) come from, and tests can compare them directly.
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
import { InvalidRequestError, ModelFormatError, UnsupportedModelError } from '../errors.ts';
import type { ModelSource } from '../formats/source.ts';
import type { GpuContext } from '../gpu/context.ts';
import { loadTokenizerFromSource, type Tokenizer } from '../tokenizer/tokenizer.ts';
import { buildInput, classifierActivation, readEncoderHead, readObject, specialTemplate, type EncodedInput, type EncoderHeadSpec, type SpecialTemplate } from './bert/config.ts';
import type { EncoderLoadOptions } from './bert/encoder.ts';
import type { HostLinear } from './bert/weights.ts';
import { EncoderFront, loadDenseModules } from './encoder_front.ts';
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

export class OnnxEncoderModel extends EncoderFront<OnnxEncoderSpec> {
  readonly backend = 'onnx' as const;
  /** Token slots (B * S) per session run. */
  private readonly maxBatchTokens: number;

  private constructor(
    spec: OnnxEncoderSpec,
    tokenizer: Tokenizer,
    /** The execution provider the session runs on. */
    readonly executionProvider: OnnxExecutionProvider,
    /** Width of the last hidden states (0 for logits-only graphs). */
    readonly hiddenSize: number,
    private readonly ort: OrtModule,
    private readonly session: Ort.InferenceSession,
    template: SpecialTemplate,
    private readonly io: Io,
    dense: Map<string, HostLinear>,
    nLabels: number,
    opts: OnnxEncoderLoadOptions,
  ) {
    const logits = io.output === 'logits';
    const labels = spec.labels.length === nLabels ? spec.labels : Array.from({ length: nLabels }, (_, i) => `LABEL_${i}`);
    const classes = logits ? { labels, activation: classifierActivation(spec.problemType, nLabels) } : null;
    super(spec, tokenizer, template, classes, hiddenSize, dense, opts, logits ? 0 : undefined);
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

    const dense = await loadDenseModules(ms, spec.st);

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

  /** A logits-only graph has no hidden states to pool: embed() is refused. */
  protected override embedCheck(): void {
    if (this.kind !== 'embed') throw new InvalidRequestError('not_an_embedding_model', 'embed needs an embedding model; this ONNX graph outputs classifier logits');
  }

  /** Last hidden states of each input, [ids.length, D] f32 (embedding graphs only). */
  override async hiddenStates(inputs: readonly EncodedInput[]): Promise<Float32Array[]> {
    if (this.kind !== 'embed') throw new InvalidRequestError('not_an_embedding_model', 'this ONNX graph outputs logits, not hidden states');
    return this.exclusive(() => this.passes(inputs));
  }

  /** Releases the session after the runs already queued (ORT sessions are not re-entrant: one run at a time). */
  protected override release(): void {
    void this.exclusive(() => this.session.release()).catch(() => undefined);
  }

  /** The graph gives every row (or logits): no first-row-only passes. */
  protected override firstRowsOnly(): boolean {
    return false;
  }

  /** A logits graph's output row is the logits. */
  protected override logits(row: Float32Array): Float32Array {
    return row;
  }

  /**
   * Session runs over `inputs`, grouped as EncoderModel groups its GPU passes (passGroups()
   * within maxBatchTokens). Returns per input its hidden states [len, D], or its logits
   * (rows are always all of them).
   */
  protected override async passes(inputs: readonly EncodedInput[]): Promise<Float32Array[]> {
    const len = (i: number): number => inputs[i]!.ids.length;
    const out: Float32Array[] = new Array(inputs.length);
    for (const { group, S } of this.passGroups(inputs, this.maxBatchTokens)) {
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

/** A whole model file as one fresh Uint8Array (ORT takes bytes; it would fetch() a path). */
async function readAll(ms: ModelSource, path: string): Promise<Uint8Array> {
  const src = await ms.open(path);
  const bytes = await src.read(0, src.size);
  return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : bytes.slice();
}
