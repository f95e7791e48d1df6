/**
 * Shared helpers for the structured-output tests, plus their own sanity tests.
 *
 * (This is a `.test.ts` file only because test/structured/ may hold nothing
 * else; importing it from another test file re-registers its few cheap tests
 * there, which is harmless.) Provides: the real stories260K vocabulary with
 * token bytes derived from its tokenizer.json (SentencePiece BPE with byte
 * fallback: ▁ → space, <0xNN> → that byte, added tokens special), a tiny fake
 * vocabulary with JSON-ish multi-character tokens, a seeded RNG, a whole-string
 * matcher for pattern ASTs, and a decoding simulator that samples uniformly among allowed tokens with a bias
 * toward EOS and closing tokens so outputs terminate.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Node } from '../../core/structured/ast.ts';
import { Dfa } from '../../core/structured/dfa.ts';
import type { CompiledConstraint, ConstraintState, VocabLike } from '../../core/structured/index.ts';
import { buildNfa, trim } from '../../core/structured/nfa.ts';

const enc = new TextEncoder();
const root = fileURLToPath(new URL('../../', import.meta.url));

export interface TestVocab extends VocabLike {
  readonly strings: readonly string[];
}

function vocabOf(tokens: ReadonlyArray<{ bytes: Uint8Array; special: boolean; text: string }>, eos: number[]): TestVocab {
  return {
    vocabSize: tokens.length,
    eosIds: eos,
    strings: tokens.map((t) => t.text),
    tokenBytes: (id) => tokens[id]!.bytes,
    isSpecial: (id) => tokens[id]!.special,
  };
}

let stories: TestVocab | null = null;

/** The 512-token stories260K vocabulary (EOS = </s> = 2). */
export function storiesVocab(): TestVocab {
  if (stories) return stories;
  const json = JSON.parse(readFileSync(`${root}models/stories260K/tokenizer.json`, 'utf8')) as {
    model: { vocab: Record<string, number> };
    added_tokens: Array<{ id: number; content: string; special: boolean }>;
  };
  const special = new Map(json.added_tokens.filter((t) => t.special).map((t) => [t.id, t.content]));
  const byId: Array<{ bytes: Uint8Array; special: boolean; text: string }> = [];
  for (const [tok, id] of Object.entries(json.model.vocab)) {
    const m = /^<0x([0-9A-F]{2})>$/.exec(tok);
    const bytes = special.has(id) ? enc.encode(tok) : m ? Uint8Array.of(parseInt(m[1]!, 16)) : enc.encode(tok.replace(/\u2581/g, ' '));
    byId[id] = { bytes, special: special.has(id), text: tok };
  }
  return (stories = vocabOf(byId, [2]));
}

/** A tiny vocabulary: specials, every byte, and JSON-flavoured multi-byte tokens. */
export function fakeVocab(): TestVocab {
  const toks: Array<{ bytes: Uint8Array; special: boolean; text: string }> = [
    { bytes: enc.encode('<eos>'), special: true, text: '<eos>' },
    { bytes: enc.encode('<bos>'), special: true, text: '<bos>' },
    { bytes: new Uint8Array(0), special: false, text: '' },
  ];
  for (let b = 0; b < 256; b++) toks.push({ bytes: Uint8Array.of(b), special: false, text: `<${b}>` });
  for (const s of ['{"', '":', '",', '"}', '"]', 'true', 'false', 'null', '  ', ', ', ': ', '12', '2024', '-0', '0.', '.5', 'name', 'age',
    'id', '"name":"', '"age":', '},', '}]', '}}', ']}', '[{', '[[', 'the', ' cat', 'é', '😀', '\\n', '\\"', '\\u00', 'abc', '":"', '1}', ',"']) {
    toks.push({ bytes: enc.encode(s), special: false, text: s });
  }
  return vocabOf(toks, [0]);
}

/** mulberry32: a small deterministic PRNG. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Whether token t's bit is set in a mask. */
export const hasToken = (m: Uint32Array, t: number): boolean => (m[t >>> 5]! & (1 << (t & 31))) !== 0;

/**
 * What replaying a trajectory plus token t says about t: live when the state after it accepts
 * or still allows some token (the reference a mask bit is checked against).
 */
export function liveAfter(c: CompiledConstraint, prefix: readonly number[], t: number): boolean {
  const st = c.start();
  for (const x of prefix) st.advance(x);
  st.advance(t);
  return st.accepted() || st.mask().some((w) => w !== 0);
}

export function allowed(mask: Uint32Array, V: number): number[] {
  const out: number[] = [];
  for (let w = 0; w < mask.length; w++) {
    let x = mask[w]!;
    while (x) {
      const b = 31 - Math.clz32(x & -x);
      const t = (w << 5) + b;
      if (t < V) out.push(t);
      x &= x - 1;
    }
  }
  return out;
}

