/**
 * The `weft` command line.
 *
 *   weft generate [--model DIR_OR_GGUF] [--max-new-tokens N] [--temperature T]
 *                 [--top-k K] [--top-p P] [--seed S] [--dtype D] [--backend B] [--json] PROMPT
 *   weft generate --dry-run [--model DIR_OR_GGUF] [--dtype D] [--backend B] [--json]
 *                 prints the device memory plan (weights, activations, KV pool, tokens of
 *                 context) without loading the weights; exits 1 with the numbers when the
 *                 model does not fit. WEFT_GPU_MEMORY (bytes) sets the device budget.
 *   weft serve    [--config FILE] [--port N] [--model PATH]  (server/main.ts)
 *   weft device   prints the adapter Weft would use
 *   weft pull     ORG/NAME[:FILE.gguf]  downloads a Hub model into the HF cache (server/hub/)
 *   weft reader   --nats URL --group G [--model PATH] [--backend B] ...
 *                 loads one reader and attaches it to consumer group G on
 *                 NATS, for every front end there (server/readers/nats_reader.ts)
 *   weft document-worker --nats URL --database-url URL [--embedder DIR] [--workers N] ...
 *                 processes documents front ends accepted, from the NATS work
 *                 queue (server/documents/worker_cli.ts)
 *   weft license  keygen | sign | verify: licence files (server/license_cli.ts)
 *
 * `generate` streams text to stdout as it is produced; `--json` prints one
 * `{"text", "token_ids", ...}` object instead, for scripts. Temperature 0
 * means greedy decoding.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { contextVendorMemory } from './vendor_memory.ts';
import { GpuContext } from '../core/gpu/context.ts';
import { planDecoder } from '../core/models/load.ts';
import { loadDecoder } from '../core/api/load_decoder.ts';
import { formatPlan } from '../core/models/memory_plan.ts';
import type { WeightDType } from '../core/models/host_tensor.ts';
import { WeftError } from '../core/errors.ts';
import { openModelPath } from './fs_source.ts';
import { DEFAULT_MODEL_DIR, VERSION } from './paths.ts';
import { progressReporter } from './progress.ts';
import type { LoadProgress } from '../core/progress.ts';
import { parseHubId } from './hub/cache.ts';
import { resolveModelArg } from './hub/resolve.ts';
import { decodeSettingsFromEnv, gpuOptionsFromEnv } from './gpu_settings.ts';
import type { Tokenizer } from '../core/tokenizer/tokenizer.ts';

const USAGE = `usage:
  weft --version
  weft generate [--model DIR_OR_GGUF] [--max-new-tokens N] [--temperature T] [--top-k K]
                [--top-p P] [--seed S] [--dtype f32|f16|q8_0|q4_0|auto] [--kv-cache-dtype auto|f32|f16|q8]
                [--backend NAME] [--json]
                [--chat [--system TEXT]] PROMPT    (--chat: PROMPT is a user message, sent through the model's chat template)
  weft generate --dry-run [--model DIR_OR_GGUF] [--dtype D] [--kv-cache-dtype K] [--backend NAME] [--json]
  weft serve [--config FILE] [--port N] [--model DIR_OR_GGUF]
  weft device [--backend NAME]
  weft pull ORG/NAME[:FILE.gguf]      (HF_HOME, HF_ENDPOINT, HF_TOKEN; --model takes Hub ids too)
  weft reader --nats nats://HOST:4222|tls://HOST:4222 --group G [--model DIR_OR_GGUF] [--backend NAME]
              [--creds FILE | --nkey SEED_OR_FILE | --user U --password P | --token T]
              [--tls-ca FILE] [--tls-cert FILE --tls-key FILE] [--reader-id ID]
              [--dtype D] [--kv-cache-dtype K] [--max-batch-size N] [--max-context N] [--page-cache-size S] [--type T]
  weft document-worker --nats URL --database-url postgres://... [--embedder DIR] [--workers N]
              [--backend NAME] [--config FILE] (credentials and TLS flags as for reader)
  weft license keygen|sign|verify ...`;

const KV_CACHE_DTYPES = ['auto', 'f32', 'f16', 'q8'] as const;
type KvCacheDtypeArg = (typeof KV_CACHE_DTYPES)[number];

/** `--kv-cache-dtype`, checked (undefined: the loader's default, auto). */
function kvCacheDtype(v: string | undefined): KvCacheDtypeArg | undefined {
  if (v === undefined) return undefined;
  if (!(KV_CACHE_DTYPES as readonly string[]).includes(v)) throw new WeftError('invalid_argument', `--kv-cache-dtype must be one of ${KV_CACHE_DTYPES.join(', ')}, got "${v}"`);
  return v as KvCacheDtypeArg;
}

