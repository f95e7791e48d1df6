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
  ['not of additionalProperties, nothing else left', schema({ type: 'object', not: { additionalProperties: false } }), 'unsupported_schema_keyword', '/not/additionalProperties', 'additionalProperties'],
  ['not of items', schema({ type: 'array', not: { items: { type: 'string' } } }), 'unsupported_schema_keyword', '/not/items', 'items'],
  ['not of a recursive $ref', schema({ type: 'object', properties: { c: { $ref: '#' } }, not: { $ref: '#' } }), 'unsupported_schema_keyword', '/not/$ref', '$ref'],
  ['unknown format', schema({ type: 'string', format: 'iso-time' }), 'unsupported_schema_keyword', '/format', 'format'],
  ['uniqueItems with minItems 2', schema({ type: 'object', properties: { tags: { type: 'array', uniqueItems: true, minItems: 2 } } }), 'unsupported_schema_keyword', '/properties/tags/uniqueItems', 'uniqueItems'],
  ['uniqueItems of strings with minItems 2', schema({ type: 'array', items: { type: 'string' }, uniqueItems: true, minItems: 2 }), 'unsupported_schema_keyword', '/uniqueItems', 'uniqueItems'],
  ['uniqueItems of enum items with minItems 2', schema({ type: 'array', items: { enum: ['a', 'b', 'c'] }, uniqueItems: true, minItems: 2 }), 'unsupported_schema_keyword', '/uniqueItems', 'uniqueItems'],
  ['patternProperties on both sides of allOf', schema({ allOf: [{ patternProperties: { '^x': {} } }, { patternProperties: { '^y': {} } }] }), 'unsupported_schema_keyword', '', 'patternProperties'],
  ['bad patternProperties regex', schema({ type: 'object', patternProperties: { '(x': {} } }), 'invalid_regex', '/patternProperties/(x', 'patternProperties'],
  ['fractional multipleOf', schema({ type: 'array', items: { type: 'number', multipleOf: 0.01 } }), 'unsupported_schema_keyword', '/items/multipleOf', 'multipleOf'],
  ['zero multipleOf', schema({ type: 'integer', multipleOf: 0 }), 'invalid_schema', '/multipleOf', 'multipleOf'],
  ['minContains 2', schema({ type: 'array', contains: { type: 'string' }, minContains: 2 }), 'unsupported_schema_keyword', '/minContains', 'minContains'],
  ['maxContains', schema({ type: 'array', contains: { type: 'string' }, maxContains: 2 }), 'unsupported_schema_keyword', '/maxContains', 'maxContains'],
  ['minProperties beyond the declared', schema({ type: 'object', properties: { a: {} }, minProperties: 3 }), 'unsupported_schema_keyword', '/minProperties', 'minProperties'],
  ['dependentRequired not arrays', schema({ type: 'object', dependentRequired: { a: 'b' } }), 'invalid_schema', '/dependentRequired/a', 'dependentRequired'],
  // biome-ignore lint/suspicious/noThenProperty: the JSON Schema keyword under test
  ['if whose negation is not expressible, nothing else left', schema({ type: 'array', if: { items: { type: 'string' } }, then: false }), 'unsupported_schema_keyword', '/if/items', 'items'],
  ['remote $ref', schema({ $ref: 'https://example.com/s.json' }), 'unsupported_schema_keyword', '/$ref', '$ref'],
  ['contains left empty by its narrowing', schema({ type: 'array', prefixItems: [{ type: 'string' }], contains: { type: 'integer' } }), 'unsupported_schema_keyword', '/contains', 'contains'],
  ['oneOf branches that cannot be negated', schema({ oneOf: [{ type: 'array' }, { type: 'array', items: { type: 'string' } }] }), 'unsupported_schema_keyword', '/oneOf/1/items', 'items'],
  ['recursive $ref intersected with itself', schema({ $defs: { a: { type: 'object', properties: { c: { $ref: '#/$defs/a' } }, allOf: [{ $ref: '#/$defs/a' }] } }, $ref: '#/$defs/a' }), 'unsupported_schema_keyword', '/$defs/a/allOf', '$ref'],
  ['recursion in outlines', schema({ type: 'object', properties: { children: { type: 'array', items: { $ref: '#' } } } }), 'unsupported_schema_keyword', '/properties/children/items/$ref', '$ref', 'outlines'],
  ['mutual recursion in outlines', schema({ $defs: { a: { type: 'array', items: { $ref: '#/$defs/b' } }, b: { anyOf: [{ $ref: '#/$defs/a' }, { type: 'null' }] } }, $ref: '#/$defs/a' }), 'unsupported_schema_keyword', '/$defs/b/anyOf/0/$ref', '$ref', 'outlines'],
  ['bad pattern', schema({ type: 'object', properties: { s: { type: 'string', pattern: '(ab' } } }), 'invalid_regex', '/properties/s/pattern', 'pattern'],
  ['lookahead in pattern', schema({ type: 'string', pattern: '(?=a)b' }), 'invalid_regex', '/pattern', 'pattern'],
  ['unbalanced regex', { kind: 'regex', pattern: 'a(b' }, 'invalid_regex', '', 'regex_string'],
  ['backreference', { kind: 'regex', pattern: '(a)\\1' }, 'invalid_regex', '', 'regex_string'],
  ['named backreference', { kind: 'regex', pattern: '(?<x>a)\\k<x>' }, 'invalid_regex', '', 'regex_string'],
  ['lookbehind', { kind: 'regex', pattern: '(?<!a)b' }, 'invalid_regex', '', 'regex_string'],
  ['word boundary under an unbounded repeat', { kind: 'regex', pattern: '(?:\\bw)+' }, 'invalid_regex', '', 'regex_string'],
  ['mid-pattern anchor', { kind: 'regex', pattern: 'a^b' }, 'invalid_regex', '', 'regex_string'],
  ['bad quantifier range', { kind: 'regex', pattern: 'a{3,2}' }, 'invalid_regex', '', 'regex_string'],
  ['regex nested too deeply', { kind: 'regex', pattern: `${'('.repeat(20000)}a${')'.repeat(20000)}` }, 'constraint_too_complex', '', 'regex_string'],
  ['excluded value too long', schema({ type: 'string', not: { const: 'y'.repeat(300) } }), 'constraint_too_complex', '', 'json_schema'],
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
