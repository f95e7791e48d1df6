/**
 * Mask invariants and behaviour that the corpus alone does not pin down:
 * compile-cache identity, EOS only in accepting states, `isComplete()` firing
 * as soon as nothing can follow, whitespace modes, dead state on a disallowed
 * token, the fake vocabulary's multi-character tokens (`"}`, `}]`, `},` ...)
 * crossing value boundaries (exercises the native backend's "uncertain"
 * tokens under recursion), and a differential check that both backends
 * compute identical masks wherever their languages coincide.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { BACKENDS, compileConstraint, type ConstraintSpec, type ConstraintState } from '../../core/structured/index.ts';
import { allowed, fakeVocab, rng, simulate, storiesVocab, type TestVocab } from './support.ts';

const dir = fileURLToPath(new URL('./schemas/', import.meta.url));
const files = readdirSync(dir).filter((f) => f.endsWith('.json') && !f.startsWith('draft07')).sort();
const load = (f: string): unknown => JSON.parse(readFileSync(dir + f, 'utf8'));
const ajv = new Ajv2020({ strict: false });
addFormats(ajv);
const validators = new Map<string, ReturnType<typeof ajv.compile>>();

/** Feeds `text` one byte token at a time (fake vocabulary: byte b is token 3 + b); false if refused. */
function feed(st: ConstraintState, text: string): boolean {
  for (const b of new TextEncoder().encode(text)) {
    const t = 3 + b;
    if (!(st.mask()[t >>> 5]! & (1 << (t & 31)))) return false;
    st.advance(t);
  }
  return true;
}

const eosAllowed = (st: ConstraintState, v: TestVocab): boolean => allowed(st.mask(), v.vocabSize).includes(v.eosIds[0]!);

describe('compile cache', () => {
  const v = fakeVocab();
  const s = { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'string' } }, required: ['a'] };

  it('returns the same compiled object for the same (vocab, backend, spec)', () => {
    const a = compileConstraint({ kind: 'json_schema', schema: s }, v);
    expect(compileConstraint({ kind: 'json_schema', schema: structuredClone(s) }, v)).toBe(a);
    // keyword order is not significant...
    const reordered = { required: ['a'], properties: s.properties, type: 'object' };
    expect(compileConstraint({ kind: 'json_schema', schema: reordered }, v)).toBe(a);
    expect(compileConstraint({ kind: 'json_schema', schema: s }, v, { backend: 'native', whitespace: 'none' })).toBe(a);
  });

  it('distinguishes property order, backend, whitespace and vocabulary', () => {
    const a = compileConstraint({ kind: 'json_schema', schema: s }, v);
    const swapped = { ...s, properties: { b: s.properties.b, a: s.properties.a } };
    expect(compileConstraint({ kind: 'json_schema', schema: swapped }, v)).not.toBe(a);
    expect(compileConstraint({ kind: 'json_schema', schema: s }, v, { backend: 'outlines' })).not.toBe(a);
    const compact = compileConstraint({ kind: 'json_schema', schema: s }, v, { whitespace: 'compact' });
    expect(compact).not.toBe(a);
    expect(compileConstraint({ kind: 'json_schema', schema: structuredClone(s) }, v, { whitespace: 'compact' })).toBe(compact);
    // the modes really compile differently: each refuses the other's separator
    expect(feed(a.start(), '{"a": 1')).toBe(false);
    expect(feed(compact.start(), '{"a":1')).toBe(false);
    expect(() => compileConstraint({ kind: 'json_schema', schema: s }, v, { whitespace: 'pretty' as never })).toThrow(
      expect.objectContaining({ code: 'invalid_json_whitespace', details: expect.objectContaining({ field: 'json_whitespace' }) }),
    );
    expect(compileConstraint({ kind: 'json_schema', schema: s }, fakeVocab())).not.toBe(a); // a new vocabulary object
  });

  it('start() gives independent states', () => {
    const c = compileConstraint({ kind: 'regex', pattern: 'ab|cd' }, v);
    const x = c.start();
    const y = c.start();
    expect(feed(x, 'a')).toBe(true);
    expect(feed(y, 'c')).toBe(true);
    expect(feed(x, 'b') && x.isComplete()).toBe(true);
    expect(y.isComplete()).toBe(false);
  });
});

