/**
 * Complete within the budget: with a token budget, the native backend's mask
 * keeps a completion within the tokens left, so an output cut by
 * max_new_tokens still parses and validates. Driven without a model: every
 * corpus schema, several seeds, tokens drawn uniformly among the allowed ones
 * (temperature 1 over flat logits: the widest spread of states), for every
 * budget from the shortest completion the automaton guarantees upward; with
 * the stories260K vocabulary (every byte a token via byte fallback) and, for a
 * few schemas, the 128k Llama 3 vocabulary. Outputs validate with ajv.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Ajv from 'ajv';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { llama3Vocab } from '../../bench/byte_level_vocab.ts';
import { type CompileOptions, compileConstraint, type CompiledConstraint, type VocabLike } from '../../core/structured/index.ts';
import { allowed, rng, storiesVocab } from './support.ts';

const dir = fileURLToPath(new URL('./schemas/', import.meta.url));
const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();

function validatorFor(schema: Record<string, unknown>): (v: unknown) => string | null {
  const draft7 = typeof schema.$schema === 'string' && schema.$schema.includes('draft-07');
  const ajv = draft7 ? new Ajv({ strict: false }) : new Ajv2020({ strict: false });
  addFormats(ajv);
  const { $id: _id, ...rest } = schema;
  const v = ajv.compile(rest);
  return (x) => (v(x) ? null : ajv.errorsText(v.errors));
}

interface Run {
  text: string;
  tokens: number;
  forced: boolean;
  accepted: boolean;
}

/** Decodes under a budget of `n` tokens, as the engine does: budget(left) before every mask. */
function decode(c: CompiledConstraint, vocab: VocabLike, n: number, rand: () => number): Run {
  const st = c.start();
  const eos = new Set(vocab.eosIds);
  const bytes: number[] = [];
  let k = 0;
  for (; k < n; k++) {
    st.budget!(n - k);
    const ids = allowed(st.mask(), vocab.vocabSize);
    if (ids.length === 0) break;
    const t = ids[Math.floor(rand() * ids.length)]!;
    if (eos.has(t)) break;
    st.advance(t);
    bytes.push(...vocab.tokenBytes(t));
    if (st.isComplete()) {
      k++;
      break;
    }
  }
  return { text: new TextDecoder().decode(Uint8Array.from(bytes)), tokens: k, forced: st.forced!(), accepted: st.accepted() };
}

function check(file: string, vocab: VocabLike, seeds: number[], extra: number, opts: CompileOptions = {}): { runs: number; forced: number } {
  const schema = JSON.parse(readFileSync(dir + file, 'utf8')) as Record<string, unknown>;
  const validate = validatorFor(schema);
  const c = compileConstraint({ kind: 'json_schema', schema }, vocab, opts);
  const shortest = c.start().completion!();
  expect(shortest, `${file}: a completion through single-byte tokens`).toBeLessThan(1 << 30);
  let runs = 0;
  let forced = 0;
  for (const seed of seeds) {
    const rand = rng(seed * 7919 + shortest);
    for (let n = Math.max(1, shortest); n <= shortest + extra; n++) {
      const r = decode(c, vocab, n, rand);
      expect(r.tokens, `${file} seed ${seed} budget ${n}`).toBeLessThanOrEqual(n);
      expect(r.accepted, `${file} seed ${seed} budget ${n}: ${r.text}`).toBe(true);
      let value: unknown;
      expect(() => (value = JSON.parse(r.text)), `${file} seed ${seed} budget ${n}: ${r.text}`).not.toThrow();
      expect(validate(value), `${file} seed ${seed} budget ${n}: ${r.text}`).toBeNull();
      runs++;
      if (r.forced) forced++;
    }
  }
  return { runs, forced };
}

describe('complete within the budget (stories260K vocabulary)', () => {
  const vocab = storiesVocab();
  it.each(files)('%s: every output validates, for every budget from the shortest completion up', (file) => {
    const { runs } = check(file, vocab, [1, 2, 3], 12);
    expect(runs).toBe(3 * 13);
  });

  it('the budget is what closes values: across the corpus many runs were narrowed', () => {
    let forced = 0;
    for (const file of files.slice(0, 20)) forced += check(file, vocab, [4], 4).forced;
    expect(forced).toBeGreaterThan(10);
  });

  // Whitespace runs and OpenAI strict objects change the automaton the completion distance is computed on.
  it.each(files.slice(0, 24))('%s: flexible whitespace and strict objects close within the budget too', (file) => {
    expect(check(file, vocab, [5], 3, { whitespace: 'flexible:4' }).runs).toBe(4);
    expect(check(file, vocab, [6], 3, { strict: true }).runs).toBe(4);
  });
});

const llama = llama3Vocab();
describe.runIf(llama)('complete within the budget (Llama 3 vocabulary)', () => {
  it.each(['fn-send-email.json', 'additional-true.json', 'rec-mutual.json', 'string-lengths.json'])('%s', (file) => {
    const { runs } = check(file, llama!, [1], 2);
    expect(runs).toBe(3);
  });
});
