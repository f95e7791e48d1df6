/**
 * What a reader is started from (config.yaml `readers:` entries and
 * `PUT /models` bodies), validated into one typed shape.
 */
import { MAX_SPECULATIVE_TOKENS } from '../../core/engine/speculative.ts';
import { InvalidRequestError } from '../../core/errors.ts';
import { parseScaling, type ScalingPolicy } from './scaling.ts';

export interface ReaderSpec {
  /** Model directory or .gguf file path. */
  model: string;
  /** Consumer group requests name to reach this reader (default `primary`). */
  consumerGroup: string;
  /** GPU backend name (`auto` by default). */
  backend?: string;
  /** Weight dtype on the GPU (`auto` by default). */
  dtype?: 'auto' | 'f32' | 'f16' | 'q8_0' | 'q4_0';
  maxSeqs?: number;
  maxTokensPerStep?: number;
  maxContext?: number;
  /** KV-cache pool: bytes, or `X%` of the GPU memory budget. */
  pageCacheSize?: string | number;
  prefixCaching?: boolean;
  /**
   * KV-cache storage: `auto` (default: f16 where the adapter has shader-f16, except models the decode
   * megakernel runs; else f32), `f32`, `f16` (2x the tokens per byte) or `q8` (int8 + per-(token, kv
   * head) scales, ~4x the tokens per byte).
   */
  kvCacheDtype?: 'auto' | 'f32' | 'f16' | 'q8';
  /** Pipeline warm-up before ready (config `warmup`; default `auto`). */
  warmup?: 'auto' | 'on' | 'off';
  /** Explicit id; generated when absent. */
  readerId?: string;
  /** What the reader serves; absent = detected from the model (server/readers/open_encoder.ts). */
  type?: 'generate' | 'embed' | 'classify';
  /** Encoders: longest wait of a partial batch, ms (default 5). `maxSeqs` (max_batch_size) is their inputs per batch. */
  batchDurationMillis?: number;
  /** Draft model (directory or .gguf) for speculative decoding; needs the target's vocabulary. */
  assistantModel?: string;
  /** Draft tokens verified per step (default 4). */
  speculativeTokens?: number;
  /**
   * What an unusable draft (other vocabulary, failed load) does: false (the
   * default) starts the reader without speculation and logs why; true fails
   * the reader.
   */
  assistantRequired?: boolean;
  /**
   * `nats:<reader_id>`: a `weft reader --nats` process found on the broker
   * (nats_directory.ts sets it; not a config field): the reader runs there.
   */
  remote?: string;
  /** Most ms one constraint may take to compile on this reader (server-wide `constraint_compile_millis`). */
  constraintCompileMillis?: number;
  /** Long texts tokenize on a worker thread (default true; server-wide `tokenize_worker`). */
  tokenizeWorker?: boolean;
  /** Scaling fields given with this entry; they set its consumer group's policy (scaling.ts). */
  scaling?: Partial<ScalingPolicy>;
}

const READER_TYPES = ['generate', 'embed', 'classify'] as const;

const DTYPES = ['auto', 'f32', 'f16', 'q8_0', 'q4_0'] as const;
const KV_CACHE_DTYPES = ['auto', 'f32', 'f16', 'q8'] as const;

function intOpt(o: Record<string, unknown>, snake: string, camel: string, min: number, max: number): number | undefined {
  const v = o[snake] ?? o[camel];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new InvalidRequestError('invalid_reader_config', `${snake} must be an integer in [${min}, ${max}]`, { field: snake });
  }
  return v;
}

/** The speculative-decoding fields of a reader entry: assistant_model, speculative_tokens, assistant_required. */
function parseAssistant(o: Record<string, unknown>): Pick<ReaderSpec, 'assistantModel' | 'speculativeTokens' | 'assistantRequired'> {
  const out: Pick<ReaderSpec, 'assistantModel' | 'speculativeTokens' | 'assistantRequired'> = {};
  const model = o.assistant_model ?? o.assistantModel;
  if (model !== undefined && model !== null) {
    if (typeof model !== 'string' || !model) throw new InvalidRequestError('invalid_reader_config', 'assistant_model must be a non-empty string (a model directory or .gguf path)', { field: 'assistant_model' });
    out.assistantModel = model;
  }
  const k = intOpt(o, 'speculative_tokens', 'speculativeTokens', 1, MAX_SPECULATIVE_TOKENS);
  if (k !== undefined) out.speculativeTokens = k;
  const required = o.assistant_required ?? o.assistantRequired;
  if (required !== undefined && required !== null) {
    if (typeof required !== 'boolean') throw new InvalidRequestError('invalid_reader_config', 'assistant_required must be a boolean', { field: 'assistant_required' });
    out.assistantRequired = required;
  }
  if ((k !== undefined || out.assistantRequired !== undefined) && !out.assistantModel) {
    throw new InvalidRequestError('invalid_reader_config', 'speculative_tokens and assistant_required need assistant_model (the draft model)', { field: k !== undefined ? 'speculative_tokens' : 'assistant_required' });
  }
  return out;
}