for (const backend of BACKENDS) {
  describe(`${backend}: decoding behaviour`, () => {
    const v = fakeVocab();
    const obj = { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'array', items: { type: 'boolean' } } }, required: ['a'] };
    const spec: ConstraintSpec = { kind: 'json_schema', schema: obj };

    it('isComplete() fires right after the closing brace; EOS only when accepting', () => {
      const st = compileConstraint(spec, v, { backend }).start();
      expect(eosAllowed(st, v)).toBe(false);
      expect(feed(st, '{"a":12')).toBe(true);
      expect(st.accepted()).toBe(false);
      expect(eosAllowed(st, v)).toBe(false);
      expect(feed(st, '}')).toBe(true);
      expect(st.accepted()).toBe(true);
      expect(st.isComplete()).toBe(true);
      expect(allowed(st.mask(), v.vocabSize)).toEqual([0]); // only EOS
      st.advance(0);
      expect(st.isComplete()).toBe(true);
    });

    it('a top-level number accepts but is not complete (more digits may follow)', () => {
      const st = compileConstraint({ kind: 'json_schema', schema: { type: 'integer', maximum: 500 } }, v, { backend }).start();
      expect(feed(st, '42')).toBe(true);
      expect(st.accepted()).toBe(true);
      expect(st.isComplete()).toBe(false);
      expect(eosAllowed(st, v)).toBe(true);
      expect(feed(st, '9')).toBe(true); // 429 ≤ 500
      expect(feed(st, '0')).toBe(false); // 4290 > 500
      expect(st.accepted()).toBe(true);
    });

    it("whitespace 'none' allows no optional spaces; 'compact' exactly one after every ':' and ','", () => {
      const none = compileConstraint(spec, v, { backend }).start();
      expect(feed(none, '{"a": 1}')).toBe(false);
      const compact = (): ConstraintState => compileConstraint(spec, v, { backend, whitespace: 'compact' }).start();
      const st = compact();
      expect(feed(st, '{"a": 1, "b": [true, false]}')).toBe(true);
      expect(st.isComplete()).toBe(true);
      expect(feed(compact(), '{"a":')).toBe(true);
      expect(feed(compact(), '{"a":1')).toBe(false); // the space is required, not optional
      expect(feed(compact(), '{"a": 1,"b"')).toBe(false);
      expect(feed(compact(), '{"a":  1}')).toBe(false);
      expect(feed(compact(), '{ "a": 1}')).toBe(false);
      expect(feed(compact(), '{"a": 1 }')).toBe(false);
      // nested any-value ({} inside a property) and enum literals follow the same mode
      const nested = { type: 'object', properties: { x: {}, e: { enum: [{ k: [1, 2] }] } }, required: ['x', 'e'] };
      const n = compileConstraint({ kind: 'json_schema', schema: nested }, v, { backend, whitespace: 'compact' });
      const nst = n.start();
      expect(feed(nst, '{"x": {"p": [null, "q"]}, "e": {"k": [1, 2]}}') && nst.isComplete()).toBe(true);
      expect(feed(n.start(), '{"x": {"p":n')).toBe(false);
      expect(feed(n.start(), '{"x": 1, "e": {"k":[')).toBe(false);
    });

    it("json_object honours 'compact'; a regex takes no whitespace mode", () => {
      const st = compileConstraint({ kind: 'json_object' }, v, { backend, whitespace: 'compact' }).start();
      expect(feed(st, '{"k": [1, {"m": true}]}') && st.isComplete()).toBe(true);
      expect(() => compileConstraint({ kind: 'regex', pattern: 'a' }, v, { backend, whitespace: 'compact' })).toThrow(
        expect.objectContaining({ code: 'conflicting_constraints' }),
      );
      expect(compileConstraint({ kind: 'regex', pattern: 'a' }, v, { backend, whitespace: 'none' }).backend).toBe(backend);
    });

    it('follows schema property order; optional ones may be skipped', () => {
      const s = { type: 'object', properties: { x: { type: 'null' }, y: { type: 'null' }, z: { type: 'null' } }, required: ['z'] };
      const c = compileConstraint({ kind: 'json_schema', schema: s }, v, { backend });
      expect(feed(c.start(), '{"x":null,"z":null}')).toBe(true);
      expect(feed(c.start(), '{"z":null,"x":null}')).toBe(false);
      expect(feed(c.start(), '{"x":null,"y":null}}')).toBe(false);
      const st = c.start();
      expect(feed(st, '{"y":null,"z":null}') && st.isComplete()).toBe(true);
    });

    it('a disallowed token leaves a dead state with an empty mask (no throw)', () => {
      const st = compileConstraint(spec, v, { backend }).start();
      st.advance(3 + 'x'.charCodeAt(0));
      expect(allowed(st.mask(), v.vocabSize)).toEqual([]);
      expect(st.isComplete()).toBe(false);
      expect(st.accepted()).toBe(false);
    });

    it('json_object means any JSON object', () => {
      const st = compileConstraint({ kind: 'json_object' }, v, { backend }).start();
      expect(feed(st, '{"k":[1,{"n":null}],"s":"\\u00e9"}')).toBe(true);
      expect(st.isComplete()).toBe(true);
      expect(feed(compileConstraint({ kind: 'json_object' }, v, { backend }).start(), '[1]')).toBe(false);
    });

    it('multi-character tokens crossing value boundaries: corpus over the fake vocabulary', () => {
      for (const f of files) {
        if (backend === 'outlines' && f.startsWith('rec-')) continue;
        const { $id: _id, ...schema } = load(f) as Record<string, unknown>;
        const c = compileConstraint({ kind: 'json_schema', schema }, v, { backend });
        const validate = validators.get(f) ?? ajv.compile(schema);
        validators.set(f, validate);
        for (const seed of backend === 'native' ? [11, 12] : [11]) {
          const r = simulate(c.start(), v, rng(seed + f.length));
          expect(r.violations, `${f}: ${r.text}`).toEqual([]);
          expect(r.reason, `${f}: ${r.text}`).not.toBe('limit');
          expect(validate(JSON.parse(r.text)), `${f}: ${r.text} ${ajv.errorsText(validate.errors)}`).toBe(true);
        }
      }
    });
  });
}