const kindCache = new WeakMap<TestVocab, number[]>();

export interface RunResult {
  text: string;
  bytes: Uint8Array;
  steps: number;
  reason: 'complete' | 'eos' | 'limit' | 'empty_mask';
  /** Invariant violations seen along the way (EOS outside accepting states, empty masks...). */
  violations: string[];
}

/** Token kinds for the sampler's bias: 1 = closes something (and opens nothing), 2 = opens a container. */
function kindOf(text: string): number {
  if (/[{[]/.test(text)) return 2;
  return /[}\]"]/.test(text) ? 1 : 0;
}

/** Simulates decoding: uniform over allowed tokens, biased toward EOS and closers. */
export function simulate(state: ConstraintState, vocab: TestVocab, rand: () => number, maxSteps = 600): RunResult {
  const V = vocab.vocabSize;
  const out: number[] = [];
  const violations: string[] = [];
  const eos = new Set(vocab.eosIds);
  let kinds = kindCache.get(vocab);
  if (!kinds) {
    kinds = vocab.strings.map((_, t) => (eos.has(t) ? 0 : kindOf(new TextDecoder().decode(vocab.tokenBytes(t)))));
    kindCache.set(vocab, kinds);
  }
  const kind = kinds;
  for (let step = 0; step < maxSteps; step++) {
    const ids = allowed(state.mask(), V);
    const acc = state.accepted();
    const eosAllowed = ids.filter((t) => eos.has(t));
    if (eosAllowed.length && !acc) violations.push(`EOS allowed in a non-accepting state at step ${step}`);
    if (acc && !eosAllowed.length) violations.push(`EOS not allowed in an accepting state at step ${step}`);
    if (ids.some((t) => vocab.isSpecial(t) && !eos.has(t))) violations.push(`special token allowed at step ${step}`);
    if (ids.length === 0) {
      if (!acc) violations.push(`empty mask in a non-accepting state at step ${step}`);
      return finish('empty_mask', step);
    }
    const urgency = Math.min(0.95, 0.35 + step / 200);
    let t: number;
    const closers = ids.filter((x) => kind[x] === 1);
    const flat = ids.filter((x) => kind[x] !== 2);
    if (eosAllowed.length && rand() < urgency) t = eosAllowed[0]!;
    else if (closers.length && rand() < urgency) t = closers[Math.floor(rand() * closers.length)]!;
    else if (flat.length && rand() < urgency) t = flat[Math.floor(rand() * flat.length)]!;
    else t = ids[Math.floor(rand() * ids.length)]!;
    state.advance(t);
    if (eos.has(t)) return finish('eos', step + 1);
    out.push(t);
    if (state.isComplete()) return finish('complete', step + 1);
  }
  return finish('limit', maxSteps);

  function finish(reason: RunResult['reason'], steps: number): RunResult {
    const parts = out.map((t) => vocab.tokenBytes(t));
    const bytes = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let o = 0;
    for (const p of parts) bytes.set(p, (o += p.length) - p.length);
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      violations.push('output is not valid UTF-8');
      text = new TextDecoder().decode(bytes);
    }
    return { text, bytes, steps, reason, violations };
  }
}

/**
 * JSON text with its insignificant whitespace redone in `mode` — lexemes
 * (strings, numbers, literals) kept byte for byte, whitespace outside strings
 * dropped, then `, ` / `: ` ('compact') or `,` / `:` ('none') as separators.
 * An output is exactly in `mode` iff reformatJson(text, mode) === text.
 */
export function reformatJson(text: string, mode: 'none' | 'compact'): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j;
    } else if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
    } else {
      out += c;
      if (mode === 'compact' && (c === ',' || c === ':')) out += ' ';
    }
  }
  return out;
}

/** Lengths of the runs of whitespace outside strings in a JSON text. */
export function whitespaceRuns(text: string): number[] {
  const out: number[] = [];
  let run = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      run++;
      continue;
    }
    if (run) out.push(run), (run = 0);
    if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      i = j;
    }
  }
  if (run) out.push(run);
  return out;
}

/** Every string of at most `maxLen` characters drawn from `alphabet` (the empty one first). */
export function allStrings(alphabet: readonly string[], maxLen: number): string[] {
  let level = [''];
  const out = [''];
  for (let n = 0; n < maxLen; n++) {
    level = level.flatMap((s) => alphabet.map((c) => s + c));
    out.push(...level);
  }
  return out;
}

/** Whether the call-free pattern `node` matches a whole string (its UTF-8 bytes through the DFA). */
export function nodeMatcher(node: Node): (s: string) => boolean {
  const nfa = buildNfa(node, null);
  trim(nfa, () => false);
  const d = new Dfa(nfa);
  return (s) => {
    let x = d.start;
    for (const b of enc.encode(s)) {
      x = d.stepAll(x)[b]!;
      if (x < 0) return false;
    }
    return d.accepting(x);
  };
}
