/**
 * The engine library for Node: core/api's createEngine, with filesystem
 * paths opened through fs_source.ts (a model directory or a `.gguf` file), so
 * a script can say `createEngine({ model: './models/stories260K' })`. Kept out
 * of core/ because it imports node:fs. Everything else is core/api's.
 */
import { createEngine as createCoreEngine, type CreateEngineOptions, type WeftEngine } from '../core/api/index.ts';
import { openModelPath } from './fs_source.ts';

export * from '../core/api/index.ts';

/** createEngine where a string `model` that is not a URL is a filesystem path. */
export function createEngine(opts: CreateEngineOptions): Promise<WeftEngine> {
  return createCoreEngine({ openPath: openModelPath, ...opts });
}
