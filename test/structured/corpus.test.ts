/**
 * Schema corpus: every schema in schemas/*.json, both backends, several seeds.
 *
 * Decoding is simulated over the real stories260K vocabulary (512 tokens,
 * byte fallback) by sampling uniformly among the allowed tokens with a bias
 * toward EOS / closing tokens; each output must parse and validate with ajv +
 * ajv-formats (Ajv2020, or draft-07 when the schema says so). Files named
 * `rec-*` are recursive: the native backend must handle them, the outlines
 * backend must refuse them with `unsupported_schema_keyword` at the $ref.
 * Mask invariants (EOS only in accepting states, no empty mask before
 * acceptance, no specials) are checked at every step of every run.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Ajv from 'ajv';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../core/errors.ts';
import { BACKENDS, compileConstraint, type Backend } from '../../core/structured/index.ts';
import { rng, simulate, storiesVocab } from './support.ts';

const dir = fileURLToPath(new URL('./schemas/', import.meta.url));
const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
const SEEDS = [1, 2, 3, 4, 5];

const ajv2020 = new Ajv2020({ strict: false, allErrors: true });
const ajv07 = new Ajv({ strict: false, allErrors: true });
addFormats(ajv2020);
addFormats(ajv07);

const validators = new Map<string, (v: unknown) => string | null>();

function validator(file: string, schema: Record<string, unknown>): (v: unknown) => string | null {
  const hit = validators.get(file);
  if (hit) return hit;
  const ajv = typeof schema.$schema === 'string' && schema.$schema.includes('draft-07') ? ajv07 : ajv2020;
  const { $id: _id, ...rest } = schema;
  const v = ajv.compile(rest);
  const fn = (x: unknown): string | null => (v(x) ? null : ajv.errorsText(v.errors));
  validators.set(file, fn);
  return fn;
}

const stats = new Map<Backend, { schemas: number; refused: number; runs: number; valid: number; compileMs: number[] }>();

describe('schema corpus', () => {
  it('has at least 60 schemas including {} and recursive ones', () => {
    expect(files.length).toBeGreaterThanOrEqual(60);
    expect(files).toContain('empty.json');
    expect(files.filter((f) => f.startsWith('rec-')).length).toBeGreaterThanOrEqual(4);
  });

  for (const backend of BACKENDS) {
    describe(backend, () => {
      const st = { schemas: 0, refused: 0, runs: 0, valid: 0, compileMs: [] as number[] };
      stats.set(backend, st);
      for (const file of files) {
        it(file, () => {
          const schema = JSON.parse(readFileSync(dir + file, 'utf8')) as Record<string, unknown>;
          const vocab = storiesVocab();
          if (backend === 'outlines' && file.startsWith('rec-')) {
            let err: unknown;
            try {
              compileConstraint({ kind: 'json_schema', schema }, vocab, { backend });
            } catch (e) {
              err = e;
            }
            expect(err).toBeInstanceOf(InvalidRequestError);
            const e = err as InvalidRequestError;
            expect(e.code).toBe('unsupported_schema_keyword');
            expect(e.details).toMatchObject({ keyword: '$ref' });
            expect(e.message).toMatch(/recursive/);
            st.refused++;
            return;
          }
          const c = compileConstraint({ kind: 'json_schema', schema }, vocab, { backend });
          st.schemas++;
          st.compileMs.push(c.compileMs);
          const validate = validator(file, schema);
          for (const seed of SEEDS) {
            const r = simulate(c.start(), vocab, rng(seed * 7919 + file.length));
            st.runs++;
            expect(r.violations, `${file} seed ${seed}: ${r.text}`).toEqual([]);
            expect(r.reason, `${file} seed ${seed}: ${r.text}`).not.toBe('limit');
            let value: unknown;
            expect(() => (value = JSON.parse(r.text)), `${file} seed ${seed}: not JSON: ${r.text}`).not.toThrow();
            expect(validate(value), `${file} seed ${seed}: ${r.text}`).toBeNull();
            st.valid++;
          }
        });
      }
    });
  }

  afterAll(() => {
    for (const [backend, s] of stats) {
      const ms = [...s.compileMs].sort((a, b) => a - b);
      const pct = s.runs ? ((100 * s.valid) / s.runs).toFixed(1) : '-';
      console.log(
        `[structured corpus] ${backend}: ${s.schemas} schemas compiled, ${s.refused} refused (recursive), ` +
          `${s.valid}/${s.runs} outputs valid (${pct}%), compile ms median ${ms[ms.length >> 1]?.toFixed(1)} max ${ms[ms.length - 1]?.toFixed(1)}`,
      );
    }
  });
});
