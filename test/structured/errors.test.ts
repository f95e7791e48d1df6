/**
 * Error contract: invalid schemas, unsupported keywords, invalid regexes and
 * unknown backends throw InvalidRequestError with the exact code and
 * `{ path (JSON pointer), keyword }` details — never an unconstrained run.
 * Also: non-constraining annotations are ignored, not refused.
 */
import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../core/errors.ts';
import { type Backend, compileConstraint, type ConstraintSpec, parseBackend } from '../../core/structured/index.ts';
import { fakeVocab } from './support.ts';

function errorOf(spec: ConstraintSpec, backend: Backend = 'native'): InvalidRequestError {
  try {
    compileConstraint(spec, fakeVocab(), { backend });
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidRequestError);
    return e as InvalidRequestError;
  }
  throw new Error(`expected ${JSON.stringify(spec)} to be refused`);
}

const schema = (s: unknown): ConstraintSpec => ({ kind: 'json_schema', schema: s });

const CASES: Array<[name: string, spec: ConstraintSpec, code: string, path: string, keyword: string, backend?: Backend]> = [
  ['bad type name', schema({ type: 'strin' }), 'invalid_schema', '/type', 'type'],
  ['negative minLength', schema({ properties: { a: { minLength: -1 } } }), 'invalid_schema', '/properties/a/minLength', 'minLength'],
  ['required not an array', schema({ type: 'object', required: 'a' }), 'invalid_schema', '/required', 'required'],
  ['minimum not a number', schema({ type: 'integer', minimum: '5' }), 'invalid_schema', '/minimum', 'minimum'],
  ['empty enum', schema({ enum: [] }), 'invalid_schema', '/enum', 'enum'],
  ['anyOf not an array', schema({ anyOf: {} }), 'invalid_schema', '/anyOf', 'anyOf'],
  ['subschema not a schema', schema({ properties: { a: 5 } }), 'invalid_schema', '/properties/a', 'properties'],
  ['schema not an object', schema(42), 'invalid_schema', '', 'json_schema'],
  ['missing $ref target', schema({ $ref: '#/$defs/missing' }), 'invalid_schema', '/$ref', '$ref'],
  ['unsatisfiable range', schema({ type: 'integer', minimum: 5, maximum: 3 }), 'invalid_schema', '', 'json_schema'],
  ['unsatisfiable allOf', schema({ allOf: [{ type: 'string' }, { type: 'integer' }] }), 'invalid_schema', '', 'json_schema'],
  ['recursion without a finite instance', schema({ type: 'object', properties: { child: { $ref: '#' } }, required: ['child'] }), 'invalid_schema', '', 'json_schema'],
  ['left recursion', schema({ $defs: { a: { anyOf: [{ $ref: '#/$defs/a' }, { type: 'null' }] } }, $ref: '#/$defs/a' }), 'invalid_schema', '/$defs/a', '$ref'],
  ['not', schema({ properties: { x: { not: { type: 'string' } } } }), 'unsupported_schema_keyword', '/properties/x/not', 'not'],
  ['unknown format', schema({ type: 'string', format: 'ipv6' }), 'unsupported_schema_keyword', '/format', 'format'],
  ['uniqueItems', schema({ type: 'object', properties: { tags: { type: 'array', uniqueItems: true } } }), 'unsupported_schema_keyword', '/properties/tags/uniqueItems', 'uniqueItems'],
  ['patternProperties', schema({ type: 'object', patternProperties: { '^x': {} } }), 'unsupported_schema_keyword', '/patternProperties', 'patternProperties'],
  ['multipleOf in items', schema({ type: 'array', items: { type: 'integer', multipleOf: 3 } }), 'unsupported_schema_keyword', '/items/multipleOf', 'multipleOf'],
  // biome-ignore lint/suspicious/noThenProperty: the JSON Schema keyword under test
  ['if/then', schema({ if: { type: 'string' }, then: { minLength: 2 } }), 'unsupported_schema_keyword', '/if', 'if'],
  ['remote $ref', schema({ $ref: 'https://example.com/s.json' }), 'unsupported_schema_keyword', '/$ref', '$ref'],
  ['overlapping oneOf', schema({ oneOf: [{ type: 'integer' }, { type: 'number' }] }), 'unsupported_schema_keyword', '/oneOf', 'oneOf'],
  ['undiscriminated object oneOf', schema({ oneOf: [{ type: 'object', properties: { a: { type: 'integer' } } }, { type: 'object', properties: { b: { type: 'string' } } }] }), 'unsupported_schema_keyword', '/oneOf', 'oneOf'],
  ['recursive $ref with siblings', schema({ type: 'object', properties: { n: { $ref: '#', minProperties: 0, required: ['x'] } } }), 'unsupported_schema_keyword', '/properties/n/$ref', '$ref'],
  ['recursion in outlines', schema({ type: 'object', properties: { children: { type: 'array', items: { $ref: '#' } } } }), 'unsupported_schema_keyword', '/properties/children/items/$ref', '$ref', 'outlines'],
  ['mutual recursion in outlines', schema({ $defs: { a: { type: 'array', items: { $ref: '#/$defs/b' } }, b: { anyOf: [{ $ref: '#/$defs/a' }, { type: 'null' }] } }, $ref: '#/$defs/a' }), 'unsupported_schema_keyword', '/$defs/b/anyOf/0/$ref', '$ref', 'outlines'],
  ['bad pattern', schema({ type: 'object', properties: { s: { type: 'string', pattern: '(ab' } } }), 'invalid_regex', '/properties/s/pattern', 'pattern'],
  ['lookahead in pattern', schema({ type: 'string', pattern: '(?=a)b' }), 'invalid_regex', '/pattern', 'pattern'],
  ['unbalanced regex', { kind: 'regex', pattern: 'a(b' }, 'invalid_regex', '', 'regex_string'],
  ['backreference', { kind: 'regex', pattern: '(a)\\1' }, 'invalid_regex', '', 'regex_string'],
  ['named backreference', { kind: 'regex', pattern: '(?<x>a)\\k<x>' }, 'invalid_regex', '', 'regex_string'],
  ['lookbehind', { kind: 'regex', pattern: '(?<!a)b' }, 'invalid_regex', '', 'regex_string'],
  ['word boundary', { kind: 'regex', pattern: '\\bword' }, 'invalid_regex', '', 'regex_string'],
  ['mid-pattern anchor', { kind: 'regex', pattern: 'a^b' }, 'invalid_regex', '', 'regex_string'],
  ['bad quantifier range', { kind: 'regex', pattern: 'a{3,2}' }, 'invalid_regex', '', 'regex_string'],
  ['nothing to repeat', { kind: 'regex', pattern: '*a' }, 'invalid_regex', '', 'regex_string'],
  ['bad class range', { kind: 'regex', pattern: '[z-a]' }, 'invalid_regex', '', 'regex_string'],
  ['unknown escape', { kind: 'regex', pattern: '\\q' }, 'invalid_regex', '', 'regex_string'],
  ['empty language', { kind: 'regex', pattern: '[^\\s\\S]' }, 'invalid_regex', '', 'regex_string'],
];