function num(v: string | undefined, name: string): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new WeftError('invalid_argument', `--${name} must be a number, got "${v}"`);
  return n;
}

async function generate(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      model: { type: 'string' },
      'max-new-tokens': { type: 'string' },
      temperature: { type: 'string' },
      'top-k': { type: 'string' },
      'top-p': { type: 'string' },
      seed: { type: 'string' },
      dtype: { type: 'string' },
      'kv-cache-dtype': { type: 'string' },
      backend: { type: 'string' },
      json: { type: 'boolean' },
      'dry-run': { type: 'boolean' },
      chat: { type: 'boolean' },
      system: { type: 'string' },
    },
  });
  const prompt = positionals.join(' ');
  const gpuMemory = process.env.WEFT_GPU_MEMORY ? num(process.env.WEFT_GPU_MEMORY, 'WEFT_GPU_MEMORY') : undefined;
  const kv = kvCacheDtype(values['kv-cache-dtype']);
  if (values['dry-run']) return dryRun(values.model, (values.dtype ?? 'auto') as WeightDType, kv, values.backend, !!values.json, gpuMemory);
  if (!prompt) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const ctx = await GpuContext.create(gpuOptionsFromEnv(values.backend));
  const loadStarted = performance.now();
  const report = progressReporter(process.stderr, { timestamps: false });
  // 'ready' is left out: the shaders of the first token still compile after the load.
  const progress = (p: LoadProgress): void => (p.phase === 'ready' ? undefined : report(p));
  const loaded = await loadDecoder(ctx, await openModelPath(await resolveModelArg(values.model ?? DEFAULT_MODEL_DIR)), {
    dtype: (values.dtype ?? 'auto') as WeightDType,
    maxSeqs: 1,
    ...(kv ? { kvCacheDtype: kv } : {}),
    onProgress: progress,
    decode: decodeSettingsFromEnv(),
    ...(gpuMemory ? { gpuMemoryBytes: gpuMemory } : {}),
    ...reportedMemory(await contextVendorMemory(ctx)),
  });
  // One request: no warm-up (it would compile shapes this request never runs); the shaders it
  // does compile show in the same bar while the first token is awaited.
  ctx.pipelines.onCompile = (label, n) => progress({ phase: 'pipelines', done: n, total: null, label, ms: performance.now() - loadStarted });
  const sampling = {
    temperature: num(values.temperature, 'temperature') ?? 0,
    ...(values['top-k'] !== undefined ? { topK: num(values['top-k'], 'top-k')! } : {}),
    ...(values['top-p'] !== undefined ? { topP: num(values['top-p'], 'top-p')! } : {}),
    ...(values.seed !== undefined ? { seed: num(values.seed, 'seed')! } : {}),
  };
  const maxNewTokens = num(values['max-new-tokens'], 'max-new-tokens') ?? 64;
  const input = values.chat ? chatPrompt(loaded.tokenizer, prompt, values.system) : prompt;
  const started = performance.now();
  let firstAt = 0;
  for await (const ev of loaded.engine.generate(input, { maxNewTokens, sampling })) {
    if (ev.type === 'token') {
      if (!firstAt) {
        ctx.pipelines.onCompile = null;
        if (process.stderr.isTTY) process.stderr.write('\r\x1b[2K'); // the bar's line gives way to the text
      }
      firstAt ||= performance.now();
      if (!values.json) process.stdout.write(ev.text);
    } else {
      const secs = (performance.now() - started) / 1000;
      if (values.json) {
        process.stdout.write(
          `${JSON.stringify({ text: ev.text, token_ids: ev.tokenIds, finish_reason: ev.finishReason, usage: ev.usage, seconds: secs })}\n`,
        );
      } else {
        const decode = ev.tokenIds.length > 1 ? (ev.tokenIds.length - 1) / ((performance.now() - firstAt) / 1000) : 0;
        process.stdout.write('\n');
        process.stderr.write(
          `[${ev.tokenIds.length} tokens, ${ev.finishReason}, ${decode.toFixed(1)} tok/s decode, adapter: ${ctx.gpu.info.name} (${ctx.gpu.info.backend})]\n`,
        );
      }
    }
  }
  loaded.destroy();
  ctx.destroy();
  return 0;
}

/** `--chat`: the user message (after an optional system message) through the model's chat template, ready for the assistant's turn. */
function chatPrompt(tok: Tokenizer, user: string, system: string | undefined): string {
  if (!tok.hasChatTemplate) throw new WeftError('invalid_argument', '--chat: the model has no chat template (tokenizer_config.json chat_template)');
  const messages = [...(system !== undefined ? [{ role: 'system' as const, content: system }] : []), { role: 'user' as const, content: user }];
  return tok.applyChatTemplate(messages, { addGenerationPrompt: true });
}

