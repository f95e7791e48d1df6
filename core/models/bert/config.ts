/**
 * Everything an encoder model needs to know besides its weights: the encoder config
 * (parseEncoderConfig), the head (`*ForSequenceClassification`: BERT pooler + classifier,
 * or RoBERTa classifier.dense + out_proj; id2label, problem_type), the sentence-transformers
 * pipeline after the transformer (modules.json: Pooling, Dense, Normalize), the token
 * limit, and how inputs become ids: the tokenizer's special-token template (tokenizer.json
 * post_processor, for single texts and pairs) plus truncation.
 *
 * The core Tokenizer encodes single texts only, so pairs are built here from segments
 * encoded without specials: BERT `[CLS] a [SEP] b [SEP]` with token types 0 / 1, RoBERTa /
 * XLM-R `<s> a </s></s> b </s>` (those models take no token types: all 0). Truncation
 * follows the Rust tokenizers: a single text keeps its first `max - specials` tokens, a
 * pair is cut `longest_first`.
 */
import { ModelFormatError, UnsupportedModelError } from '../../errors.ts';
import { parseEncoderConfig, type EncoderConfig } from '../../formats/hf_config.ts';
import { readJson, type ModelSource } from '../../formats/source.ts';
import type { Tokenizer } from '../../tokenizer/tokenizer.ts';

export type PoolingMode = 'cls' | 'max' | 'mean' | 'mean_sqrt_len' | 'weightedmean' | 'lasttoken';

/** One sentence-transformers module after the Transformer, applied in order. */
export type StModule =
  | { kind: 'pooling'; modes: PoolingMode[] }
  | { kind: 'dense'; path: string; inFeatures: number; outFeatures: number; bias: boolean; activation: 'tanh' | 'identity' }
  | { kind: 'normalize' };

export interface ClassifierSpec {
  /** bert: pooler dense + tanh on [CLS], then classifier; roberta: classifier.dense + tanh + out_proj on <s>. */
  style: 'bert' | 'roberta';
  /** Label names by class index (id2label; LABEL_i when absent). */
  labels: string[];
  /** How logits become scores: HF text-classification's function_to_apply. */
  activation: 'softmax' | 'sigmoid' | 'none';
}

export interface EncoderSpec {
  cfg: EncoderConfig;
  /** config.json `architectures[0]` (e.g. "BertForSequenceClassification"). */
  architecture: string;
  /** True when config.json names a *ForSequenceClassification head (weights decide the style). */
  wantsClassifier: boolean;
  labels: string[];
  problemType: string | null;
  /** Modules after the Transformer (modules.json), or null for a plain HF checkpoint. */
  st: StModule[] | null;
  /** Largest input, in tokens including specials. */
  maxTokens: number;
}

export type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

const POOLING_KEYS: [string, PoolingMode][] = [
  ['pooling_mode_cls_token', 'cls'],
  ['pooling_mode_max_tokens', 'max'],
  ['pooling_mode_mean_tokens', 'mean'],
  ['pooling_mode_mean_sqrt_len_tokens', 'mean_sqrt_len'],
  ['pooling_mode_weightedmean_tokens', 'weightedmean'],
  ['pooling_mode_lasttoken', 'lasttoken'],
];

export async function readObject(ms: ModelSource, path: string): Promise<Json> {
  const v = await readJson(ms, path);
  if (!isObj(v)) throw new ModelFormatError(`${path} must be a JSON object`, { path });
  return v;
}

/** modules.json -> the modules after the Transformer, with their configs read. */
async function readSentenceTransformer(ms: ModelSource): Promise<StModule[]> {
  const list = await readJson(ms, 'modules.json');
  if (!Array.isArray(list)) throw new ModelFormatError('modules.json must be a list');
  const out: StModule[] = [];
  for (const m of list as Json[]) {
    const type = typeof m?.type === 'string' ? m.type.split('.').pop()! : '';
    const path = typeof m?.path === 'string' ? m.path.replace(/\/$/, '') : '';
    if (type === 'Transformer') continue;
    if (type === 'Pooling') {
      const c = await readObject(ms, `${path}/config.json`);
      const modes = POOLING_KEYS.filter(([k]) => c[k] === true).map(([, mode]) => mode);
      if (!modes.length) throw new UnsupportedModelError(`${path}/config.json enables no pooling mode we support`, { path });
      out.push({ kind: 'pooling', modes });
    } else if (type === 'Dense') {
      const c = await readObject(ms, `${path}/config.json`);
      const act = String(c.activation_function ?? 'torch.nn.modules.activation.Tanh').split('.').pop();
      if (act !== 'Tanh' && act !== 'Identity') throw new UnsupportedModelError(`Dense activation ${act} is not supported (Tanh, Identity)`, { path });
      const inF = c.in_features;
      const outF = c.out_features;
      if (!Number.isSafeInteger(inF) || !Number.isSafeInteger(outF)) throw new ModelFormatError(`${path}/config.json needs in_features and out_features`, { path });
      out.push({ kind: 'dense', path, inFeatures: inF as number, outFeatures: outF as number, bias: c.bias !== false, activation: act === 'Tanh' ? 'tanh' : 'identity' });
    } else if (type === 'Normalize') {
      out.push({ kind: 'normalize' });
    } else {
      throw new UnsupportedModelError(`sentence-transformers module ${String(m?.type)} is not supported`, { module: m?.type });
    }
  }
  return out;
}

