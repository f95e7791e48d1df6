/**
 * The pipeline's own embedder: an encoder model from a directory, on a GPU
 * device of this process (the readers' devices live in their worker
 * threads). Its identity is the directory's name; the store records it with
 * the vectors and refuses another embedder's.
 *
 * Loads what EncoderModel loads: BERT / RoBERTa / XLM-R checkpoints with
 * sentence-transformers pooling. Another architecture (e.g. the bundled
 * USE-Lite, until its model class is wired in here) is refused with a clear
 * error before any GPU work.
 */
import { basename, resolve } from 'node:path';
import { encoderEmbedder, type Embedder } from '../../core/documents/embedder.ts';
import { UnsupportedModelError, WeftError } from '../../core/errors.ts';
import { GpuContext } from '../../core/gpu/context.ts';
import { readEncoderSpec } from '../../core/models/bert/config.ts';
import { readFile } from 'node:fs/promises';
import { EncoderModel } from '../../core/models/bert/encoder.ts';
import { isUseLiteConfig } from '../../core/models/use/config.ts';
import { UseLiteModel, type EncoderLike } from '../../core/models/use/model.ts';
import { dirSource } from '../fs_source.ts';

/** Null when `dir` holds a model loadEmbedder can load, else why not. */
export async function embedderProblem(dir: string): Promise<string | null> {
  try {
    const spec = await readEncoderSpec(dirSource(resolve(dir)));
    return spec.wantsClassifier ? `${spec.architecture} is a classifier, not an embedding model` : null;
  } catch (e) {
    return e instanceof WeftError || e instanceof Error ? e.message : String(e);
  }
}

export async function loadEmbedder(dir: string, backend: string): Promise<Embedder> {
  const useLite = isUseLiteConfig(JSON.parse(await readFile(resolve(dir, 'config.json'), 'utf8').catch(() => '{}')));
  const problem = useLite ? null : await embedderProblem(dir);
  if (problem) {
    throw new UnsupportedModelError(`documents.embedder ${dir} cannot be loaded (${problem}); the document embedder loads BERT / RoBERTa / XLM-R sentence-transformers directories`, { path: dir });
  }
  const ctx = await GpuContext.create(backend && backend !== 'auto' ? { backend: backend as never } : {});
  let model: EncoderLike;
  try {
    const ms = dirSource(resolve(dir));
    model = useLite ? await UseLiteModel.load(ctx, ms, { batchDurationMs: 2 }) : await EncoderModel.load(ctx, ms, { batchDurationMs: 2 });
  } catch (e) {
    ctx.device.destroy();
    throw e;
  }
  const inner = encoderEmbedder(model, basename(resolve(dir)));
  return {
    ...inner,
    async close() {
      await inner.close();
      ctx.device.destroy();
    },
  };
}