describe('native recursion', () => {
  const v = fakeVocab();
  const tree = load('rec-tree.json');

  it('accepts deep nesting (no depth limit) and closes several levels per token', () => {
    const st = compileConstraint({ kind: 'json_schema', schema: tree }, v).start();
    const open = '{"value":1,"children":[';
    for (let i = 0; i < 40; i++) expect(feed(st, open)).toBe(true);
    expect(feed(st, '{"value":2,"children":[]')).toBe(true);
    const closeTwo = v.strings.indexOf('}]');
    for (let i = 0; i < 40; i++) {
      expect(allowed(st.mask(), v.vocabSize)).toContain(closeTwo);
      st.advance(closeTwo);
    }
    expect(feed(st, '}')).toBe(true);
    expect(st.isComplete()).toBe(true);
  });

  it('masks at a given nesting depend on the context below (maxItems of the parent list)', () => {
    const st = compileConstraint({ kind: 'json_schema', schema: tree }, v).start();
    expect(feed(st, '{"value":1,"children":[{"value":2,"children":[]},{"value":3,"children":[]},{"value":4,"children":[]')).toBe(true);
    const ids = allowed(st.mask(), v.vocabSize);
    expect(ids).toContain(v.strings.indexOf('}]'));
    expect(ids).not.toContain(v.strings.indexOf('},')); // the parent list already holds 3 = maxItems
  });
});

describe('differential: native and outlines masks agree where their languages coincide', () => {
  // Schemas with "any value" parts differ on purpose (native: unbounded; outlines: depth-limited).
  const skip = new Set(['empty.json', 'json-object-bare-keys.json', 'array-any-items.json', 'additional-true.json', 'required-undeclared.json']);
  const v = storiesVocab();
  it('every step of a shared trajectory has identical masks', () => {
    let compared = 0;
    for (const f of files) {
      if (f.startsWith('rec-') || skip.has(f)) continue;
      const spec: ConstraintSpec = { kind: 'json_schema', schema: load(f) };
      const a = compileConstraint(spec, v, { backend: 'native' }).start();
      const b = compileConstraint(spec, v, { backend: 'outlines' }).start();
      const rand = rng(f.length);
      for (let step = 0; step < 40; step++) {
        const ma = allowed(a.mask(), v.vocabSize);
        expect(ma, `${f} step ${step}`).toEqual(allowed(b.mask(), v.vocabSize));
        expect(a.isComplete()).toBe(b.isComplete());
        compared++;
        const choices = ma.filter((t) => t !== 2);
        if (!choices.length || a.isComplete()) break;
        const t = choices[Math.floor(rand() * choices.length)]!;
        a.advance(t);
        b.advance(t);
      }
    }
    expect(compared).toBeGreaterThan(400);
  });
});