/** Accepts snake_case (HTTP, YAML) or camelCase keys. */
export function parseReaderSpec(raw: unknown, defaults: { model: string }): ReaderSpec {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new InvalidRequestError('invalid_reader_config', 'a reader configuration must be a JSON object');
  }
  const o = raw as Record<string, unknown>;
  const str = (snake: string, camel: string): string | undefined => {
    const v = o[snake] ?? o[camel];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string' || v.length === 0) throw new InvalidRequestError('invalid_reader_config', `${snake} must be a non-empty string`, { field: snake });
    return v;
  };
  const dtype = str('dtype', 'dtype');
  if (dtype !== undefined && !(DTYPES as readonly string[]).includes(dtype)) {
    throw new InvalidRequestError('invalid_reader_config', `dtype must be one of ${DTYPES.join(', ')}`, { field: 'dtype' });
  }
  const kvCacheDtype = str('kv_cache_dtype', 'kvCacheDtype');
  if (kvCacheDtype !== undefined && !(KV_CACHE_DTYPES as readonly string[]).includes(kvCacheDtype)) {
    throw new InvalidRequestError('invalid_reader_config', `kv_cache_dtype must be one of ${KV_CACHE_DTYPES.join(', ')}`, { field: 'kv_cache_dtype' });
  }
  const group = str('consumer_group', 'consumerGroup') ?? 'primary';
  if (!/^[\w.-]{1,64}$/.test(group)) throw new InvalidRequestError('invalid_reader_config', 'consumer_group must match [A-Za-z0-9_.-]{1,64}', { field: 'consumer_group' });
  const readerId = str('reader_id', 'readerId');
  if (readerId !== undefined && !/^[\w.-]{1,64}$/.test(readerId)) throw new InvalidRequestError('invalid_reader_config', 'reader_id must match [A-Za-z0-9_.-]{1,64}', { field: 'reader_id' });
  const pcs = o.page_cache_size ?? o.pageCacheSize;
  if (pcs !== undefined && typeof pcs !== 'string' && typeof pcs !== 'number') {
    throw new InvalidRequestError('invalid_reader_config', 'page_cache_size must be bytes, a size like "64MB", or "X%"', { field: 'page_cache_size' });
  }
  const prefix = o.prefix_caching ?? o.prefixCaching;
  if (prefix !== undefined && typeof prefix !== 'boolean') throw new InvalidRequestError('invalid_reader_config', 'prefix_caching must be a boolean', { field: 'prefix_caching' });
  const spec: ReaderSpec = { model: str('model', 'model') ?? str('model_name', 'modelName') ?? defaults.model, consumerGroup: group };
  const backend = str('backend', 'backend');
  if (backend) spec.backend = backend;
  if (dtype) spec.dtype = dtype as ReaderSpec['dtype'];
  const maxSeqs = intOpt(o, 'max_batch_size', 'maxSeqs', 1, 256);
  if (maxSeqs) spec.maxSeqs = maxSeqs;
  const budget = intOpt(o, 'max_tokens_per_step', 'maxTokensPerStep', 1, 1 << 16);
  if (budget) spec.maxTokensPerStep = budget;
  const ctxLen = intOpt(o, 'max_context', 'maxContext', 1, 1 << 20);
  if (ctxLen) spec.maxContext = ctxLen;
  if (pcs !== undefined) spec.pageCacheSize = pcs as string | number;
  if (prefix !== undefined) spec.prefixCaching = prefix as boolean;
  if (kvCacheDtype) spec.kvCacheDtype = kvCacheDtype as ReaderSpec['kvCacheDtype'];
  if (readerId) spec.readerId = readerId;
  const warmup = str('warmup', 'warmup');
  if (warmup !== undefined && !['auto', 'on', 'off'].includes(warmup)) {
    throw new InvalidRequestError('invalid_reader_config', 'warmup must be one of auto, on, off', { field: 'warmup' });
  }
  if (warmup) spec.warmup = warmup as ReaderSpec['warmup'];
  const type = str('type', 'type');
  if (type !== undefined && !(READER_TYPES as readonly string[]).includes(type)) {
    throw new InvalidRequestError('invalid_reader_config', `type must be one of ${READER_TYPES.join(', ')}`, { field: 'type' });
  }
  if (type) spec.type = type as ReaderSpec['type'];
  const wait = intOpt(o, 'batch_duration_millis', 'batchDurationMillis', 0, 60_000);
  if (wait !== undefined) spec.batchDurationMillis = wait;
  const compile = intOpt(o, 'constraint_compile_millis', 'constraintCompileMillis', 1, 600_000);
  if (compile !== undefined) spec.constraintCompileMillis = compile;
  const tokWorker = o.tokenize_worker ?? o.tokenizeWorker;
  if (tokWorker !== undefined && typeof tokWorker !== 'boolean') throw new InvalidRequestError('invalid_reader_config', 'tokenize_worker must be a boolean', { field: 'tokenize_worker' });
  if (tokWorker !== undefined) spec.tokenizeWorker = tokWorker;
  Object.assign(spec, parseAssistant(o));
  const scaling = parseScaling(o);
  if (scaling) spec.scaling = scaling;
  for (const k of ['remote', 'token']) {
    if (o[k] !== undefined) throw new InvalidRequestError('invalid_reader_config', `${k}: remote readers attach themselves over NATS (weft reader --nats URL --group G); see docs/scaling.md`, { field: k });
  }
  return spec;
}