/** config.json + tokenizer_config.json + sentence-transformers files -> EncoderSpec. */
export async function readEncoderSpec(ms: ModelSource, opts: { maxTokens?: number } = {}): Promise<EncoderSpec> {
  const raw = await readObject(ms, 'config.json');
  const cfg = parseEncoderConfig(raw);
  if (cfg.positionEmbeddingType !== 'absolute') {
    throw new UnsupportedModelError(`position_embedding_type ${cfg.positionEmbeddingType} is not supported (absolute only)`);
  }
  return { cfg, ...(await readEncoderHead(ms, raw, cfg.architecture, cfg.maxPositions - cfg.positionOffset, opts)) };
}

/** The parts of an EncoderSpec that do not depend on the encoder body (also read for ONNX models). */
export type EncoderHeadSpec = Omit<EncoderSpec, 'cfg'>;

/**
 * Head, labels, sentence-transformers modules and token limit from config.json (`raw`) and
 * the files beside it, for any encoder architecture; `positionLimit` is what the position
 * table allows (tokens), `fallbackArchitecture` names a config without `architectures`.
 */
export async function readEncoderHead(ms: ModelSource, raw: Json, fallbackArchitecture: string, positionLimit: number, opts: { maxTokens?: number } = {}): Promise<EncoderHeadSpec> {
  const architecture = Array.isArray(raw.architectures) && typeof raw.architectures[0] === 'string' ? raw.architectures[0] : fallbackArchitecture;
  const id2label = isObj(raw.id2label) ? raw.id2label : {};
  const nLabels = Number.isSafeInteger(raw.num_labels) ? (raw.num_labels as number) : Math.max(Object.keys(id2label).length, 0);
  const labels = Array.from({ length: nLabels }, (_, i) => (typeof id2label[String(i)] === 'string' ? (id2label[String(i)] as string) : `LABEL_${i}`));
  const st = (await ms.exists('modules.json')) ? await readSentenceTransformer(ms) : null;

  let maxTokens = positionLimit;
  const limit = (v: unknown): void => {
    if (typeof v === 'number' && Number.isFinite(v) && v >= 2 && v < 1e6) maxTokens = Math.min(maxTokens, Math.floor(v));
  };
  if (st && (await ms.exists('sentence_bert_config.json'))) limit((await readObject(ms, 'sentence_bert_config.json')).max_seq_length);
  else if (await ms.exists('tokenizer_config.json')) limit((await readObject(ms, 'tokenizer_config.json')).model_max_length);
  limit(opts.maxTokens);
  return {
    architecture,
    wantsClassifier: architecture.endsWith('ForSequenceClassification'),
    labels,
    problemType: typeof raw.problem_type === 'string' ? raw.problem_type : null,
    st,
    maxTokens,
  };
}

/** HF text-classification's function_to_apply for a head with `n` labels. */
export function classifierActivation(problemType: string | null, n: number): ClassifierSpec['activation'] {
  if (problemType === 'regression') return 'none';
  if (problemType === 'multi_label_classification' || n === 1) return 'sigmoid';
  return 'softmax';
}

// ---- special-token templates and truncation ------------------------------------------

type Piece = { special: number[]; type: number } | { seq: 'A' | 'B'; type: number };

export interface SpecialTemplate {
  single: Piece[];
  pair: Piece[];
  /** Force every token type to 0 (RoBERTa / XLM-R take no token type ids). */
  zeroTypes: boolean;
}

export interface EncodedInput {
  ids: number[];
  typeIds: number[];
  /** Tokens were dropped to fit the model's limit. */
  truncated: boolean;
}

function specialId(tok: Tokenizer, s: string): number {
  const id = tok.tokenToId(s);
  if (id === undefined) throw new ModelFormatError(`tokenizer has no special token ${s}`, { token: s });
  return id;
}

