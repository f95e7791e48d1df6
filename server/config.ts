/**
 * Settings: built-in defaults, then `config.yaml` (path from `--config`,
 * `WEFT_CONFIG`, or ./config.yaml when present), then one `WEFT_*`
 * environment variable per key (the spec's SERVICE_* names with WEFT in place
 * of SERVICE). Every key is documented in docs/configuration.md.
 */
import { existsSync, readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { InvalidRequestError } from '../core/errors.ts';
import { parseBytes } from '../core/engine/sizes.ts';
import { DEFAULT_COMPILE_LIMITS } from '../core/engine/constraints.ts';
import { MAX_SPECULATIVE_TOKENS } from '../core/engine/speculative.ts';
import { checkDocumentsSection } from './documents/config.ts';
import { resolveNatsOptions } from './readers/nats_conn.ts';
import { DEFAULT_MODEL_DIR } from './paths.ts';

export type WarmupMode = 'auto' | 'on' | 'off';
export const WARMUP_MODES: readonly WarmupMode[] = ['auto', 'on', 'off'];

export interface ServiceConfig {
  host: string;
  /** Ports; 0 disables an app. */
  port: number;
  managementPort: number;
  openaiPort: number;
  sagemakerPort: number;
  vertexPort: number;
  /**
   * Compile the pipelines of the common request shapes before a reader reports ready
   * (core/engine/warmup.ts): `on`, `off`, or `auto` (on, except on SwiftShader, where
   * compiling every shape takes far longer than the few a first request needs).
   */
  warmup: WarmupMode;
  /** Model of the default reader (group `primary`); '' starts none. */
  model: string;
  consumerGroup: string;
  /** Model of the default embedding reader (`use-lite`: the bundled USE-Lite); '' starts none. */
  embeddingModel: string;
  /** Group of the default embedding reader. */
  embeddingConsumerGroup: string;
  /** Extra readers started at boot (ReaderSpec-shaped objects). */
  readers: unknown[];
  /** Bound on memory held by queued requests and pending responses, bytes. */
  kvstoreMaxMemory: number;
  /** Bound on one prompt string, bytes. */
  maxPromptStringBytes: number;
  /** Bound on the text of one /tokenize call, bytes. */
  maxTokenizeBytes: number;
  /**
   * Readers tokenize long texts (prompts, /tokenize) on a tokenizer worker thread, so the
   * thread that steps the batch is not held; false = on the reader's thread (saves the worker's
   * copy of the tokenizer, tens of MB for a 128k-token vocabulary).
   */
  tokenizeWorker: boolean;
  /** Most ms one constraint (json_schema, regex) may take to compile on a reader. */
  constraintCompileMillis: number;
  /** Generation admission: longest expected wait in a reader's queue, ms; past it, 503 overloaded with Retry-After. */
  maxQueueWaitMillis: number;
  /** A reader whose work has not advanced for this long while requests wait on it is unhealthy, ms. */
  readerStallMillis: number;
  /** Image-to-text: largest image (encoded bytes), most images per prompt, http(s) fetching and its timeout, private targets. */
  imageMaxBytes: number;
  imageMaxCount: number;
  imageFetch: boolean;
  imageFetchTimeoutMs: number;
  imageFetchAllowPrivate: boolean;
  /** IP addresses image URLs may reach although in a refused range (a trusted image host). */
  imageFetchAllowAddresses: string[];
  pageCacheSize: string | null;
  /** Readers' batch size when their entry sets none (generative: sequences per step; encoders: inputs per batch); null = per model. */
  maxBatchSize: number | null;
  /** Encoder readers' longest wait before a partial batch runs, ms, when their entry sets none; null = 5. */
  batchDurationMillis: number | null;
  /** Draft model (directory or .gguf) for speculative decoding in the default reader; null = a smaller model of this server where one fits; `off` = none. */
  assistantName: string | null;
  /** Draft tokens the default reader verifies per step (null = 4). */
  speculativeTokens: number | null;
  logDisableTimestamps: boolean;
  noColor: boolean;
  /** Signed licence file (docs/licence.md); null = none. */
  licenseFile: string | null;
  /** Refuse to start without a valid licence, and report 503 on /healthz once it lapses. */
  licenseRequired: boolean;
  /** Trusted Ed25519 public keys, comma-separated (raw base64url or PEM file paths); null = none (every licence file is then invalid). */
  licensePublicKey: string | null;
  /** Bearer tokens accepted on inference APIs; empty = no auth. */
  apiKeys: string[];
  /** Bearer tokens accepted on the management API; empty = same as apiKeys. */
  managementApiKeys: string[];
  /** API key -> the document owners it may act as (the owner header narrows to one of them); such keys are accepted like api_keys. */
  apiKeyOwners: Record<string, string[]>;
  /** Max seconds /healthz?wait= may block. */
  healthWaitMax: number;
  frontendBasePath: string;
  aipPredictRoute: string;
  aipHealthRoute: string;
  backend: string;
  /**
   * The `documents:` mapping (document loading; keys in docs/documents.md), as written in the
   * file: checked here (unknown keys and bad values refused), resolved with the
   * WEFT_DOCUMENTS_* variables over it by server/documents/config.ts.
   */
  documents?: Record<string, unknown> | null;
  /**
   * The `nats:` mapping (readers, front ends and document workers on a NATS
   * broker; keys in docs/scaling.md), with the WEFT_NATS_* variables over it,
   * resolved by server/readers/nats_conn.ts. Absent = no NATS.
   */
  nats?: Record<string, unknown> | null;
}

export const DEFAULTS: ServiceConfig = {
  host: '0.0.0.0',
  port: 3000,
  managementPort: 3001,
  openaiPort: 3003,
  sagemakerPort: 8080,
  vertexPort: 3002,
  warmup: 'auto',
  model: DEFAULT_MODEL_DIR,
  consumerGroup: 'primary',
  embeddingModel: 'use-lite',
  embeddingConsumerGroup: 'embed',
  readers: [],
  kvstoreMaxMemory: 1e9,
  maxPromptStringBytes: 30e3,
  maxTokenizeBytes: 64 * 1024,
  tokenizeWorker: true,
  constraintCompileMillis: DEFAULT_COMPILE_LIMITS.requestMillis,
  maxQueueWaitMillis: 10_000,
  readerStallMillis: 30_000,
  imageMaxBytes: 10e6,
  imageMaxCount: 8,
  imageFetch: true,
  imageFetchTimeoutMs: 10_000,
  imageFetchAllowPrivate: false,
  imageFetchAllowAddresses: [],
  pageCacheSize: null,
  maxBatchSize: null,
  batchDurationMillis: null,
  assistantName: null,
  speculativeTokens: null,
  logDisableTimestamps: false,
  noColor: false,
  licenseFile: null,
  licenseRequired: false,
  licensePublicKey: null,
  apiKeys: [],
  managementApiKeys: [],
  apiKeyOwners: {},
  healthWaitMax: 60,
  frontendBasePath: '/',
  aipPredictRoute: '/predict',
  aipHealthRoute: '/health',
  backend: 'auto',
};

type Kind = 'string' | 'int' | 'bytes' | 'bool' | 'list' | 'nullable' | 'nullable_int' | 'array' | 'documents' | 'owners_map' | 'nats';
const KEYS: Record<keyof ServiceConfig, Kind> = {
  host: 'string',
  port: 'int',
  managementPort: 'int',
  openaiPort: 'int',
  sagemakerPort: 'int',
  vertexPort: 'int',
  warmup: 'string',
  model: 'string',
  consumerGroup: 'string',
  embeddingModel: 'string',
  embeddingConsumerGroup: 'string',
  readers: 'array',
  kvstoreMaxMemory: 'bytes',
  maxPromptStringBytes: 'bytes',
  maxTokenizeBytes: 'bytes',
  tokenizeWorker: 'bool',
  constraintCompileMillis: 'int',
  maxQueueWaitMillis: 'int',
  readerStallMillis: 'int',
  imageMaxBytes: 'bytes',
  imageMaxCount: 'int',
  imageFetch: 'bool',
  imageFetchTimeoutMs: 'int',
  imageFetchAllowPrivate: 'bool',
  imageFetchAllowAddresses: 'list',
  pageCacheSize: 'nullable',
  maxBatchSize: 'nullable_int',
  batchDurationMillis: 'nullable_int',
  assistantName: 'nullable',
  speculativeTokens: 'nullable_int',
  logDisableTimestamps: 'bool',
  noColor: 'bool',
  licenseFile: 'nullable',
  licenseRequired: 'bool',
  licensePublicKey: 'nullable',
  apiKeys: 'list',
  managementApiKeys: 'list',
  apiKeyOwners: 'owners_map',
  healthWaitMax: 'int',
  frontendBasePath: 'string',
  aipPredictRoute: 'string',
  aipHealthRoute: 'string',
  backend: 'string',
  documents: 'documents',
  nats: 'nats',
};

/** Variables whose names follow another convention than WEFT_<KEY>. */
const ENV_NAMES: Partial<Record<keyof ServiceConfig, string>> = {
  noColor: 'NO_COLOR',
  aipPredictRoute: 'AIP_PREDICT_ROUTE',
  aipHealthRoute: 'AIP_HEALTH_ROUTE',
};

const snake = (k: string): string => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

function coerce(key: string, kind: Kind, v: unknown): unknown {
  const bad = (want: string): never => {
    throw new InvalidRequestError('invalid_config', `config ${snake(key)}: expected ${want}, got ${JSON.stringify(v)}`, { key: snake(key) });
  };
  switch (kind) {
    case 'string':
      return typeof v === 'string' ? v : typeof v === 'number' ? String(v) : bad('a string');
    case 'nullable':
      return v === null || v === '' ? null : typeof v === 'string' || typeof v === 'number' ? String(v) : bad('a string');
    case 'int': {
      const n = typeof v === 'string' ? Number(v) : v;
      return typeof n === 'number' && Number.isInteger(n) && n >= 0 ? n : bad('a non-negative integer');
    }
    case 'nullable_int':
      return v === null || v === '' ? null : coerce(key, 'int', v);
    case 'bytes':
      return typeof v === 'number' || typeof v === 'string' ? parseBytes(v, snake(key)) : bad('a size like 30KB');
    case 'bool':
      if (typeof v === 'boolean') return v;
      if (typeof v === 'string' && /^(1|true|yes|on)$/i.test(v)) return true;
      if (typeof v === 'string' && /^(0|false|no|off|)$/i.test(v)) return false;
      return bad('a boolean');
    case 'list':
      if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v;
      if (typeof v === 'string') return v.split(',').map((s) => s.trim()).filter(Boolean);
      return bad('a list of strings');
    case 'documents':
      return checkDocumentsSection(v);
    case 'owners_map': {
      let m: unknown = v;
      if (typeof v === 'string') {
        try {
          m = v.trim() ? JSON.parse(v) : {};
        } catch {
          return bad('a JSON object of key -> list of owners');
        }
      }
      // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this check refuses
      const ok = (o: unknown): o is string[] => Array.isArray(o) && o.length > 0 && o.every((x) => typeof x === 'string' && x.trim() !== '' && !/[\0-\x1f]/.test(x));
      if (typeof m !== 'object' || m === null || Array.isArray(m) || !Object.values(m).every(ok)) return bad('a mapping of API key -> non-empty list of owners');
      return Object.fromEntries(Object.entries(m as Record<string, string[]>).map(([k, o]) => [k, [...new Set(o.map((x) => x.trim()))]]));
    }
    case 'nats':
      if (v === null) return null;
      if (typeof v !== 'object' || Array.isArray(v)) return bad('a mapping (url, creds, nkey, user, password, token, tls_ca, tls_cert, tls_key)');
      resolveNatsOptions(v as Record<string, unknown>, {}); // unknown keys and bad values fail at start-up
      return v;
    case 'array':
      if (Array.isArray(v)) return v;
      if (typeof v === 'string') {
        try {
          const parsed: unknown = JSON.parse(v);
          if (Array.isArray(parsed)) return parsed;
        } catch {
          // fall through
        }
      }
      return bad('a list');
  }
}

export interface ConfigSources {
  /** Path to config.yaml (optional). */
  file?: string;
  env?: Record<string, string | undefined>;
  /** Explicit overrides (tests, CLI flags), applied last. */
  overrides?: Partial<ServiceConfig>;
}

export function loadConfig(src: ConfigSources = {}): ServiceConfig {
  const env = src.env ?? process.env;
  const cfg: Record<string, unknown> = { ...DEFAULTS };
  const file = src.file ?? env.WEFT_CONFIG ?? (existsSync('config.yaml') ? 'config.yaml' : undefined);
  if (file) {
    const doc: unknown = parseYaml(readFileSync(file, 'utf8'));
    if (doc !== null && doc !== undefined) {
      if (typeof doc !== 'object' || Array.isArray(doc)) throw new InvalidRequestError('invalid_config', `${file}: expected a mapping at the top level`);
      const byKey = new Map(Object.keys(KEYS).map((k) => [snake(k), k]));
      for (const [k, v] of Object.entries(doc as Record<string, unknown>)) {
        const key = byKey.get(k) ?? (k in KEYS ? k : undefined);
        if (!key) throw new InvalidRequestError('invalid_config', `${file}: unknown setting "${k}"`, { key: k });
        cfg[key] = coerce(key, KEYS[key as keyof ServiceConfig], v);
      }
    }
  }
  for (const key of Object.keys(KEYS) as (keyof ServiceConfig)[]) {
    if (KEYS[key] === 'documents' || KEYS[key] === 'nats') continue; // one WEFT_DOCUMENTS_<KEY> variable per key, read by server/documents/config.ts
    const name = ENV_NAMES[key] ?? `WEFT_${snake(key).toUpperCase()}`;
    const v = env[name];
    if (v === undefined) continue;
    cfg[key] = key === 'noColor' ? v !== '' : coerce(key, KEYS[key], v);
  }
  Object.assign(cfg, src.overrides ?? {});
  const out = cfg as unknown as ServiceConfig;
  const range = (key: 'maxBatchSize' | 'batchDurationMillis' | 'constraintCompileMillis' | 'readerStallMillis', min: number, max: number): void => {
    const v = out[key];
    if (v !== null && (v < min || v > max)) throw new InvalidRequestError('invalid_config', `config ${snake(key)}: expected an integer in [${min}, ${max}], got ${v}`, { key: snake(key) });
  };
  if (!WARMUP_MODES.includes(out.warmup)) {
    throw new InvalidRequestError('invalid_config', `config warmup: expected one of ${WARMUP_MODES.join(', ')}, got ${JSON.stringify(out.warmup)}`, { key: 'warmup' });
  }
  range('maxBatchSize', 1, 256);
  range('batchDurationMillis', 0, 60_000);
  range('constraintCompileMillis', 1, 600_000);
  range('readerStallMillis', 1000, 3_600_000);
  const k = out.speculativeTokens;
  if (k !== null && (k < 1 || k > MAX_SPECULATIVE_TOKENS)) {
    throw new InvalidRequestError('invalid_config', `config speculative_tokens: expected an integer in [1, ${MAX_SPECULATIVE_TOKENS}], got ${k}`, { key: 'speculative_tokens' });
  }
  if (out.assistantName && out.assistantName !== 'off') {
    // Checked here so a typo fails at start-up rather than as a reader that never speculates.
    if (!out.model) throw new InvalidRequestError('invalid_config', 'config assistant_name: the draft model needs a default model (model / WEFT_MODEL)', { key: 'assistant_name' });
    if (!existsSync(out.assistantName)) {
      throw new InvalidRequestError('invalid_config', `config assistant_name: ${out.assistantName} does not exist (a model directory or .gguf file)`, { key: 'assistant_name' });
    }
  }
  return out;
}
