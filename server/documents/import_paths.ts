/**
 * `path` imports, confined to the configured import roots.
 *
 * A path is refused (entry invalid) when: no roots are configured
 * (`path_not_allowed`); it has a `..` segment or a NUL (`path_traversal`,
 * refused before touching the file system); or, after symlinks are resolved
 * (realpath), it lies outside every root (`path_not_allowed`) — so a symlink
 * inside a root cannot point out of it. A relative path is looked up under
 * each root in order. Then `path_not_found`, `not_a_file`, `file_too_large`
 * (checked from stat, before reading).
 */
import { realpath, readFile, stat } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve } from 'node:path';
import type { PathReader, PathResult } from '../../core/documents/intake.ts';

const no = (reason: string, message: string): PathResult => ({ ok: false, reason, message });

function inside(root: string, p: string): boolean {
  const rel = relative(root, p);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

async function real(p: string): Promise<string | null> {
  try {
    return await realpath(p);
  } catch {
    return null;
  }
}

export function importRootsReader(roots: readonly string[]): PathReader {
  return async (path, maxBytes) => {
    if (!roots.length) return no('path_not_allowed', 'path imports are disabled: no import roots are configured (documents.import_roots)');
    if (path.includes('\0') || path.split(/[\\/]+/).includes('..')) return no('path_traversal', `"${path}" climbs out of its directory ("..")`);
    const realRoots = (await Promise.all(roots.map((r) => real(resolve(r))))).filter((r): r is string => r !== null);
    const candidates = isAbsolute(path) ? [path] : realRoots.map((r) => join(r, path));
    let found: string | null = null;
    for (const c of candidates) {
      found = await real(c);
      if (found) break;
    }
    if (!found) {
      if (isAbsolute(path) && !realRoots.some((r) => inside(r, resolve(path)))) return no('path_not_allowed', `"${path}" is outside the import roots`);
      return no('path_not_found', `no file at "${path}"`);
    }
    if (!realRoots.some((r) => inside(r, found!))) return no('path_not_allowed', `"${path}" is outside the import roots`);
    const st = await stat(found);
    if (!st.isFile()) return no('not_a_file', `"${path}" is not a regular file`);
    if (st.size > maxBytes) return no('file_too_large', `the file is ${st.size} bytes; the limit is ${maxBytes}`);
    try {
      return { ok: true, bytes: new Uint8Array(await readFile(found)) };
    } catch (e) {
      return no('path_unreadable', `cannot read "${path}": ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
  };
}
