/** Sanity checks of the structured-output test helpers (support.ts). */
import { describe, expect, it } from 'vitest';
import { fakeVocab, reformatJson, storiesVocab } from './support.ts';

describe('structured test support', () => {
  it('derives stories260K token bytes from tokenizer.json', () => {
    const v = storiesVocab();
    expect(v.vocabSize).toBe(512);
    expect(v.isSpecial(2)).toBe(true);
    expect([...v.tokenBytes(3 + 0x41)]).toEqual([0x41]); // <0x41>
    expect(new TextDecoder().decode(v.tokenBytes(265))).toBe(' the');
  });

  it('fake vocabulary has every single byte', () => {
    const v = fakeVocab();
    for (let b = 0; b < 256; b++) expect([...v.tokenBytes(3 + b)]).toEqual([b]);
  });

  it('reformatJson redoes whitespace outside strings only', () => {
    const v = { a: [1, { 'b, c': 'x: "y"' }], d: null, e: '\\' };
    expect(reformatJson(JSON.stringify(v, null, 2), 'none')).toBe(JSON.stringify(v));
    expect(reformatJson(JSON.stringify(v), 'compact')).toBe('{"a": [1, {"b, c": "x: \\"y\\""}], "d": null, "e": "\\\\"}');
    expect(reformatJson('{"a":1.50e+2}', 'none')).toBe('{"a":1.50e+2}'); // lexemes kept as written
    expect(reformatJson('{"a":1, "b":2}', 'compact')).not.toBe('{"a":1, "b":2}');
  });
});
