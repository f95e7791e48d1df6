/**
 * BERT / RoBERTa / XLM-R weights: Hugging Face tensor names -> our GPU layout, plus the
 * small heads that run on the host.
 *
 * Checkpoints name the encoder with or without a prefix (`bert.`, `roberta.`: the
 * `*ForSequenceClassification` / `*ForMaskedLM` layouts; none: plain BertModel and
 * sentence-transformers); the prefix is found from the word-embedding tensor. Old
 * TF-converted checkpoints call LayerNorm parameters gamma / beta: both are accepted.
 * As in the decoder (llama/weights.ts), q/k/v are fused into one [3D, D] matrix (q rows,
 * then k, then v) with one bias, so a layer runs one projection matmul for them.
 *
 * Heads (BERT pooler + classifier, RoBERTa classifier.dense + out_proj, sentence-
 * transformers Dense modules) stay on the host as f32: they touch one row per input
 * (O(D^2) per input against O(S * L * D^2) for the body) and need tanh, which the
 * activation kernel does not have.
 */
import { ModelFormatError } from '../../errors.ts';
import type { EncoderConfig } from '../../formats/hf_config.ts';
import { openSafetensors, openSafetensorsModel, toFloat32, type SafetensorsDType } from '../../formats/safetensors.ts';
import type { ModelSource } from '../../formats/source.ts';
import type { GpuContext } from '../../gpu/context.ts';
import type { Tensor } from '../../gpu/tensor.ts';
import type { LinearWeight } from '../../ops/matmul.ts';
import { concatRows, type HostTensor, type WeightDType } from '../host_tensor.ts';
import { WeightUploader } from '../llama/weights.ts';

/** LayerNorm weight and bias, [D] f32 each. */
export interface NormWeights {
  w: Tensor;
  b: Tensor;
}

export interface BertLayerWeights {
  /** Fused q|k|v projection [3D, D] with bias [3D]. */
  qkv: LinearWeight;
  /** attention.output.dense [D, D]. */
  o: LinearWeight;
  attnNorm: NormWeights;
  /** intermediate.dense [I, D]. */
  inter: LinearWeight;
  /** output.dense [D, I]. */
  out: LinearWeight;
  outNorm: NormWeights;
}

export interface BertWeights {
  /** Word embeddings [V, D] (any embedding-table dtype). */
  word: Tensor;
  /** Absolute positions [P, D] f32. */
  pos: Tensor;
  /** Token types [TT, D] f32. */
  type: Tensor;
  embNorm: NormWeights;
  layers: BertLayerWeights[];
  /** Bytes of GPU memory the weights occupy. */
  bytes: number;
}

/** A host-side linear layer y = W x (+ b): w [out, in] row-major f32. */
export interface HostLinear {
  w: Float32Array;
  b: Float32Array | null;
  inFeatures: number;
  outFeatures: number;
}

/** Named f32 tensors of one checkpoint (one or more safetensors files). */
export interface TensorSource {
  names(): string[];
  has(name: string): boolean;
  load(name: string): Promise<HostTensor & { kind: 'f32' }>;
}

const FLOAT_DTYPES: readonly SafetensorsDType[] = ['F32', 'F16', 'BF16', 'F64'];

function sourceOver(
  tensors: ReadonlyMap<string, { dtype: SafetensorsDType; shape: readonly number[] }>,
  read: (n: string) => Promise<Uint8Array>,
  what: string,
): TensorSource {
  return {
    names: () => [...tensors.keys()],
    has: (n) => tensors.has(n),
    async load(n) {
      const t = tensors.get(n);
      if (!t) throw new ModelFormatError(`${what} has no tensor ${n}`, { tensor: n });
      if (!FLOAT_DTYPES.includes(t.dtype)) throw new ModelFormatError(`${what}: tensor ${n} is ${t.dtype}, expected a float`, { tensor: n });
      return { kind: 'f32', shape: [...t.shape], data: toFloat32(t.dtype, await read(n)) };
    },
  };
}

/** The model's own safetensors checkpoint (model.safetensors or an index of shards). */
export async function modelTensors(ms: ModelSource): Promise<TensorSource> {
  const st = await openSafetensorsModel(ms);
  const infos = new Map([...st.tensors].map(([n, t]) => [n, t.info]));
  return sourceOver(infos, (n) => st.read(n), ms.name);
}

/** One safetensors file of a sentence-transformers module (e.g. 2_Dense/model.safetensors). */
export async function moduleTensors(ms: ModelSource, path: string): Promise<TensorSource> {
  if (!(await ms.exists(path))) throw new ModelFormatError(`${ms.name}: no ${path} (only safetensors module weights are supported)`, { path });
  const st = await openSafetensors(await ms.open(path), path);
  return sourceOver(st.tensors, (n) => st.read(n), path);
}