/** The load option carrying a vendor-reported memory size, when there is one. */
function reportedMemory(bytes: number | null): { reportedMemoryBytes?: number } {
  return bytes ? { reportedMemoryBytes: bytes } : {};
}

/** `generate --dry-run`: the memory plan of the model on this device (a refusal throws ModelTooLargeError). */
async function dryRun(model: string | undefined, dtype: WeightDType, kv: KvCacheDtypeArg | undefined, backend: string | undefined, json: boolean, gpuMemory: number | undefined): Promise<number> {
  const ctx = await GpuContext.create(gpuOptionsFromEnv(backend));
  try {
    const r = await planDecoder(ctx, await openModelPath(model ?? DEFAULT_MODEL_DIR), {
      dtype,
      maxSeqs: 1,
      ...(kv ? { kvCacheDtype: kv } : {}),
      decode: decodeSettingsFromEnv(),
      ...(gpuMemory ? { gpuMemoryBytes: gpuMemory } : {}),
      ...reportedMemory(await contextVendorMemory(ctx)),
    });
    const c = r.cfg;
    if (json) {
      process.stdout.write(`${JSON.stringify({ device: ctx.gpu.info.name, architecture: c.architecture, format: r.format, dtype: r.dtype, kv_dtype: r.kvDtype, max_context: r.maxContext, plan: r.plan })}\n`);
    } else {
      process.stdout.write(`${c.architecture} (${r.format}, weights ${r.dtype}, KV ${r.kvDtype}) on ${ctx.gpu.info.name} (${ctx.gpu.info.backend})\n`);
      process.stdout.write(r.plan ? `${formatPlan(r.plan, r.maxContext)}\n` : 'no tensor headers to plan from\n');
    }
    return 0;
  } finally {
    ctx.destroy();
  }
}

async function device(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { backend: { type: 'string' } } });
  const ctx = await GpuContext.create(gpuOptionsFromEnv(values.backend));
  process.stdout.write(`${JSON.stringify({ ...ctx.gpu.info, caps: ctx.gpu.caps, variant: ctx.variant }, null, 2)}\n`);
  ctx.destroy();
  return 0;
}

/**
 * `weft reader`: loads the model, runs one probe token, connects to NATS and
 * attaches to its consumer group (nats_reader.ts), prints one JSON line
 * `{"attached": {"nats", "group"}, "reader_id", "model", "device", "backend"}`
 * on stdout, and serves until SIGINT / SIGTERM. Connection settings come from
 * the flags or WEFT_NATS_* variables (server/readers/nats_conn.ts); a broker
 * that refuses the credentials fails the command.
 */
