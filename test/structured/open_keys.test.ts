/**
 * Keys of open objects: a key is any string, but a declared name's first
 * character leads to its own states (the name's value schema applies). The
 * native backend settles such a key like free text after its first character
 * and walks the tokens that start like a declared name on their own; tokens
 * that run past the key's closing quote into the value are where the two
 * differ. Every mask bit, over the whole vocabulary and along random
 * trajectories, must equal what replaying the token says.
 */
import { describe, expect, it } from 'vitest';
import { compileConstraint, type VocabLike } from '../../core/structured/index.ts';
import { allowed, fakeVocab, hasToken as has, liveAfter as live, rng } from './support.ts';

const enc = new TextEncoder();
const base = fakeVocab();
/** Tokens that cross from a key into its value, for declared and undeclared names alike. */
const extra = ['name":1', 'name":"', 'name":"x', 'nam', 'na":', 'n', 'x":1', 'x":"', 'xy":', 'ag":', 'age":"', 'age":7', 'a":{', 'é":1', ' n":', 'id":[', 'id":-'];
const vocab: VocabLike & { size: number } = {
  vocabSize: base.vocabSize + extra.length,
  size: base.vocabSize + extra.length,
  eosIds: base.eosIds,
  tokenBytes: (id) => (id < base.vocabSize ? base.tokenBytes(id) : enc.encode(extra[id - base.vocabSize]!)),
  isSpecial: (id) => id < base.vocabSize && base.isSpecial(id),
};
const text = (t: number): string => new TextDecoder().decode(vocab.tokenBytes(t));

const SCHEMAS: Record<string, unknown> = {
  'declared string, extra integers': { type: 'object', properties: { name: { type: 'string' } }, additionalProperties: { type: 'integer' } },
  'several declared, any extra': { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' }, id: { type: 'array', items: { type: 'integer' } } } },
  'nested open objects': { type: 'object', properties: { a: { type: 'object', properties: { n: { type: 'boolean' } } }, x: { type: 'null' } } },
};

describe('open-object keys: masks agree with the automaton for every token', () => {
  it.each(Object.keys(SCHEMAS))('%s', (name) => {
    const c = compileConstraint({ kind: 'json_schema', schema: SCHEMAS[name] }, vocab, { uncached: true });
    const rand = rng(11);
    let checked = 0;
    let keyStates = 0;
    for (let run = 0; run < 6; run++) {
      const st = c.start();
      const path: number[] = [];
      for (let step = 0; step < 12; step++) {
        const m = st.mask();
        const before = path.map(text).join('');
        if (/[{,]"$/.test(before)) keyStates++;
        for (let t = 0; t < vocab.size; t++) {
          expect(has(m, t), `${JSON.stringify(before)} + ${JSON.stringify(text(t))}`).toBe(live(c, path, t));
          checked++;
        }
        const ok = allowed(m, vocab.size);
        if (!ok.length) break;
        // Toward keys: after '{' or ',' prefer a quote so key states are visited often.
        const quote = ok.find((t) => text(t) === '"');
        const t = quote !== undefined && /[{,]$/.test(before) && rand() < 0.8 ? quote : ok[Math.floor(rand() * ok.length)]!;
        st.advance(t);
        path.push(t);
        if (st.isComplete()) break;
      }
    }
    expect(keyStates).toBeGreaterThan(2);
    expect(checked).toBeGreaterThan(1000);
  });
});