/** Prefix of the encoder's tensor names ("", "bert.", "roberta.", ...). */
export function encoderPrefix(src: TensorSource): string {
  const suffix = 'embeddings.word_embeddings.weight';
  const hits = src.names().filter((n) => n.endsWith(suffix)).map((n) => n.slice(0, -suffix.length));
  if (!hits.length) throw new ModelFormatError(`no ${suffix} tensor: not a BERT-family checkpoint`);
  return hits.sort((a, b) => a.length - b.length)[0]!;
}

/** `name.weight` / `name.bias`, or TF-era `name.gamma` / `name.beta` for LayerNorms. */
async function loadNormHost(src: TensorSource, name: string): Promise<[HostTensor, HostTensor]> {
  if (src.has(`${name}.weight`)) return [await src.load(`${name}.weight`), await src.load(`${name}.bias`)];
  return [await src.load(`${name}.gamma`), await src.load(`${name}.beta`)];
}

export async function loadHostLinear(src: TensorSource, name: string, bias = true): Promise<HostLinear> {
  const w = await src.load(`${name}.weight`);
  const [outFeatures, inFeatures] = w.shape as [number, number];
  const b = bias && src.has(`${name}.bias`) ? (await src.load(`${name}.bias`)).data : null;
  if (b && b.length !== outFeatures) throw new ModelFormatError(`${name}.bias has ${b.length} elements, expected ${outFeatures}`);
  return { w: w.data, b, inFeatures, outFeatures };
}

export async function loadBertWeights(ctx: GpuContext, cfg: EncoderConfig, src: TensorSource, prefix: string, dtype: WeightDType): Promise<BertWeights> {
  const up = new WeightUploader(ctx, dtype);
  let extra = 0;
  const D = cfg.hiddenSize;
  const get = (n: string): Promise<HostTensor & { kind: 'f32' }> => src.load(prefix + n);
  /** A [rows, D] f32 table (position / token-type rows must stay f32 for the embedding op). */
  const table = async (n: string): Promise<Tensor> => {
    const t = await get(n);
    if (t.shape[t.shape.length - 1] !== D) throw new ModelFormatError(`${prefix}${n} is [${t.shape}], expected [*, ${D}]`);
    const tensor = ctx.tensor(t.data, [t.data.length / D, D], 'f32');
    extra += tensor.buffer.size;
    return tensor;
  };
  const norm = async (n: string): Promise<NormWeights> => {
    const [w, b] = await loadNormHost(src, prefix + n);
    return { w: up.vector(w), b: up.vector(b) };
  };
  const linear = async (n: string): Promise<LinearWeight> => ({ w: up.matrix(await get(`${n}.weight`)), bias: up.vector(await get(`${n}.bias`)) });

  const word = up.matrix(await get('embeddings.word_embeddings.weight'));
  if (word.shape[1] !== D) throw new ModelFormatError(`word embeddings are [${word.shape}], expected [*, ${D}]`);
  const pos = await table('embeddings.position_embeddings.weight');
  const type = src.has(`${prefix}embeddings.token_type_embeddings.weight`)
    ? await table('embeddings.token_type_embeddings.weight')
    : ctx.tensor(new Float32Array(D), [1, D], 'f32'); // no type table: a zero row
  const embNorm = await norm('embeddings.LayerNorm');
  const layers: BertLayerWeights[] = [];
  for (let l = 0; l < cfg.layers; l++) {
    const p = `encoder.layer.${l}.`;
    const parts = ['query', 'key', 'value'].map((n) => `${p}attention.self.${n}`);
    const qkvW = concatRows(await Promise.all(parts.map((n) => get(`${n}.weight`))));
    const qkvB = concatRows((await Promise.all(parts.map((n) => get(`${n}.bias`)))).map((t) => ({ ...t, shape: [t.shape[0]!, 1] })));
    layers.push({
      qkv: { w: up.matrix(qkvW), bias: up.vector(qkvB) },
      o: await linear(`${p}attention.output.dense`),
      attnNorm: await norm(`${p}attention.output.LayerNorm`),
      inter: await linear(`${p}intermediate.dense`),
      out: await linear(`${p}output.dense`),
      outNorm: await norm(`${p}output.LayerNorm`),
    });
  }
  return { word, pos, type, embNorm, layers, bytes: up.bytes + extra };
}

export function destroyBertWeights(w: BertWeights): void {
  const seen = new Set<GPUBuffer>();
  const kill = (t: Tensor | undefined): void => {
    for (const b of [t?.buffer, t?.scales]) if (b && !seen.has(b)) seen.add(b), b.destroy();
  };
  for (const t of [w.word, w.pos, w.type, w.embNorm.w, w.embNorm.b]) kill(t);
  for (const l of w.layers) {
    for (const t of [l.qkv.w, l.qkv.bias, l.o.w, l.o.bias, l.attnNorm.w, l.attnNorm.b, l.inter.w, l.inter.bias, l.out.w, l.out.bias, l.outNorm.w, l.outNorm.b]) kill(t);
  }
}
