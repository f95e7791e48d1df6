/**
 * Where the package keeps its bundled files (models/, web/dist, package.json),
 * found from this module's URL so it works from a checkout (server/paths.ts)
 * and from the built, installed package (dist/server/paths.js) alike: the root
 * is the nearest directory above this module that holds a package.json.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function findPackageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    const up = dirname(dir);
    if (up === dir) return fileURLToPath(new URL('..', import.meta.url)); // no package.json above: the source layout
    dir = up;
  }
}

export const PACKAGE_ROOT = findPackageRoot();
/** The bundled default generative model (stories260K, Llama architecture). */
export const DEFAULT_MODEL_DIR = join(PACKAGE_ROOT, 'models', 'stories260K');
/** Where `npm run build:web` writes the app. */
export const WEB_DIST_DIR = join(PACKAGE_ROOT, 'web', 'dist');
const pkg = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
/** The package's name and version (package.json), for `weft --version` and `GET /version`. */
export const PACKAGE_NAME: string = pkg.name;
export const VERSION: string = pkg.version;
