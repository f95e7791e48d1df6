/**
 * Import-cycle check for `core/` and `server/` (run in CI): builds the graph of relative
 * static imports that exist at run time (`import … from './x.ts'`, `export … from`,
 * side-effect imports; an import whose every name is `type` is erased by TypeScript and
 * cannot make a module see another half-initialised, so it is left out, as
 * `madge --ts-config` with skipTypeImports does) and prints every strongly connected
 * component of more than one file, or a file importing itself. Exits 1 when there is any.
 * Dynamic `import()` is left out on purpose: it is how a composition root breaks a
 * load-time dependency.
 *
 * It also enforces the layering rules (every import counts here, type-only and dynamic
 * ones too): `core/models` never imports `core/engine` (the engine runs models, not the
 * other way round; core/api/load_decoder.ts composes the two), `core/engine` never
 * imports the model loader `core/models/load.ts`, and no production file imports a CPU
 * reference (`*.ref.ts`: those are the specifications tests check kernels against;
 * only other references may build on them).
 *
 * Usage: `npx tsx scripts/check_cycles.ts [dir ...]` (default: core server).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/** Every relative import specifier: static, type-only, re-exports and dynamic `import()`. */
const ANY_IMPORT = /(?:(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\sfrom\s+)?|\bimport\(\s*)['"](\.{1,2}\/[^'"]+)['"]/g;

const IMPORT = /(?:^|\n)\s*(import|export)\s+(type\s+)?([^'";]*?\sfrom\s+)?['"](\.{1,2}\/[^'"]+)['"]/g;

/** True when an import/export clause brings in types only (`import type {…}`, `{ type A, type B }`). */
function typeOnly(typeKeyword: string | undefined, clause: string | undefined): boolean {
  if (typeKeyword) return true;
  if (!clause) return false; // side-effect import
  const braces = /^\s*\{([^}]*)\}\s*from\s*$/.exec(clause);
  if (!braces) return false; // default or namespace import: a value
  const names = braces[1]!.split(',').map((n) => n.trim()).filter((n) => n.length > 0);
  return names.length > 0 && names.every((n) => n.startsWith('type '));
}

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) sourceFiles(p, out);
    else if (/\.(ts|mts|js|mjs)$/.test(name) && !name.endsWith('.d.ts')) out.push(resolve(p));
  }
  return out;
}

/** Edges file -> imported files, restricted to the files scanned. */
export function importGraph(files: string[]): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const f of files) {
    const text = readFileSync(f, 'utf8');
    const deps: string[] = [];
    for (const m of text.matchAll(IMPORT)) {
      if (typeOnly(m[2], m[3])) continue;
      const target = resolve(dirname(f), m[4]!);
      if (known.has(target)) deps.push(target);
    }
    graph.set(f, deps);
  }
  return graph;
}

/** Tarjan's strongly connected components, iterative (deep import chains must not overflow the stack). */
export function cycles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const found: string[][] = [];
  for (const root of graph.keys()) {
    if (index.has(root)) continue;
    const work: Array<{ node: string; i: number }> = [{ node: root, i: 0 }];
    index.set(root, next);
    low.set(root, next++);
    stack.push(root);
    onStack.add(root);
    while (work.length > 0) {
      const top = work[work.length - 1]!;
      const deps = graph.get(top.node) ?? [];
      if (top.i < deps.length) {
        const d = deps[top.i++]!;
        if (!index.has(d)) {
          index.set(d, next);
          low.set(d, next++);
          stack.push(d);
          onStack.add(d);
          work.push({ node: d, i: 0 });
        } else if (onStack.has(d)) {
          low.set(top.node, Math.min(low.get(top.node)!, index.get(d)!));
        }
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1]!.node;
        low.set(parent, Math.min(low.get(parent)!, low.get(top.node)!));
      }
      if (low.get(top.node) === index.get(top.node)) {
        const scc: string[] = [];
        let n: string;
        do {
          n = stack.pop()!;
          onStack.delete(n);
          scc.push(n);
        } while (n !== top.node);
        if (scc.length > 1 || deps.includes(top.node)) found.push(scc.sort());
      }
    }
  }
  return found;
}

/** A layering rule: `from` files must not import `to` files (paths relative to `root`, '/' separators). */
export interface LayerRule {
  name: string;
  from: (path: string) => boolean;
  to: (path: string) => boolean;
}

export const LAYER_RULES: readonly LayerRule[] = [
  { name: 'core/models never imports core/engine', from: (f) => f.startsWith('core/models/'), to: (t) => t.startsWith('core/engine/') },
  { name: 'core/engine never imports the model loader', from: (f) => f.startsWith('core/engine/'), to: (t) => t === 'core/models/load.ts' },
  { name: 'production code never imports a CPU reference (*.ref.ts)', from: (f) => !f.endsWith('.ref.ts'), to: (t) => t.endsWith('.ref.ts') },
];

/** Imports that break a layering rule, as "file -> imported (rule)" lines. */
export function layerViolations(files: string[], root: string, rules: readonly LayerRule[] = LAYER_RULES): string[] {
  const rel = (p: string): string => relative(root, p).split('\\').join('/');
  const out: string[] = [];
  for (const f of files) {
    const text = readFileSync(f, 'utf8');
    const from = rel(f);
    for (const m of text.matchAll(ANY_IMPORT)) {
      const to = rel(resolve(dirname(f), m[1]!));
      for (const r of rules) if (r.from(from) && r.to(to)) out.push(`${from} -> ${to} (${r.name})`);
    }
  }
  return out;
}

const isMain = process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(new URL(import.meta.url).pathname);
if (isMain) {
  const dirs = process.argv.slice(2);
  const files = (dirs.length > 0 ? dirs : ['core', 'server']).flatMap((d) => sourceFiles(d));
  const found = cycles(importGraph(files));
  for (const scc of found) console.log(`import cycle (${scc.length} files):\n  ${scc.map((f) => relative(process.cwd(), f)).join('\n  ')}`);
  const broken = layerViolations(files, process.cwd());
  for (const b of broken) console.log(`layering: ${b}`);
  console.log(`${files.length} files, ${found.length} import cycle(s), ${broken.length} layering violation(s)`);
  process.exit(found.length > 0 || broken.length > 0 ? 1 : 0);
}
