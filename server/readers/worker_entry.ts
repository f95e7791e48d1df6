/**
 * A reader's worker thread: owns one GPU device and one loaded model, and
 * serves ReaderApi to the main thread over the worker port. Loading or a crash
 * here never blocks the HTTP thread; the manager restarts a dead worker.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { errorToJSON } from '../../core/errors.ts';
import { constraintCompilerFor } from '../../core/engine/constraints.ts';
import { LocalReader } from '../../core/engine/local_reader.ts';
import { serveReader, type Endpoint, type Msg } from '../../core/engine/protocol.ts';
import { parsePageCacheSize } from '../../core/engine/sizes.ts';
import { GpuContext } from '../../core/gpu/context.ts';
import { loadDecoder } from '../../core/models/load.ts';
import { openModelPath } from '../fs_source.ts';
import type { ReaderSpec } from './spec.ts';

interface WorkerInit {
  readerId: string;
  spec: ReaderSpec;
}

const port = parentPort!;
const endpoint: Endpoint = {
  post: (m: Msg) => port.postMessage(m),
  onMessage: (cb) => port.on('message', (m: Msg) => cb(m)),
};

/** GPU memory budget that `X%` page-cache sizes refer to (WebGPU exposes no memory size). */
function memoryBudget(ctx: GpuContext): number {
  const env = process.env.WEFT_GPU_MEMORY;
  if (env && Number.isFinite(Number(env))) return Number(env);
  return Math.min(ctx.gpu.limits.maxBufferSize * 4, 8 * 2 ** 30);
}

async function main(): Promise<void> {
  const { readerId, spec } = workerData as WorkerInit;
  try {
    const ctx = await GpuContext.create(spec.backend ? { backend: spec.backend } : {});
    const ms = await openModelPath(spec.model);
    const kvCacheBytes = spec.pageCacheSize !== undefined ? parsePageCacheSize(spec.pageCacheSize, memoryBudget(ctx)) : undefined;
    const loaded = await loadDecoder(ctx, ms, {
      ...(spec.dtype ? { dtype: spec.dtype } : {}),
      ...(spec.maxSeqs ? { maxSeqs: spec.maxSeqs } : {}),
      ...(spec.maxTokensPerStep ? { maxTokensPerStep: spec.maxTokensPerStep } : {}),
      ...(spec.maxContext ? { maxContext: spec.maxContext } : {}),
      ...(kvCacheBytes !== undefined ? { kvCacheBytes: Math.max(kvCacheBytes, 1) } : {}),
      ...(spec.prefixCaching !== undefined ? { prefixCaching: spec.prefixCaching } : {}),
    });
    const api = new LocalReader(
      loaded,
      { readerId, model: spec.model, device: ctx.gpu.info.name, backend: ctx.gpu.info.backend },
      constraintCompilerFor(loaded.tokenizer, loaded.cfg.vocabSize),
    );
    serveReader(api, endpoint);
  } catch (e) {
    port.postMessage({ kind: 'failed', uuid: '', content: errorToJSON(e) } satisfies Msg);
  }
}

void main();