/** A TemplateProcessing / BertProcessing / RobertaProcessing post-processor, or null. */
function fromPostProcessor(pp: unknown, tok: Tokenizer): Omit<SpecialTemplate, 'zeroTypes'> | null {
  if (!isObj(pp)) return null;
  if (pp.type === 'Sequence' && Array.isArray(pp.processors)) {
    for (const p of pp.processors) {
      const t = fromPostProcessor(p, tok);
      if (t) return t;
    }
    return null;
  }
  const tokenOf = (v: unknown): number[] => {
    if (Array.isArray(v) && typeof v[1] === 'number') return [v[1]];
    if (Array.isArray(v) && typeof v[0] === 'string') return [specialId(tok, v[0])];
    throw new ModelFormatError(`post_processor ${String(pp.type)}: bad special token ${JSON.stringify(v)}`);
  };
  if (pp.type === 'BertProcessing' || pp.type === 'RobertaProcessing') {
    const cls = { special: tokenOf(pp.cls), type: 0 };
    const sep = { special: tokenOf(pp.sep), type: 0 };
    const single: Piece[] = [cls, { seq: 'A', type: 0 }, sep];
    const pair: Piece[] =
      pp.type === 'BertProcessing'
        ? [...single, { seq: 'B', type: 1 }, { ...sep, type: 1 }]
        : [...single, { ...sep, type: 1 }, { seq: 'B', type: 1 }, { ...sep, type: 1 }];
    return { single, pair };
  }
  if (pp.type === 'TemplateProcessing' && Array.isArray(pp.single) && Array.isArray(pp.pair)) {
    const specials = isObj(pp.special_tokens) ? pp.special_tokens : {};
    const piece = (p: unknown): Piece => {
      if (isObj(p) && isObj(p.Sequence)) return { seq: p.Sequence.id === 'B' ? 'B' : 'A', type: Number(p.Sequence.type_id ?? 0) };
      if (isObj(p) && isObj(p.SpecialToken) && typeof p.SpecialToken.id === 'string') {
        const name = p.SpecialToken.id;
        const entry = specials[name];
        const ids = isObj(entry) && Array.isArray(entry.ids) ? (entry.ids as number[]) : [specialId(tok, name)];
        return { special: ids, type: Number(p.SpecialToken.type_id ?? 0) };
      }
      throw new ModelFormatError(`post_processor TemplateProcessing: bad piece ${JSON.stringify(p)}`);
    };
    return { single: pp.single.map(piece), pair: pp.pair.map(piece) };
  }
  return null;
}

/** The special-token template for this tokenizer.json (family default when it has none). */
export function specialTemplate(tokenizerJson: unknown, tok: Tokenizer, family: 'bert' | 'roberta'): SpecialTemplate {
  const zeroTypes = family === 'roberta';
  const t = fromPostProcessor(isObj(tokenizerJson) ? tokenizerJson.post_processor : null, tok);
  if (t) return { ...t, zeroTypes };
  const [c, s] = family === 'bert' ? ['[CLS]', '[SEP]'] : ['<s>', '</s>'];
  const cls = { special: [specialId(tok, c)], type: 0 };
  const sep = { special: [specialId(tok, s)], type: 0 };
  const single: Piece[] = [cls, { seq: 'A', type: 0 }, sep];
  const pair: Piece[] = family === 'bert' ? [...single, { seq: 'B', type: 1 }, { ...sep, type: 1 }] : [...single, sep, { seq: 'B', type: 0 }, sep];
  return { single, pair, zeroTypes };
}

const specialCount = (pieces: Piece[]): number => pieces.reduce((n, p) => n + ('special' in p ? p.special.length : 0), 0);

/**
 * Token ids + types of one text (b null) or a pair, within maxTokens (specials included).
 * Pairs are cut `longest_first` as the Rust tokenizers do: the shorter segment keeps its
 * length when the longer one can absorb the cut, else they split the budget evenly.
 */
export function buildInput(t: SpecialTemplate, a: readonly number[], b: readonly number[] | null, maxTokens: number): EncodedInput {
  const pieces = b === null ? t.single : t.pair;
  const budget = maxTokens - specialCount(pieces);
  if (budget < 0) throw new ModelFormatError(`model limit ${maxTokens} leaves no room for the input`);
  let [na, nb] = [a.length, b?.length ?? 0];
  let truncated = false;
  if (na + nb > budget) {
    truncated = true;
    if (b === null) na = budget;
    else {
      const swap = na > nb;
      let [n1, n2] = swap ? [nb, na] : [na, nb];
      n2 = n1 > budget ? n1 : Math.max(n1, budget - n1);
      if (n1 + n2 > budget) {
        n1 = Math.floor(budget / 2);
        n2 = n1 + (budget % 2);
      }
      [na, nb] = swap ? [n2, n1] : [n1, n2];
    }
  }
  const ids: number[] = [];
  const typeIds: number[] = [];
  for (const p of pieces) {
    const part = 'special' in p ? p.special : p.seq === 'A' ? a.slice(0, na) : (b ?? []).slice(0, nb);
    for (const id of part) {
      ids.push(id);
      typeIds.push(t.zeroTypes ? 0 : p.type);
    }
  }
  return { ids, typeIds, truncated };
}
