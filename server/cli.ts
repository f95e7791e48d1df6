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
 *   weft reader   --model PATH --listen HOST:PORT [--token T] [--backend B] ...
 *                 loads one reader and serves it to servers that attach it
 *                 with `remote: host:port` (server/readers/remote_server.ts)
 *
 * `generate` streams text to stdout as it is produced; `--json` prints one
 * `{"text", "token_ids", ...}` object instead, for scripts. Temperature 0
 * means greedy decoding.
 */
import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { GpuContext } from '../core/gpu/context.ts';
import { loadDecoder, planDecoder } from '../core/models/load.ts';
import { formatPlan } from '../core/models/memory_plan.ts';
import type { WeightDType } from '../core/models/host_tensor.ts';
import { WeftError } from '../core/errors.ts';
import { openModelPath } from './fs_source.ts';
import { DEFAULT_MODEL_DIR } from './paths.ts';

const USAGE = `usage:
  weft generate [--model DIR_OR_GGUF] [--max-new-tokens N] [--temperature T] [--top-k K]
                [--top-p P] [--seed S] [--dtype f32|f16|q8_0|q4_0|auto] [--backend NAME] [--json] PROMPT
  weft generate --dry-run [--model DIR_OR_GGUF] [--dtype D] [--backend NAME] [--json]
  weft serve [--config FILE] [--port N] [--model DIR_OR_GGUF]
  weft device [--backend NAME]
  weft reader --listen HOST:PORT [--token T] [--model DIR_OR_GGUF] [--backend NAME]
              [--dtype D] [--max-batch-size N] [--max-context N] [--page-cache-size S] [--type T]`;

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
      backend: { type: 'string' },
      json: { type: 'boolean' },
      'dry-run': { type: 'boolean' },
    },
  });
  const prompt = positionals.join(' ');
  const gpuMemory = process.env.WEFT_GPU_MEMORY ? num(process.env.WEFT_GPU_MEMORY, 'WEFT_GPU_MEMORY') : undefined;
  if (values['dry-run']) return dryRun(values.model, (values.dtype ?? 'auto') as WeightDType, values.backend, !!values.json, gpuMemory);
  if (!prompt) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const ctx = await GpuContext.create(values.backend ? { backend: values.backend } : {});
  const loaded = await loadDecoder(ctx, await openModelPath(values.model ?? DEFAULT_MODEL_DIR), {
    dtype: (values.dtype ?? 'auto') as WeightDType,
    maxSeqs: 1,
    ...(gpuMemory ? { gpuMemoryBytes: gpuMemory } : {}),
  });
  const sampling = {
    temperature: num(values.temperature, 'temperature') ?? 0,
    ...(values['top-k'] !== undefined ? { topK: num(values['top-k'], 'top-k')! } : {}),
    ...(values['top-p'] !== undefined ? { topP: num(values['top-p'], 'top-p')! } : {}),
    ...(values.seed !== undefined ? { seed: num(values.seed, 'seed')! } : {}),
  };
  const maxNewTokens = num(values['max-new-tokens'], 'max-new-tokens') ?? 64;
  const started = performance.now();
  let firstAt = 0;
  for await (const ev of loaded.engine.generate(prompt, { maxNewTokens, sampling })) {
    if (ev.type === 'token') {
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

/** `generate --dry-run`: the memory plan of the model on this device (a refusal throws ModelTooLargeError). */
async function dryRun(model: string | undefined, dtype: WeightDType, backend: string | undefined, json: boolean, gpuMemory: number | undefined): Promise<number> {
  const ctx = await GpuContext.create(backend ? { backend } : {});
  try {
    const r = await planDecoder(ctx, await openModelPath(model ?? DEFAULT_MODEL_DIR), { dtype, maxSeqs: 1, ...(gpuMemory ? { gpuMemoryBytes: gpuMemory } : {}) });
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
  const ctx = await GpuContext.create(values.backend ? { backend: values.backend } : {});
  process.stdout.write(`${JSON.stringify({ ...ctx.gpu.info, caps: ctx.gpu.caps, variant: ctx.variant }, null, 2)}\n`);
  ctx.destroy();
  return 0;
}

/**
 * `weft reader`: loads the model, listens, prints one JSON line
 * `{"listening": {"host", "port"}, "reader_id", "model", "device", "backend"}`
 * on stdout (port 0 binds an ephemeral port: read it there), and serves until
 * SIGINT / SIGTERM. The token comes from --token or WEFT_READER_TOKEN; without
 * one, any client may attach (loopback only, or a private network).
 */
async function reader(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      model: { type: 'string' },
      listen: { type: 'string' },
      token: { type: 'string' },
      backend: { type: 'string' },
      dtype: { type: 'string' },
      'max-batch-size': { type: 'string' },
      'max-context': { type: 'string' },
      'page-cache-size': { type: 'string' },
      type: { type: 'string' },
      'reader-id': { type: 'string' },
    },
  });
  if (!values.listen) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const { splitHostPort } = await import('./readers/remote_frames.ts');
  const { parseReaderSpec } = await import('./readers/spec.ts');
  const { openReader } = await import('./readers/open_reader.ts');
  const { listenRemoteReader } = await import('./readers/remote_server.ts');
  const { prepareGpuEnv } = await import('../core/gpu/device.ts');
  const { createLogger } = await import('./log.ts');
  let addr: { host: string; port: number };
  try {
    addr = splitHostPort(values.listen);
  } catch (e) {
    throw new WeftError('invalid_argument', `--listen: ${(e as Error).message}`);
  }
  const spec = parseReaderSpec(
    {
      model: values.model ?? DEFAULT_MODEL_DIR,
      backend: values.backend,
      dtype: values.dtype,
      max_batch_size: num(values['max-batch-size'], 'max-batch-size'),
      max_context: num(values['max-context'], 'max-context'),
      page_cache_size: values['page-cache-size'],
      type: values.type,
    },
    { model: DEFAULT_MODEL_DIR },
  );
  const token = values.token ?? process.env.WEFT_READER_TOKEN ?? null;
  const log = createLogger({ timestamps: !process.env.WEFT_LOG_DISABLE_TIMESTAMPS, color: false });
  if (token === null && !/^(127\.|localhost$|::1$)/.test(addr.host)) log('listening without a token on a non-loopback address: any client can attach', {}, 'warn');
  prepareGpuEnv();
  const readerId = values['reader-id'] ?? `reader@${hostname()}`;
  const api = await openReader({ readerId, spec }, spec.backend, { probe: true });
  const srv = await listenRemoteReader(api, { host: addr.host, port: addr.port, token, log: (m, f) => log(m, f) });
  const info = api.info();
  process.stdout.write(`${JSON.stringify({ listening: { host: srv.host, port: srv.port }, reader_id: info.readerId, model: info.model, device: info.device, backend: info.backend })}\n`);
  log('reader listening', { host: srv.host, port: srv.port, model: info.model, backend: info.backend });
  await new Promise<void>((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
  log('reader shutting down', { connections: srv.connections() });
  await srv.close();
  setTimeout(() => process.exit(0), 200).unref(); // the GPU device may hold the event loop open
  return 0;
}

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  try {
    switch (cmd) {
      case 'generate':
        return await generate(rest);
      case 'device':
        return await device(rest);
      case 'reader':
        return await reader(rest);
      case 'serve': {
        const { serve } = await import('./main.ts');
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
    throw e;
  }
}
