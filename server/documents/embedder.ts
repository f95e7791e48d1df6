/**
 * Opening the pipeline's embedder from documents.embedder. The model always
 * runs in a worker thread, never on the HTTP event loop
 * (reader_embedder.ts):
 *  - when it is the same model as the server's embedding reader (by default
 *    both are the bundled USE-Lite), through that consumer group's readers;
 *  - otherwise in a dedicated worker reader the documents service owns.
 * The identity stored with the vectors is the model directory's name (as
 * before the move to workers, so existing stores keep opening).
 */
import { realpath } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Embedder } from '../../core/documents/embedder.ts';
import { ensureUseLite } from '../models/use_lite.ts';
import type { ReaderManager } from '../readers/manager.ts';
import { USE_LITE_MODEL } from '../readers/open_reader.ts';
import { dedicatedReader, groupReaders, readerEmbedder } from './reader_embedder.ts';

/** The server's embedding reader, as the documents service may share it. */
export interface SharedEmbeddingReaders {
  manager: ReaderManager;
  /** Its consumer group (`embed` by default). */
  group: string;
  /** Its model as configured (`use-lite`, or a directory); '' = none. */
  model: string;
}

export interface OpenEmbedderOptions {
  /** GPU backend of a dedicated reader ('' / 'auto' = the default adapter). */
  backend?: string;
  /** Share these readers when they serve the same model as `dir`. */
  shared?: SharedEmbeddingReaders;
  /** How long to wait for the first reader to load, ms. */
  startTimeoutMs?: number;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
}

/** The directory a reader's `model` names (`use-lite`: the converted bundled model), real path; null when it is not a local path. */
async function modelDir(model: string): Promise<string | null> {
  try {
    return await realpath(model === USE_LITE_MODEL ? await ensureUseLite() : resolve(model));
  } catch {
    return null;
  }
}

/** Opens the embedder of model directory `dir` (see the file comment for where it runs). */
export async function loadEmbedder(dir: string, backendOrOpts: string | OpenEmbedderOptions = {}): Promise<Embedder> {
  const opts: OpenEmbedderOptions = typeof backendOrOpts === 'string' ? { backend: backendOrOpts } : backendOrOpts;
  const shared = opts.shared;
  const common = { ...(opts.startTimeoutMs !== undefined ? { startTimeoutMs: opts.startTimeoutMs } : {}), ...(opts.log ? { log: opts.log } : {}) };
  if (shared?.model && shared.manager.groups().get(shared.group)?.some((r) => r.spec.model === shared.model)) {
    const [mine, theirs] = await Promise.all([modelDir(dir), modelDir(shared.model)]);
    if (mine && mine === theirs) return readerEmbedder(dir, groupReaders(shared.manager, shared.group, shared.model), common);
  }
  return readerEmbedder(dir, dedicatedReader(resolve(dir), opts.backend ? { backend: opts.backend } : {}), common);
}