describe('constraint compilation errors', () => {
  for (const [name, spec, code, path, keyword, backend] of CASES) {
    it(`${name} → ${code} at "${path}"`, () => {
      const e = errorOf(spec, backend);
      expect(e.code).toBe(code);
      expect(e.details).toMatchObject({ path, keyword });
      expect(e.message.length).toBeGreaterThan(10);
    });
  }

  it('reports the position of regex errors', () => {
    const e = errorOf({ kind: 'regex', pattern: 'ab(?=c)' });
    expect(e.details).toMatchObject({ position: 4 });
  });

  it('ignores annotations and unknown non-vocabulary keywords', () => {
    const s = {
      $schema: 'https://json-schema.org/draft/2020-12/schema', $id: 'x', title: 't', description: 'd', examples: [1],
      default: 1, $comment: 'c', deprecated: false, readOnly: true, 'x-vendor': { anything: 1 }, type: 'integer',
    };
    expect(() => compileConstraint(schema(s), fakeVocab())).not.toThrow();
  });

  it('outlines refuses recursion with a message that says so', () => {
    const e = errorOf(schema({ type: 'object', properties: { next: { anyOf: [{ $ref: '#' }, { type: 'null' }] } } }), 'outlines');
    expect(e.message).toMatch(/recursive .*native backend/);
  });
});

describe('parseBackend', () => {
  it('accepts the valid names and defaults to native', () => {
    expect(parseBackend('native')).toBe('native');
    expect(parseBackend('outlines')).toBe('outlines');
    expect(parseBackend(undefined)).toBe('native');
  });

  it('refuses anything else, listing the valid names', () => {
    for (const bad of ['xgrammar', 'Native', 3, {}]) {
      let err: unknown;
      try {
        parseBackend(bad);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(InvalidRequestError);
      expect((err as InvalidRequestError).code).toBe('invalid_constrained_decoding_backend');
      expect((err as InvalidRequestError).details).toMatchObject({ valid: ['native', 'outlines'] });
      expect((err as Error).message).toMatch(/native, outlines/);
    }
  });

  it('compileConstraint validates the backend option too', () => {
    expect(() => compileConstraint({ kind: 'json_object' }, fakeVocab(), { backend: 'bogus' as Backend })).toThrow(/valid: native, outlines/);
  });
});
