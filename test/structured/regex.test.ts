/**
 * Regex constraints (`regex_string`): a corpus of patterns decoded over the
 * real stories260K vocabulary with both backends; every output must fully
 * match `new RegExp('^(?:' + p + ')$', 'u')`. Also checks the UTF-8 handling
 * (a negated class accepts multi-byte characters, `.` excludes line
 * terminators) and that lazy quantifiers mean the same language as greedy.
 */
import { describe, expect, it } from 'vitest';
import { BACKENDS, compileConstraint } from '../../core/structured/index.ts';
import { fakeVocab, rng, simulate, storiesVocab } from './support.ts';

const PATTERNS: string[] = [
  String.raw`\(\d{3}\) \d{3}-\d{4}`,
  String.raw`\+\d{1,3}( \d{2,4}){2,4}`,
  String.raw`\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])`,
  String.raw`([01]\d|2[0-3]):[0-5]\d`,
  String.raw`[a-z0-9._%+-]{1,20}@[a-z0-9-]{1,15}\.(com|org|net|io)`,
  String.raw`[A-Za-z_$][A-Za-z0-9_$]{0,15}`,
  String.raw`[a-z]+(_[a-z]+){0,3}`,
  String.raw`(yes|no|maybe)`,
  String.raw`a{2,4}b{3}c{0,2}`,
  String.raw`#[0-9a-fA-F]{6}`,
  String.raw`((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)`,
  String.raw`[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`,
  String.raw`[α-ω]{3,6}`,
  String.raw`\p{Lu}\p{Ll}{2,5}`,
  String.raw`[\u4e00-\u9fff]{1,4}`,
  String.raw`"[^"]{0,10}"`,
  String.raw`.{5,10}`,
  String.raw`\w+\s\W\S`,
  String.raw`x+?y*?z??`,
  String.raw`(?:ab)+(?<tail>cd)?`,
  String.raw`\t\x41\u0042\u{1F600}[\-\]]`,
  String.raw`^abc$`,
  String.raw`(a(b|c)|d(e|f(g|h)))+`,
  String.raw`\$\d{1,3}(,\d{3})*(\.\d{2})?`,
  String.raw`https?://[a-z]+\.[a-z]{2,3}(/[a-z]*)?`,
  String.raw`[😀-🙏]{1,3}`,
  String.raw`[^a-z\d\s]{2,4}`,
  String.raw`(\d+|[A-Z]+)-\D`,
  String.raw`|empty-or-this`,
];

describe('regex corpus', () => {
  it(`has at least 20 patterns (${PATTERNS.length})`, () => {
    expect(PATTERNS.length).toBeGreaterThanOrEqual(20);
  });

  for (const backend of BACKENDS) {
    for (const p of PATTERNS) {
      it(`${backend}: /${p}/`, () => {
        const re = new RegExp(`^(?:${p})$`, 'u');
        const vocab = storiesVocab();
        const c = compileConstraint({ kind: 'regex', pattern: p }, vocab, { backend });
        for (const seed of [1, 2, 3, 4]) {
          const r = simulate(c.start(), vocab, rng(seed * 31 + p.length));
          expect(r.violations, `${p} seed ${seed}`).toEqual([]);
          expect(r.reason, `${p} seed ${seed}: ${r.text}`).not.toBe('limit');
          expect(re.test(r.text), `${p} seed ${seed}: ${JSON.stringify(r.text)}`).toBe(true);
        }
      });
    }
  }
});

function allowsText(pattern: string, text: string): boolean {
  const v = fakeVocab();
  const st = compileConstraint({ kind: 'regex', pattern }, v).start();
  for (const b of new TextEncoder().encode(text)) {
    const t = 3 + b; // single-byte tokens of the fake vocabulary
    const m = st.mask();
    if (!(m[t >>> 5]! & (1 << (t & 31)))) return false;
    st.advance(t);
  }
  return st.accepted();
}

describe('regex semantics over UTF-8', () => {
  it('a negated class accepts multi-byte characters', () => {
    expect(allowsText('[^"]+', 'é😀中')).toBe(true);
    expect(allowsText('[^"]+', 'a"b')).toBe(false);
  });

  it('dot excludes line terminators only', () => {
    expect(allowsText('.+', 'ab\u00e9\u2027')).toBe(true);
    expect(allowsText('.+', 'a\nb')).toBe(false);
    expect(allowsText('.+', 'a\u2028b')).toBe(false);
  });

  it('never allows invalid UTF-8 (lone continuation byte, surrogate encodings)', () => {
    const v = fakeVocab();
    const st = compileConstraint({ kind: 'regex', pattern: '.*' }, v).start();
    const m = st.mask();
    const has = (b: number): boolean => (m[(3 + b) >>> 5]! & (1 << ((3 + b) & 31))) !== 0;
    expect(has(0x80)).toBe(false);
    expect(has(0xc0)).toBe(false);
    expect(has(0xf5)).toBe(false);
    st.advance(3 + 0xed);
    const m2 = st.mask();
    expect((m2[(3 + 0xa0) >>> 5]! & (1 << ((3 + 0xa0) & 31))) !== 0).toBe(false); // ED A0.. = surrogates
  });

  it('lazy quantifiers accept the same strings as greedy ones', () => {
    for (const s of ['x', 'xxyyz', 'xyz']) expect(allowsText('x+?y*?z??', s)).toBe(allowsText('x+y*z?', s));
  });

  it('\\d \\w \\s are ASCII / JS-defined; \\p{...} uses Unicode tables', () => {
    expect(allowsText('\\d+', '٣')).toBe(false);
    expect(allowsText('\\w+', 'é')).toBe(false);
    expect(allowsText('\\s', '\u00a0')).toBe(true);
    expect(allowsText('\\p{L}+', 'éß中')).toBe(true);
  });
});
