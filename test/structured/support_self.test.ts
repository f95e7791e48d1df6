/** Sanity checks of the structured-output test helpers (support.ts). */
import { describe, expect, it } from 'vitest';
import { fakeVocab, storiesVocab } from './support.ts';

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
});
