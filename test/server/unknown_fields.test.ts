import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { keysAt, suggestField, unknownFieldError } from '../../server/http/unknown_fields.ts';
import { GenerateBody } from '../../server/http/schemas.ts';
import { PredictBody } from '../../server/apps/vertex.ts';

describe('unknown request fields', () => {
  const gen = keysAt(GenerateBody, []);

  it('collects the known keys at a path, through optional, arrays and unions', () => {
    expect(gen.has('regex_string')).toBe(true);
    expect(gen.has('text')).toBe(true);
    // Vertex: instances are a string or an object with the generation fields; parameters is optional.
    expect(keysAt(PredictBody, ['instances', 0]).has('sampling_temperature')).toBe(true);
    expect(keysAt(PredictBody, ['instances', 0]).has('text')).toBe(true);
    expect(keysAt(PredictBody, ['parameters']).has('text')).toBe(false);
    expect(keysAt(PredictBody, ['parameters']).has('seed')).toBe(true);
    expect(keysAt(PredictBody, ['nope']).size).toBe(0);
    expect(keysAt(z.string(), []).size).toBe(0);
  });

  it("suggests other APIs' names and near misses, and nothing for unrelated names", () => {
    expect(suggestField('regex', gen)).toBe('regex_string');
    expect(suggestField('temperature', gen)).toBe('sampling_temperature');
    expect(suggestField('top_p', gen)).toBe('sampling_topp');
    expect(suggestField('max_tokens', gen)).toBe('max_new_tokens');
    expect(suggestField('inputs', gen)).toBe('text');
    expect(suggestField('Seed', gen)).toBe('seed');
    expect(suggestField('max_new_tokns', gen)).toBe('max_new_tokens');
    expect(suggestField('sampling_temprature', gen)).toBe('sampling_temperature');
    expect(suggestField('colour', gen)).toBeNull();
    // Short names need an edit distance under half their length: "tex" is "text", "xy" is nothing.
    expect(suggestField('tex', gen)).toBe('text');
    expect(suggestField('xy', gen)).toBeNull();
    // An alias whose target the schema does not have is not suggested.
    expect(suggestField('regex', new Set(['text']))).toBeNull();
    // Names of Object.prototype members are plain unknown names.
    expect(suggestField('constructor', gen)).toBeNull();
    expect(suggestField('__proto__', gen)).toBeNull();
    expect(suggestField('toString', gen)).toBeNull();
  });

  it('reports nested unknown fields with their path', () => {
    const r = PredictBody.safeParse({ instances: ['a', { text: 'b', temp: 1 }], parameters: { max_tokens: 3 } });
    expect(r.success).toBe(false);
    const issue = r.error!.issues.find((i) => i.code === 'unrecognized_keys')!;
    const e = unknownFieldError(PredictBody, issue.path, (issue as { keys: string[] }).keys);
    expect(e.code).toBe('unknown_field');
    expect(e.details).toEqual({ field: 'instances.1.temp', fields: ['instances.1.temp'] });
    // A key named like an Object.prototype member, parsed from JSON as an own property.
    const proto = GenerateBody.safeParse(JSON.parse('{"text": "a", "__proto__": 1, "constructor": 2}'));
    const pi = proto.error!.issues.find((i) => i.code === 'unrecognized_keys')!;
    expect(unknownFieldError(GenerateBody, pi.path, (pi as { keys: string[] }).keys).details).toEqual({ field: '__proto__', fields: ['__proto__', 'constructor'] });
    expect(keysAt(PredictBody, ['constructor']).size).toBe(0);
    const p = unknownFieldError(PredictBody, ['parameters'], ['max_tokens']);
    expect(p.message).toBe('unknown field "parameters.max_tokens" (did you mean "parameters.max_new_tokens"?)');
  });
});
