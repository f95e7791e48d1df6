/**
 * Schema resources of one document: the root and every subschema with an
 * `$id` (draft-04: `id`), each with its absolute URI, so `$ref`s resolve the
 * way JSON Schema says within a compound (bundled) document: a `$ref` is a
 * URI reference resolved against the base URI of the resource it sits in; a
 * fragment `#/a/b` is a JSON pointer into that resource. Nothing is fetched: a
 * URI that names no resource of the document is unresolvable (the compiler
 * refuses it), so a schema that uses other files must be bundled first, with
 * each embedded schema carrying its `$id` (e.g. under `$defs`).
 *
 * Resolution returns document pointers ("" = the root), which is how the
 * compiler names positions and rules.
 */
import { ptr } from './ast.ts';

/** Keywords whose values are data, not subschemas: an `$id` inside them means nothing. */
const DATA = new Set(['enum', 'const', 'default', 'examples', 'example']);
/** Keywords whose object values map names to subschemas (a key there is a name, not a keyword). */
const NAMED = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas', 'dependencies']);
/** The base of a document without an absolute `$id` (a URI no reference can name by accident). */
const ANONYMOUS = 'weft-schema:/root';

export class SchemaResources {
  /** Absolute URI without fragment → the resource's document pointer. */
  private readonly byUri = new Map<string, string>();
  /** Resource document pointers (longest first) with their base URIs. */
  private readonly roots: Array<{ pointer: string; base: string }> = [];

  constructor(root: unknown) {
    this.visit(root, '', ANONYMOUS, true);
    this.roots.sort((a, b) => b.pointer.length - a.pointer.length);
  }

  /** True when some subschema below the root is a resource of its own (a bundled document). */
  get compound(): boolean {
    return this.roots.length > 1;
  }

  private visit(v: unknown, pointer: string, base: string, isSchema: boolean): void {
    if (!v || typeof v !== 'object') return;
    if (Array.isArray(v)) {
      v.forEach((x, i) => this.visit(x, ptr(pointer, i), base, isSchema));
      return;
    }
    const o = v as Record<string, unknown>;
    let here = base;
    if (isSchema) {
      const id = typeof o.$id === 'string' ? o.$id : typeof o.id === 'string' ? o.id : undefined;
      if (id !== undefined && !id.startsWith('#')) {
        const uri = absolute(id, base);
        if (uri) {
          here = uri;
          if (!this.byUri.has(uri)) this.byUri.set(uri, pointer);
        }
      }
      if (pointer === '' || here !== base) this.roots.push({ pointer, base: here });
    }
    for (const [k, x] of Object.entries(o)) {
      const p = ptr(pointer, k);
      if (!isSchema) this.visit(x, p, here, true); // a name → its subschema
      else if (DATA.has(k)) continue;
      else if (NAMED.has(k) && x && typeof x === 'object' && !Array.isArray(x)) this.visit(x, p, here, false);
      else this.visit(x, p, here, true);
    }
  }

  /** The resource a document position belongs to: its pointer and base URI. */
  private resourceOf(site: string): { pointer: string; base: string } {
    for (const r of this.roots) if (r.pointer === '' || site === r.pointer || site.startsWith(`${r.pointer}/`)) return r;
    return { pointer: '', base: ANONYMOUS };
  }

  /** The absolute URI (without fragment) a `$ref` at document position `site` names; undefined if it is not a URI. */
  uriOf(ref: string, site: string): string | undefined {
    return absolute(ref, this.resourceOf(site).base);
  }

  /**
   * The document pointer a `$ref` found at document position `site` names, or
   * undefined when it names nothing in this document (another file, an
   * `$anchor`, a malformed URI). `site` undefined: only references that do not
   * depend on where they stand resolve (absolute URIs, and fragments when the
   * document is not compound).
   */
  resolve(ref: string, site: string | undefined): string | undefined {
    if (ref.startsWith('#')) {
      const frag = fragmentPointer(ref.slice(1));
      if (frag === undefined) return undefined;
      if (site === undefined) return this.compound ? undefined : frag;
      return this.resourceOf(site).pointer + frag;
    }
    if (site === undefined && absolute(ref, 'x:/') !== absolute(ref, 'y:/')) return undefined; // relative: needs a base
    const uri = absolute(ref, site === undefined ? ANONYMOUS : this.resourceOf(site).base);
    if (!uri) return undefined;
    const hash = ref.indexOf('#');
    const target = this.byUri.get(uri);
    if (target === undefined) return undefined;
    const frag = hash < 0 ? '' : fragmentPointer(ref.slice(hash + 1));
    return frag === undefined ? undefined : target + frag;
  }
}

/** `ref` resolved against `base`, without its fragment; undefined if either is not a URI. */
function absolute(ref: string, base: string): string | undefined {
  try {
    const u = new URL(ref, base);
    u.hash = '';
    return u.href;
  } catch {
    return undefined;
  }
}

/** A URI fragment as a JSON pointer ("" or "/…", percent-decoded); undefined for a plain-name anchor. */
function fragmentPointer(frag: string): string | undefined {
  let p: string;
  try {
    p = decodeURIComponent(frag);
  } catch {
    return undefined;
  }
  return p === '' || p.startsWith('/') ? p : undefined;
}

/** The value at a JSON pointer ("" = the root; segments ~0 / ~1 escaped); undefined where nothing is. */
export function valueAt(root: unknown, pointer: string): unknown {
  if (pointer === '') return root;
  if (!pointer.startsWith('/')) return undefined;
  let cur: unknown = root;
  for (const raw of pointer.slice(1).split('/')) {
    const seg = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (cur === null || typeof cur !== 'object' || !Object.hasOwn(cur, seg)) return undefined;
    cur = (cur as Record<string, unknown>)[seg];
  }
  return cur;
}

/** A definition at least this long (its JSON text, characters) is worth a rule when used twice. */
const SHARED_MIN_CHARS = 400;

/**
 * `$ref` targets (rule names, "#" + document pointer) referenced at least twice
 * whose definition is large: inlined, each use would copy its whole automaton
 * (real schemas reference one big definition from dozens of places), so the
 * native backend calls them as rules, like recursive ones. Counted over the
 * whole document, syntactically.
 */
export function sharedRefs(schema: unknown): Set<string> {
  const resources = new SchemaResources(schema);
  const uses = new Map<string, number>();
  for (const { site, ref } of refSites(schema)) {
    const target = resources.resolve(ref, site);
    if (target !== undefined) uses.set(target, (uses.get(target) ?? 0) + 1);
  }
  const out = new Set<string>();
  for (const [pointer, n] of uses) {
    if (n < 2 || pointer === '') continue;
    const target = valueAt(schema, pointer);
    if (target && typeof target === 'object' && JSON.stringify(target).length >= SHARED_MIN_CHARS) out.add(`#${pointer}`);
  }
  return out;
}

/** Every `$ref` string in a document, with the document pointer of the object holding it. */
export function refSites(v: unknown, at = '', out: Array<{ site: string; ref: string }> = []): Array<{ site: string; ref: string }> {
  if (Array.isArray(v)) v.forEach((x, i) => refSites(x, ptr(at, i), out));
  else if (v && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) {
      if (k === '$ref' && typeof x === 'string') out.push({ site: at, ref: x });
      else refSites(x, ptr(at, k), out);
    }
  }
  return out;
}
