/**
 * Node implementations of the format sources in core/formats/source.ts.
 *
 * `fileSource` does positional reads (fs.promises FileHandle.read at an
 * offset), so a multi-GB checkpoint is never loaded whole: parsers read a
 * header, then one tensor at a time. Each read opens and closes its own handle:
 * reads are coarse (a header, a whole tensor), so the extra open costs little,
 * and no descriptor can leak when a caller forgets to close a source.
 */
import { open, readdir, readFile, stat } from 'node:fs/promises';
import { basename, join, relative, sep } from 'node:path';
import { ModelFormatError, UnsupportedModelError } from '../core/errors.ts';
import { checkRange, GGUF_FILE, normalizeModelPath, type ByteSource, type ModelSource } from '../core/formats/source.ts';

export { GGUF_FILE };

/** Largest single FileHandle.read; longer reads loop (the OS caps one read near 2 GiB). */
const MAX_READ = 1 << 30;

function notFound(path: string, e: unknown): ModelFormatError {
  const code = (e as NodeJS.ErrnoException).code;
  return new ModelFormatError(`cannot open ${path}: ${code ?? (e as Error).message}`, { path, code });
}

/** A ByteSource over a file on disk; size is taken when opened. */
export async function fileSource(path: string): Promise<ByteSource> {
  let size: number;
  try {
    const st = await stat(path);
    if (!st.isFile()) throw new ModelFormatError(`${path} is not a regular file`, { path });
    size = st.size;
  } catch (e) {
    if (e instanceof ModelFormatError) throw e;
    throw notFound(path, e);
  }
  return {
    size,
    async read(offset, length) {
      checkRange(size, offset, length, path);
      const out = new Uint8Array(length);
      const fh = await open(path, 'r');
      try {
        let done = 0;
        while (done < length) {
          const want = Math.min(length - done, MAX_READ);
          const { bytesRead } = await fh.read(out, done, want, offset + done);
          if (bytesRead === 0) {
            throw new ModelFormatError(`${path} shrank while reading (got ${done} of ${length} bytes at ${offset})`, {
              path,
            });
          }
          done += bytesRead;
        }
      } finally {
        await fh.close();
      }
      return out;
    },
  };
}

/** A ModelSource over a directory (an HF model folder). Paths may not escape it. */
export function dirSource(dir: string): ModelSource {
  const full = (p: string): string => join(dir, ...normalizeModelPath(p).split('/'));
  return {
    name: basename(dir),
    async exists(p) {
      try {
        return (await stat(full(p))).isFile();
      } catch (e) {
        if (e instanceof ModelFormatError) throw e;
        return false;
      }
    },
    async readText(p) {
      try {
        return await readFile(full(p), 'utf8');
      } catch (e) {
        if (e instanceof ModelFormatError) throw e;
        throw notFound(join(dir, p), e);
      }
    },
    async open(p) {
      return fileSource(full(p));
    },
    async list() {
      const entries = await readdir(dir, { recursive: true, withFileTypes: true });
      return entries
        .filter((d) => d.isFile())
        .map((d) => relative(dir, join(d.parentPath ?? d.path, d.name)).split(sep).join('/'))
        .sort();
    },
  };
}

/**
 * A ModelSource for a model path: a directory (HF layout, or one holding a
 * .gguf), or a single `.gguf` file exposed as `model.gguf`.
 */
export async function openModelPath(p: string): Promise<ModelSource> {
  let st;
  try {
    st = await stat(p);
  } catch (e) {
    throw notFound(p, e);
  }
  if (st.isDirectory()) return dirSource(p);
  if (!p.toLowerCase().endsWith('.gguf')) {
    throw new UnsupportedModelError(`${p} is a file but not a .gguf; pass a model directory or a .gguf file`, {
      path: p,
    });
  }
  return {
    name: basename(p).replace(/\.gguf$/i, ''),
    async exists(q) {
      return q === GGUF_FILE;
    },
    async readText(q) {
      throw new ModelFormatError(`${basename(p)} is a single GGUF file; it has no ${q}`, { path: q });
    },
    async open(q) {
      if (q !== GGUF_FILE) throw new ModelFormatError(`${basename(p)} has no file ${q}`, { path: q });
      return fileSource(p);
    },
    async list() {
      return [GGUF_FILE];
    },
  };
}
