/**
 * The composition root of a decoder reader: loads the model (core/models/load.ts,
 * which knows nothing of the engine), then builds the KV-cache manager, the
 * runner and the engine around it, and warms it up when asked. The
 * dependency runs one way only — engine -> models — and this module is
 * where the two meet; core/api/load.ts and the server's reader processes call it.
 */
import { Engine } from '../engine/engine.ts';
import { KvCacheManager } from '../engine/kv_cache.ts';
import { Runner } from '../engine/runner.ts';
import type { ServedDecoder } from '../engine/served_decoder.ts';
import { warmUp } from '../engine/warmup.ts';
import type { ModelSource } from '../formats/source.ts';
import type { GpuContext } from '../gpu/context.ts';
import { loadDecoderModel, type LoadedModel, type LoadOptions } from '../models/load.ts';

/** A decoder with its engine: what a LocalReader serves. */
export interface LoadedDecoder extends LoadedModel, ServedDecoder {}

/** Loads a decoder and builds its engine (see LoadOptions for the geometry and warm-up). */
export async function loadDecoder(ctx: GpuContext, ms: ModelSource, opts: LoadOptions = {}): Promise<LoadedDecoder> {
  const startedAt = performance.now();
  const m = await loadDecoderModel(ctx, ms, opts, startedAt);
  const { geometry, maxContext } = m;
  const kv = new KvCacheManager(geometry.numBlocks, geometry.blockSize, opts.prefixCaching ?? true);
  const runner = new Runner(ctx, m.model, kv);
  const engine = new Engine(runner, m.tokenizer, {
    scheduler: { maxTokensPerStep: geometry.maxTokens, maxSeqs: geometry.maxSeqs, maxContext },
    eosIds: m.eosIds,
  });
  const destroyModel = m.destroy;
  const loaded: LoadedDecoder = {
    ...m,
    engine,
    destroy() {
      runner.destroy();
      destroyModel();
    },
  };
  try {
    if (opts.warmUp) await warmUp(engine, ctx.pipelines, { maxContext, startedAt, ...(opts.onProgress ? { onProgress: opts.onProgress } : {}) });
  } catch (e) {
    loaded.destroy();
    throw e;
  }
  opts.onProgress?.({ phase: 'ready', done: 1, total: 1, ms: performance.now() - startedAt });
  return loaded;
}
