/**
 * Byte and file sources that model-format parsers read through.
 *
 * Parsers never see a path or a file system: they get a `ByteSource` (random
 * access reads of one file) or a `ModelSource` (a named set of files, e.g. an
 * HF model directory). That keeps core/ portable: browsers back these with
 * Blob/File objects (uploads), Node with positional FileHandle reads
 * (server/fs_source.ts), tests with in-memory Uint8Arrays. Reads are in bytes;
 * offsets and lengths are byte counts from the start of the file.
 */
import { ModelFormatError } from '../errors.ts';

/** Random-access view of one file. */
export interface ByteSource {
  /** Total size in bytes. */
  readonly size: number;
  /**
   * Exactly `length` bytes starting at byte `offset`. Reading past the end
   * rejects with ModelFormatError (a file shorter than its header claims is a
   * format problem). The result may be a view into a shared buffer: treat it as
   * read-only, and copy before reinterpreting it as a wider typed array unless
   * its byteOffset is suitably aligned.
   */
  read(offset: number, length: number): Promise<Uint8Array>;
}

/** A model as a set of named files (paths relative to the model root, '/'-separated). */
export interface ModelSource {
  /** Human-readable name (directory name, file name, "upload"...). */
  readonly name: string;
  exists(path: string): Promise<boolean>;
  /** Whole file as UTF-8 text (config.json, tokenizer.json...). */
  readText(path: string): Promise<string>;
  open(path: string): Promise<ByteSource>;
  /** All file paths, when the backing store can enumerate them. */
  list?(): Promise<string[]>;
}

/** Throws unless [offset, offset + length) lies inside a file of `size` bytes. */
export function checkRange(size: number, offset: number, length: number, what = 'file'): void {
  if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0) {
    throw new ModelFormatError(`invalid read of ${what}: offset ${offset}, length ${length}`, { offset, length });
  }
  if (offset + length > size) {
    throw new ModelFormatError(
      `${what} is truncated: wanted bytes [${offset}, ${offset + length}) but it has only ${size} bytes`,
      { offset, length, size },
    );
  }
}

/** A ByteSource over bytes already in memory (zero-copy: reads are subarray views). */
export function bytesSource(u8: Uint8Array): ByteSource {
  return {
    size: u8.byteLength,
    async read(offset, length) {
      checkRange(u8.byteLength, offset, length);
      return u8.subarray(offset, offset + length);
    },
  };
}

/** A ByteSource over a Blob / File (browser uploads, fetch responses); only the slices read are loaded. */
export function blobSource(blob: Blob, what = 'file'): ByteSource {
  return {
    size: blob.size,
    async read(offset, length) {
      checkRange(blob.size, offset, length, what);
      return new Uint8Array(await blob.slice(offset, offset + length).arrayBuffer());
    },
  };
}

/**
 * Normalizes a model-relative path and rejects ones that could escape the
 * model root ("..", absolute paths, backslashes, NUL). Shard names come from
 * files we parse, so they are untrusted.
 */
export function normalizeModelPath(path: string): string {
  const p = path.replace(/^\.\//, '');
  const bad =
    p.length === 0 ||
    p.startsWith('/') ||
    p.includes('\\') ||
    p.includes('\0') ||
    /^[a-zA-Z]:/.test(p) ||
    p.split('/').some((seg) => seg === '..' || seg === '.' || seg === '');
  if (bad) throw new ModelFormatError(`invalid file path in model: ${JSON.stringify(path)}`, { path });
  return p;
}

/** Name under which a model given as a single GGUF file exposes that file. */
export const GGUF_FILE = 'model.gguf';

/**
 * A ModelSource over in-memory files, e.g. the files a user picked or dropped
 * in a browser. Keys are model-relative paths; a leading common directory
 * (as `webkitRelativePath` produces: "my-model/config.json") is stripped when
 * every key shares it. A lone `*.gguf` file is also reachable as `model.gguf`,
 * as with a single-file path on the server.
 */
export function filesSource(files: Map<string, Blob | Uint8Array>, name = 'upload'): ModelSource {
  const map = new Map<string, Blob | Uint8Array>();
  const keys = [...files.keys()];
  const first = keys[0]?.split('/')[0];
  const strip = keys.length > 0 && first !== undefined && keys.every((k) => k.startsWith(first + '/'));
  for (const [k, v] of files) map.set(strip ? k.slice(first!.length + 1) : k, v);
  const ggufs = [...map.keys()].filter((k) => k.toLowerCase().endsWith('.gguf'));
  if (ggufs.length === 1 && !map.has(GGUF_FILE)) map.set(GGUF_FILE, map.get(ggufs[0]!)!);

  const get = (path: string): Blob | Uint8Array => {
    const f = map.get(normalizeModelPath(path));
    if (!f) throw new ModelFormatError(`model "${name}" has no file ${path}`, { path, model: name });
    return f;
  };
  return {
    name,
    async exists(path) {
      return map.has(normalizeModelPath(path));
    },
    async readText(path) {
      const f = get(path);
      return f instanceof Uint8Array ? new TextDecoder().decode(f) : await f.text();
    },
    async open(path) {
      const f = get(path);
      return f instanceof Uint8Array ? bytesSource(f) : blobSource(f, path);
    },
    async list() {
      return [...map.keys()].sort();
    },
  };
}

/** Reads and parses a JSON file of a model, mapping syntax errors to ModelFormatError. */
export async function readJson(ms: ModelSource, path: string): Promise<unknown> {
  const text = await ms.readText(path);
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new ModelFormatError(`${ms.name}/${path} is not valid JSON: ${(e as Error).message}`, { path });
  }
}
