/**
 * The engine library for Node: core/api's createEngine, with a string `model`
 * that is not a URL taken as a filesystem path (a model directory or a `.gguf`
 * file, through fs_source.ts) or, when no such path exists and it reads as
 * one, a Hub id (`org/name`, `org/name:file.gguf`) pulled into the HF cache
 * first (server/hub/; download progress arrives as `fetch` stage events).
 * Kept out of core/ because it imports node:fs. Everything else is core/api's.
 */
import { createEngine as createCoreEngine, type CreateEngineOptions, type ModelSource, type WeftEngine } from '../core/api/index.ts';
import { openModelPath } from './fs_source.ts';
import { resolveModelArg } from './hub/resolve.ts';

export * from '../core/api/index.ts';

/** createEngine where a string `model` that is not a URL is a filesystem path or a Hub id. */
export function createEngine(opts: CreateEngineOptions): Promise<WeftEngine> {
  const openPath = async (p: string): Promise<ModelSource> => {
    const local = await resolveModelArg(p, { onProgress: (q) => opts.onProgress?.({ stage: 'fetch', loaded: q.allLoaded, total: q.allTotal, detail: q.file }) });
    const ms = await openModelPath(local);
    // A Hub model is named by its id, not by its snapshot's commit hash.
    return local === p ? ms : { ...ms, name: p };
  };
  return createCoreEngine({ openPath, ...opts });
}
