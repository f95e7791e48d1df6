/**
 * The engine library: Weft's core as an in-app engine for web pages, Web
 * Workers, Node and Deno, in the shape OpenAI's SDK and WebLLM users know.
 *
 *   const engine = await createEngine({ model: 'https://host/models/qwen/', onProgress });
 *   const r = await engine.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }] });
 *   for await (const c of await engine.chat.completions.create({ messages, stream: true })) ...
 *   await engine.unload();
 *
 * createWorkerEngine(worker, opts) gives the same engine with the model in a
 * Web Worker whose script calls serveEngine() (the `./worker` entry).
 * Browser-safe: nothing here imports node:*; Node callers pass filesystem
 * paths through the Node entry (or their own `openPath`). docs/library.md.
 */
import { WeftEngine } from './engine.ts';
import { openReader, type CreateEngineOptions } from './load.ts';

/** Loads `opts.model` on a WebGPU device in this thread and resolves to its engine. */
export async function createEngine(opts: CreateEngineOptions): Promise<WeftEngine> {
  const { reader, release } = await openReader(opts);
  return new WeftEngine(reader, release);
}

export { WeftEngine, type ChatCompletions, type Completions } from './engine.ts';
export { createWorkerEngine, type WorkerEngineOptions, type WorkerLike } from './worker_client.ts';
export type { CreateEngineOptions, LoadSettings, ModelInput } from './load.ts';
export { urlSource, directoryHandleSource, type DirectoryHandleLike, type UrlSourceOptions } from './sources.ts';
export { filesSource, bytesSource, blobSource, type ByteSource, type ModelSource } from '../formats/source.ts';
export type * from './types.ts';
export type { GenerationEvent } from '../engine/engine.ts';
export type { GenerateRequest, ReaderInfo } from '../engine/reader_api.ts';
export { WeftError, CancelledError, InvalidRequestError, ModelFormatError, UnsupportedModelError, UnavailableError, NoAdapterError, GpuError } from '../errors.ts';
