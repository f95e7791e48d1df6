/**
 * Structured-output coverage: the share of JSON Schema files that compile into
 * a constraint (are handled, not refused), per backend, with the refusals
 * grouped by error code and keyword. A file is a schema, or a keyword case
 * (`{schema, valid, invalid}` as in test/structured/cases). Compiled against
 * the bundled stories260K vocabulary with a 10 s budget per schema; compile
 * success says nothing about instances, which the keyword cases check.
 *
 *   npx tsx scripts/structured_coverage.ts DIR_OR_FILE...
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { WeftError } from '../core/errors.ts';
import { BACKENDS, compileConstraint } from '../core/structured/index.ts';
import { loadTokenizer } from '../core/tokenizer/tokenizer.ts';

function files(paths: string[]): string[] {
  return paths.flatMap((p) =>
    statSync(p).isDirectory() ? readdirSync(p).filter((f) => f.endsWith('.json')).sort().map((f) => join(p, f)) : [p]);
}

const args = process.argv.slice(2);
if (!args.length) {
  console.error('usage: npx tsx scripts/structured_coverage.ts DIR_OR_FILE...');
  process.exit(2);
}
const dir = 'models/stories260K';
const tok = loadTokenizer(JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')), JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')));
const list = files(args);
for (const backend of BACKENDS) {
  let ok = 0;
  const refused = new Map<string, string[]>();
  for (const f of list) {
    let schema: unknown;
    try {
      const raw = JSON.parse(readFileSync(f, 'utf8')) as Record<string, unknown>;
      schema = raw && typeof raw === 'object' && 'schema' in raw && 'valid' in raw ? raw.schema : raw;
    } catch {
      console.log(`skip ${f}: not JSON`);
      continue;
    }
    try {
      compileConstraint({ kind: 'json_schema', schema }, tok, { backend, budget: { millis: 10_000 } });
      ok++;
    } catch (e) {
      if (!(e instanceof WeftError)) throw e;
      const d = e.details as { keyword?: string } | undefined;
      const key = `${e.code} ${d?.keyword ?? ''}`.trim();
      refused.set(key, [...(refused.get(key) ?? []), f]);
    }
  }
  console.log(`${backend}: ${ok}/${list.length} schemas handled (${((100 * ok) / Math.max(1, list.length)).toFixed(1)}%)`);
  for (const [k, fs] of [...refused].sort((a, b) => b[1].length - a[1].length)) console.log(`  refused ${fs.length} × ${k}: ${fs.slice(0, 4).join(', ')}${fs.length > 4 ? ', …' : ''}`);
}