async function reader(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      model: { type: 'string' },
      nats: { type: 'string' },
      group: { type: 'string' },
      creds: { type: 'string' },
      nkey: { type: 'string' },
      user: { type: 'string' },
      password: { type: 'string' },
      token: { type: 'string' },
      'tls-ca': { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      backend: { type: 'string' },
      dtype: { type: 'string' },
      'kv-cache-dtype': { type: 'string' },
      'max-batch-size': { type: 'string' },
      'max-context': { type: 'string' },
      'page-cache-size': { type: 'string' },
      type: { type: 'string' },
      'reader-id': { type: 'string' },
    },
  });
  const { resolveNatsOptions, connectNats } = await import('./readers/nats_conn.ts');
  const nats = resolveNatsOptions({
    url: values.nats,
    creds: values.creds,
    nkey: values.nkey,
    user: values.user,
    password: values.password,
    token: values.token,
    tls_ca: values['tls-ca'],
    tls_cert: values['tls-cert'],
    tls_key: values['tls-key'],
  });
  if (!nats) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const group = values.group ?? 'primary';
  const { READER_ID_RE } = await import('./readers/nats_subjects.ts');
  const readerId = values['reader-id'] ?? `${group}-${hostname().replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 40)}-${process.pid}`;
  if (!READER_ID_RE.test(readerId)) throw new WeftError('invalid_argument', `--reader-id must match ${READER_ID_RE.source}, got "${readerId}"`);
  const { parseReaderSpec } = await import('./readers/spec.ts');
  const { openReader } = await import('./readers/open_reader.ts');
  const { serveReaderOverNats } = await import('./readers/nats_reader.ts');
  const { prepareGpuEnv } = await import('../core/gpu/device.ts');
  const { createLogger } = await import('./log.ts');
  const spec = parseReaderSpec(
    {
      model: await resolveModelArg(values.model ?? DEFAULT_MODEL_DIR),
      consumer_group: group,
      backend: values.backend,
      dtype: values.dtype,
      kv_cache_dtype: kvCacheDtype(values['kv-cache-dtype']),
      max_batch_size: num(values['max-batch-size'], 'max-batch-size'),
      max_context: num(values['max-context'], 'max-context'),
      page_cache_size: values['page-cache-size'],
      type: values.type,
    },
    { model: DEFAULT_MODEL_DIR },
  );
  const log = createLogger({ timestamps: !process.env.WEFT_LOG_DISABLE_TIMESTAMPS, color: false });
  let nc: Awaited<ReturnType<typeof connectNats>>;
  try {
    nc = await connectNats(nats, `weft-reader-${readerId}`);
  } catch (e) {
    throw new WeftError('nats_connect_failed', `--nats ${nats.url}: ${(e as Error).message}`);
  }
  prepareGpuEnv();
  const api = await openReader({ readerId, spec }, spec.backend, { probe: true });
  const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  const srv = await serveReaderOverNats(api, nc, { group, version, log: (m, f) => log(m, f) });
  const info = api.info();
  process.stdout.write(`${JSON.stringify({ attached: { nats: nats.url, group }, reader_id: info.readerId, model: info.model, device: info.device, backend: info.backend })}\n`);
  log('reader attached', { nats: nats.url, consumer_group: group, reader_id: info.readerId, model: info.model, backend: info.backend });
  void (async () => {
    for await (const st of nc.status()) if (st.type === 'disconnect' || st.type === 'reconnect') log(`nats ${st.type}`, {});
  })();
  await new Promise<void>((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
  log('reader shutting down', { in_flight: srv.inFlight() });
  await srv.close();
  await nc.drain().catch(() => undefined);
  setTimeout(() => process.exit(0), 200).unref(); // the GPU device may hold the event loop open
  return 0;
}

/** parseArgs' errors for flags a command does not take, or takes differently. */
const ARG_ERRORS = new Set(['ERR_PARSE_ARGS_UNKNOWN_OPTION', 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE', 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL']);

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  // `weft CMD --help` (any command but license, which prints its own usage): the usage, exit 0.
  if (cmd !== 'license' && (rest.includes('--help') || rest.includes('-h'))) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  try {
    switch (cmd) {
      case 'generate':
        return await generate(rest);
      case 'device':
        return await device(rest);
      case 'reader':
        return await reader(rest);
      case '--version':
      case '-v':
      case 'version':
        process.stdout.write(`${VERSION}\n`);
        return 0;
      case 'pull': {
        if (rest.length !== 1 || rest[0]!.startsWith('-')) {
          process.stderr.write(`${USAGE}\n`);
          return 2;
        }
        if (!parseHubId(rest[0]!)) throw new WeftError('invalid_argument', `"${rest[0]}" is not a Hub id (ORG/NAME or ORG/NAME:FILE.gguf)`);
        process.stdout.write(`${await resolveModelArg(rest[0]!)}\n`);
        return 0;
      }
      case 'document-worker': {
        const { documentWorkerCommand } = await import('./documents/worker_cli.ts');
        return await documentWorkerCommand(rest);
      }
      case 'license': {
        const { licenseCommand } = await import('./license_cli.ts');
        return licenseCommand(rest);
      }
      case 'serve': {
        const { serve } = await import('./main.ts');
        // A Hub id given as --model is pulled (or found in the cache) before the server starts.
        const i = rest.findIndex((a) => a === '--model' || a.startsWith('--model='));
        if (i >= 0 && rest[i] === '--model' && rest[i + 1]) rest[i + 1] = await resolveModelArg(rest[i + 1]!);
        else if (i >= 0 && rest[i]!.startsWith('--model=')) rest[i] = `--model=${await resolveModelArg(rest[i]!.slice('--model='.length))}`;
        return await serve(rest);
      }
      default:
        process.stderr.write(`${USAGE}\n`);
        return cmd === undefined || cmd === '--help' || cmd === 'help' ? 0 : 2;
    }
  } catch (e) {
    if (e instanceof WeftError) {
      process.stderr.write(`weft: ${e.message} [${e.code}]\n`);
      return 1;
    }
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && ARG_ERRORS.has(code)) {
      // A mistyped flag: one line naming it, then the usage; no stack trace.
      process.stderr.write(`weft ${cmd}: ${(e as Error).message.split('. ')[0]}\n${USAGE}\n`);
      return 2;
    }
    throw e;
  }
}
