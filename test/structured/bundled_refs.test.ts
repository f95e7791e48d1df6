/**
 * Compound (bundled) documents: `$ref`s resolve against the base URI of the
 * resource they stand in, as JSON Schema says, so a schema that embeds other
 * files under `$defs` with their `$id`s compiles like the files it bundles.
 * Outputs sampled over the stories260K vocabulary validate with ajv, which
 * resolves the same references; a reference to a document that is not
 * embedded is refused (nothing is fetched).
 */
import Ajv from 'ajv';
import Ajv2020 from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../core/errors.ts';
import { BACKENDS, compileConstraint } from '../../core/structured/index.ts';
import { SchemaResources } from '../../core/structured/resources.ts';
import { rng, simulate, storiesVocab } from './support.ts';

/** Root with its own `$defs/line` (an integer) and an embedded address.json whose `#/$defs/line` is a short string. */
const COMPOUND = {
  $id: 'https://example.com/schemas/root.json',
  type: 'object',
  properties: {
    home: { $ref: 'address.json' },
    work: { $ref: 'https://example.com/schemas/address.json' },
    code: { $ref: 'address.json#/$defs/line' },
    count: { $ref: '#/$defs/line' },
    tag: { $ref: 'nested/tag.json' },
  },
  required: ['home', 'count'],
  additionalProperties: false,
  $defs: {
    line: { type: 'integer', minimum: 0, maximum: 9 },
    address: {
      $id: 'address.json',
      type: 'object',
      properties: { street: { $ref: '#/$defs/line' }, zip: { type: 'integer', minimum: 1000, maximum: 9999 } },
      required: ['street'],
      additionalProperties: false,
      $defs: { line: { type: 'string', minLength: 1, maxLength: 5 } },
    },
    tag: { $id: 'nested/tag.json', enum: ['a', 'b'] },
  },
};

describe('bundled documents', () => {
  it('resolves by $id, relative to the resource a $ref stands in', () => {
    const r = new SchemaResources(COMPOUND);
    expect(r.compound).toBe(true);
    expect(r.resolve('address.json', '/properties/home')).toBe('/$defs/address');
    expect(r.resolve('#/$defs/line', '/$defs/address/properties/street')).toBe('/$defs/address/$defs/line');
    expect(r.resolve('#/$defs/line', '/properties/count')).toBe('/$defs/line');
    expect(r.resolve('address.json#/$defs/line', '/properties/code')).toBe('/$defs/address/$defs/line');
    expect(r.resolve('https://example.com/schemas/nested/tag.json', undefined)).toBe('/$defs/tag');
    // Where a relative reference stands matters, so without a position it does not resolve.
    expect(r.resolve('#/$defs/line', undefined)).toBeUndefined();
    expect(r.resolve('other.json', '/properties/home')).toBeUndefined();
  });

  it('resolves draft-04 ids, and not an "id" property name', () => {
    const r = new SchemaResources({
      id: 'http://example.com/a.json',
      properties: { id: { type: 'string' }, b: { $ref: 'b.json' } },
      definitions: { b: { id: 'b.json', type: 'integer' } },
    });
    expect(r.resolve('b.json', '/properties/b')).toBe('/definitions/b');
    expect(r.resolve('http://example.com/a.json#/properties/id', undefined)).toBe('/properties/id');
  });

  it.each(BACKENDS)('%s: outputs validate with ajv', (backend) => {
    const vocab = storiesVocab();
    const c = compileConstraint({ kind: 'json_schema', schema: COMPOUND }, vocab, { backend });
    const validate = new Ajv2020({ strict: false }).compile(COMPOUND);
    const rand = rng(11);
    let done = 0;
    for (let k = 0; k < 12; k++) {
      const run = simulate(c.start(), vocab, rand);
      expect(run.violations).toEqual([]);
      if (run.reason !== 'complete' && run.reason !== 'eos') continue;
      const v = JSON.parse(run.text) as { home: { street: unknown }; count: unknown };
      expect(validate(v), run.text).toBe(true);
      expect(typeof v.home.street).toBe('string');
      expect(typeof v.count).toBe('number');
      done++;
    }
    expect(done).toBeGreaterThan(6);
  });

  it('a draft-07 bundle validates the same way', () => {
    const schema = { $schema: 'http://json-schema.org/draft-07/schema#', $id: 'https://x.org/r.json', type: 'array', items: { $ref: 'item.json' }, maxItems: 3, definitions: { item: { $id: 'item.json', type: 'string', maxLength: 3 } } };
    const vocab = storiesVocab();
    const c = compileConstraint({ kind: 'json_schema', schema }, vocab);
    const validate = new Ajv({ strict: false }).compile(schema);
    const rand = rng(3);
    for (let k = 0; k < 6; k++) {
      const run = simulate(c.start(), vocab, rand);
      if (run.reason === 'complete' || run.reason === 'eos') expect(validate(JSON.parse(run.text)), run.text).toBe(true);
    }
  });

  it('refuses a reference to a document that is not embedded', () => {
    const schema = { $id: 'https://example.com/r.json', properties: { a: { $ref: 'https://json.schemastore.org/other.json#/definitions/x' } } };
    let err: unknown;
    try {
      compileConstraint({ kind: 'json_schema', schema }, storiesVocab());
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidRequestError);
    expect((err as InvalidRequestError).code).toBe('unsupported_schema_keyword');
    expect((err as InvalidRequestError).message).toMatch(/bundle it/);
  });
});
