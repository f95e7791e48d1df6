/**
 * The `weft` command line.
 *
 *   weft generate [--model DIR_OR_GGUF] [--max-new-tokens N] [--temperature T]
 *                 [--top-k K] [--top-p P] [--seed S] [--dtype D] [--backend B] [--json] PROMPT
 *   weft serve    [--config FILE] [--port N] [--model PATH]  (server/main.ts)
 *   weft device   prints the adapter Weft would use
 *
 * `generate` streams text to stdout as it is produced; `--json` prints one
 * `{"text", "token_ids", ...}` object instead, for scripts. Temperature 0
 * means greedy decoding.
 */
import { parseArgs } from 'node:util';
import { GpuContext } from '../core/gpu/context.ts';
import { loadDecoder } from '../core/models/load.ts';
import type { WeightDType } from '../core/models/host_tensor.ts';
import { WeftError } from '../core/errors.ts';
import { openModelPath } from './fs_source.ts';
import { DEFAULT_MODEL_DIR } from './paths.ts';

const USAGE = `usage:
  weft generate [--model DIR_OR_GGUF] [--max-new-tokens N] [--temperature T] [--top-k K]
                [--top-p P] [--seed S] [--dtype f32|f16|q8_0|q4_0|auto] [--backend NAME] [--json] PROMPT
  weft serve [--config FILE] [--port N] [--model DIR_OR_GGUF]
  weft device [--backend NAME]`;

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
    },
  });
  const prompt = positionals.join(' ');
  if (!prompt) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const ctx = await GpuContext.create(values.backend ? { backend: values.backend } : {});
  const loaded = await loadDecoder(ctx, await openModelPath(values.model ?? DEFAULT_MODEL_DIR), {
    dtype: (values.dtype ?? 'auto') as WeightDType,
    maxSeqs: 1,
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

async function device(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { backend: { type: 'string' } } });
  const ctx = await GpuContext.create(values.backend ? { backend: values.backend } : {});
  process.stdout.write(`${JSON.stringify({ ...ctx.gpu.info, caps: ctx.gpu.caps, variant: ctx.variant }, null, 2)}\n`);
  ctx.destroy();
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
