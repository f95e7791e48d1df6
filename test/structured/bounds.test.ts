/**
 * Bounded work per constraint: counts that the compiler unrolls (minItems,
 * maxItems, minLength, maxLength, regex {n,m}) are checked before expansion,
 * array unrolling is linear in the item count, and a compile that runs past
 * its time budget (or whose request was cancelled) stops with a typed error
 * instead of holding the thread.
 */
import { describe, expect, it } from 'vitest';
import { CancelledError, InvalidRequestError } from '../../core/errors.ts';
import { compileConstraint, type ConstraintSpec } from '../../core/structured/index.ts';
import { MAX_ITEMS_COUNT, MAX_LENGTH_COUNT } from '../../core/structured/keywords.ts';
import { MAX_REPEAT } from '../../core/structured/regex.ts';
import { fakeVocab, storiesVocab } from './support.ts';

const schema = (s: unknown): ConstraintSpec => ({ kind: 'json_schema', schema: s });

function refusal(spec: ConstraintSpec, budget?: { millis: number; signal?: AbortSignal }): { err: unknown; ms: number } {
  const t0 = performance.now();
  try {
    compileConstraint(spec, storiesVocab(), budget ? { budget } : {});
  } catch (err) {
    return { err, ms: performance.now() - t0 };
  }
  throw new Error(`expected ${JSON.stringify(spec).slice(0, 80)} to be refused`);
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

  it('bounds a regex of 100 Script_Extensions classes (the same regex compiles without a budget)', () => {
    const t0 = performance.now();
    compileConstraint({ kind: 'regex', pattern: classes(100, 1) }, storiesVocab());
    const unbounded = performance.now() - t0;
    const { err, ms } = refusal({ kind: 'regex', pattern: classes(100, 2) }, { millis: 10 });
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
