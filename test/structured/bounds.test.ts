/**
 * Bounded work per constraint: counts that the compiler unrolls (minItems,
 * maxItems, minLength, maxLength, regex {n,m}) are checked before expansion,
 * array unrolling is linear in the item count, and a compile that runs past
 * its time budget (or whose request was cancelled) stops with a typed error
 * instead of holding the thread.
 */
import { describe, expect, it } from 'vitest';
import { CancelledError, InvalidRequestError } from '../../core/errors.ts';
import { compileConstraint, type ConstraintSpec, type VocabLike } from '../../core/structured/index.ts';
import { MAX_ITEMS_COUNT, MAX_LENGTH_COUNT } from '../../core/structured/keywords.ts';
import { MAX_REPEAT } from '../../core/structured/regex.ts';
import { fakeVocab, rng, storiesVocab } from './support.ts';

const schema = (s: unknown): ConstraintSpec => ({ kind: 'json_schema', schema: s });

function refusal(spec: ConstraintSpec, budget?: { millis: number; signal?: AbortSignal }, vocab: VocabLike = storiesVocab()): { err: unknown; ms: number } {
  const t0 = performance.now();
  try {
    compileConstraint(spec, vocab, budget ? { budget } : {});
  } catch (err) {
    return { err, ms: performance.now() - t0 };
  }
  throw new Error(`expected ${JSON.stringify(spec).slice(0, 80)} to be refused`);
}

/** A large multilingual vocabulary (as real tokenizers have): `n` tokens of 1–3 letters from several scripts, plus EOS. */
function scriptVocab(n: number): VocabLike {
  const ranges: Array<[number, number]> = [[0x61, 0x7a], [0x430, 0x44f], [0x3b1, 0x3c9], [0x627, 0x64a], [0x4e00, 0x4fff], [0xac00, 0xad00], [0x905, 0x939], [0xe01, 0xe2e]];
  const rand = rng(7);
  const enc = new TextEncoder();
  const seen = new Set<string>();
  const tokens: Uint8Array[] = [new Uint8Array(0)];
  while (tokens.length < n) {
    const [lo, hi] = ranges[Math.floor(rand() * ranges.length)]!;
    let s = '';
    for (let k = 1 + Math.floor(rand() * 3); k > 0; k--) s += String.fromCodePoint(lo + Math.floor(rand() * (hi - lo + 1)));
    if (seen.has(s)) continue;
    seen.add(s);
    tokens.push(enc.encode(s));
  }
  return { vocabSize: n, eosIds: [0], tokenBytes: (id) => tokens[id]!, isSpecial: (id) => id === 0 };
}

const codeOf = (e: unknown): string => (e instanceof InvalidRequestError ? e.code : `not an InvalidRequestError: ${String(e)}`);

describe('counts are bounded before expansion', () => {
  it.each([
    ['minItems', { type: 'array', items: { type: 'integer' }, minItems: 100_000 }, '/minItems'],
    ['maxItems', { type: 'array', items: { type: 'integer' }, maxItems: 1_000_000 }, '/maxItems'],
    ['minLength', { type: 'string', minLength: 1e9 }, '/minLength'],
    ['maxLength', { type: 'object', properties: { s: { type: 'string', maxLength: 100_001 } } }, '/properties/s/maxLength'],
  ])('%s far above its bound is refused at once', (keyword, s, path) => {
    const { err, ms } = refusal(schema(s));
    expect(codeOf(err)).toBe('constraint_too_complex');
    expect((err as InvalidRequestError).details).toMatchObject({ path, keyword, limit: keyword.endsWith('Items') ? MAX_ITEMS_COUNT : MAX_LENGTH_COUNT });
    expect(ms).toBeLessThan(200); // nothing was unrolled
  });

  it('a regex repeat count above the bound is refused while parsing', () => {
    const { err, ms } = refusal({ kind: 'regex', pattern: `a{${MAX_REPEAT + 1}}` });
    expect(codeOf(err)).toBe('constraint_too_complex');
    expect(ms).toBeLessThan(200);
  });

  it('counts at the bound still compile and constrain exactly', () => {
    const c = compileConstraint(schema({ type: 'array', items: { type: 'integer' }, minItems: 3, maxItems: 3 }), fakeVocab());
    expect(c.start().accepted()).toBe(false);
    expect(() => compileConstraint(schema({ type: 'string', maxLength: MAX_LENGTH_COUNT / 10 }), fakeVocab())).not.toThrow();
  });

  it('unrolling required items is linear: 800 required items compile well within a second', () => {
    const t0 = performance.now();
    compileConstraint(schema({ type: 'array', items: { type: 'boolean' }, minItems: 800, maxItems: 800 }), fakeVocab());
    expect(performance.now() - t0).toBeLessThan(3000);
  });
});

describe('the compile budget', () => {
  // The shape of a costly regex seen in the wild: 100 Script_Extensions classes in a row.
  const scripts = ['Han', 'Arabic', 'Cyrillic', 'Latin', 'Greek', 'Devanagari', 'Hangul', 'Ethiopic', 'Thai', 'Hebrew'];
  const classes = (n: number, offset: number): string => Array.from({ length: n }, (_, i) => `\\p{Script_Extensions=${scripts[(i + offset) % scripts.length]}}`).join('');

  it('stops a compile past its time budget with constraint_too_complex', () => {
    const { err, ms } = refusal(schema({ type: 'array', items: { type: 'array', items: { type: 'string', maxLength: 900 }, maxItems: 900 }, maxItems: 900 }), { millis: 30 });
    expect(codeOf(err)).toBe('constraint_too_complex');
    expect(ms).toBeLessThan(500);
  });

  it('bounds a regex of 1000 Script_Extensions classes (the same regex compiles without a budget)', () => {
    // Each compile gets its own vocabulary, so no class work is shared between them. Their token
    // tries are built first, by a trivial compile: that is per-vocabulary work a server does once
    // (about 0.2 s for 40k tokens here), not the compile the budget bounds.
    const [cold1, cold2] = [scriptVocab(40_000), scriptVocab(40_000)];
    for (const v of [cold1, cold2]) compileConstraint({ kind: 'regex', pattern: 'a' }, v);
    const t0 = performance.now();
    compileConstraint({ kind: 'regex', pattern: classes(1000, 1) }, cold1);
    const unbounded = performance.now() - t0;
    const { err, ms } = refusal({ kind: 'regex', pattern: classes(1000, 2) }, { millis: 10 }, cold2);
    expect(codeOf(err)).toBe('constraint_too_complex');
    expect(ms).toBeLessThan(Math.max(100, unbounded / 2));
  });

  it('a cancelled request stops compiling with CancelledError', () => {
    const ac = new AbortController();
    ac.abort();
    const { err } = refusal(schema({ type: 'array', items: { type: 'string', maxLength: 5000 }, minItems: 50 }), { millis: 60_000, signal: ac.signal });
    expect(err).toBeInstanceOf(CancelledError);
  });

  it('a refused compile leaves nothing behind: the next request compiles normally', () => {
    const c = compileConstraint(schema({ type: 'object', properties: { a: { type: 'integer' } }, required: ['a'] }), storiesVocab(), { budget: { millis: 5000 } });
    expect(c.start().accepted()).toBe(false);
  });
});
