/**
 * Soundness under random combinations of the keywords the compiler negates
 * or narrows (not, if/then/else, dependencies, overlapping oneOf,
 * patternProperties, propertyNames, min/maxProperties, contains, multipleOf,
 * uniqueItems): seeded random schemas built from small pieces, compiled on
 * both backends (a refusal is fine: it must be an unsupported_schema_keyword
 * or invalid_schema 400), then decoded by the simulator over the stories260K
 * vocabulary; every finished output must validate with ajv + ajv-formats.
 */
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../core/errors.ts';
import { BACKENDS, compileConstraint } from '../../core/structured/index.ts';
import { rng, simulate, storiesVocab } from './support.ts';

const ajv = new Ajv2020({ strict: false, logger: false });
addFormats(ajv);

type R = () => number;
const pick = <T>(r: R, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
const int = (r: R, lo: number, hi: number): number => lo + Math.floor(r() * (hi - lo + 1));

const KEYS = ['a', 'b', 'c', 'id'];

/** A small leaf value schema. */
function leaf(r: R): Record<string, unknown> {
  return pick(r, [
    () => ({ type: 'integer', minimum: int(r, -5, 0), maximum: int(r, 1, 30) }),
    () => ({ type: 'integer', multipleOf: int(r, 2, 7), minimum: -20, maximum: 40 }),
    () => ({ type: 'string', maxLength: int(r, 1, 4) }),
    () => ({ enum: ['x', 'y', 'z', 1, null] }),
    () => ({ type: 'boolean' }),
    () => ({ not: { type: pick(r, ['string', 'null', 'integer']) } }),
    () => ({ type: 'string', not: { enum: ['x', 'ab'] }, maxLength: 2 }),
    () => ({ type: 'number', not: { anyOf: [{ maximum: -1 }, { minimum: 1 }] } }),
  ])();
}

function objectSchema(r: R): Record<string, unknown> {
  const props: Record<string, unknown> = {};
  for (const k of KEYS) if (r() < 0.6) props[k] = leaf(r);
  const s: Record<string, unknown> = { type: 'object', properties: props };
  const names = Object.keys(props);
  if (names.length && r() < 0.5) s.required = [pick(r, names)];
  if (r() < 0.3) s.additionalProperties = pick(r, [false, { type: 'integer' }, true]);
  const extras: Array<() => void> = [
    () => (s.not = pick(r, [{ required: [pick(r, KEYS)] }, { properties: { [pick(r, KEYS)]: leaf(r) } }])),
    () => (s.dependentRequired = { [pick(r, KEYS)]: [pick(r, KEYS)] }),
    () => (s.dependentSchemas = { [pick(r, KEYS)]: { properties: { [pick(r, KEYS)]: leaf(r) } } }),
    () => {
      s.if = { properties: { [pick(r, KEYS)]: { const: pick(r, ['x', 1, true]) } } };
      // biome-ignore lint/suspicious/noThenProperty: the JSON Schema keyword under test
      s.then = { required: [pick(r, KEYS)] };
      if (r() < 0.5) s.else = { properties: { [pick(r, KEYS)]: leaf(r) } };
    },
    () => (s.patternProperties = { [pick(r, ['^x', '^[a-c]$', 'd$'])]: leaf(r) }),
    () => (s.propertyNames = pick(r, [{ maxLength: 1 }, { pattern: '^[a-z]+$' }, { not: { const: 'b' } }])),
    () => (s.minProperties = int(r, 0, 2)),
    () => (s.maxProperties = int(r, 0, 2)),
  ];
  for (let i = 0, n = int(r, 1, 3); i < n; i++) pick(r, extras)();
  return s;
}

function schemaOf(r: R): Record<string, unknown> {
  return pick(r, [
    () => objectSchema(r),
    () => ({ oneOf: [objectSchema(r), objectSchema(r)] }),
    () => ({ oneOf: [leaf(r), leaf(r), leaf(r)] }),
    () => ({ type: 'array', items: leaf(r), contains: leaf(r), maxItems: int(r, 1, 4) }),
    () => ({ type: 'array', items: { enum: ['p', 'q', 1, true] }, uniqueItems: true, minItems: int(r, 0, 1) }),
    () => ({ allOf: [objectSchema(r), { not: objectSchema(r) }] }),
    // biome-ignore lint/suspicious/noThenProperty: the JSON Schema keyword under test
    () => ({ type: 'object', properties: { v: leaf(r) }, required: ['v'], if: { properties: { v: leaf(r) } }, then: { properties: { w: leaf(r) }, required: ['w'] }, else: { maxProperties: 1 } }),
  ])();
}

describe('random keyword combinations', () => {
  for (const backend of BACKENDS) {
    it(`${backend}: every finished output validates`, () => {
      const vocab = storiesVocab();
      const r = rng(backend === 'native' ? 101 : 202);
      let compiled = 0;
      let outputs = 0;
      const failures: string[] = [];
      for (let i = 0; i < 60; i++) {
        const schema = schemaOf(r);
        let c;
        try {
          c = compileConstraint({ kind: 'json_schema', schema }, vocab, { backend });
        } catch (e) {
          expect(e, JSON.stringify(schema)).toBeInstanceOf(InvalidRequestError);
          expect(['unsupported_schema_keyword', 'invalid_schema', 'constraint_too_complex'], JSON.stringify(schema)).toContain((e as InvalidRequestError).code);
          if (process.env.FUZZ_LOG) console.log((e as Error).message);
          continue;
        }
        compiled++;
        const validate = ajv.compile(schema);
        for (const seed of [1, 2, 3]) {
          const out = simulate(c.start(), vocab, rng(seed * 7 + i), 300);
          if (out.violations.length) failures.push(`${JSON.stringify(schema)}: ${out.violations.join('; ')}`);
          if (out.reason === 'limit') continue;
          outputs++;
          let v: unknown;
          try {
            v = JSON.parse(out.text);
          } catch {
            failures.push(`${JSON.stringify(schema)}: not JSON: ${out.text}`);
            continue;
          }
          if (!validate(v)) failures.push(`${JSON.stringify(schema)}: ${out.text}: ${ajv.errorsText(validate.errors)}`);
        }
      }
      expect(failures).toEqual([]);
      // The check means something only if most schemas compile and most runs finish.
      expect(compiled).toBeGreaterThanOrEqual(30);
      expect(outputs).toBeGreaterThanOrEqual(compiled * 2);
    }, 300_000);
  }
});
