/**
 * Tokenizer from GGUF metadata, by synthesizing the equivalent tokenizer.json.
 *
 * GGUF files carry the vocabulary in `tokenizer.ggml.*` keys instead of a
 * tokenizer.json. Rather than a second tokenizer implementation, we rebuild
 * the tokenizer.json that transformers' converters would produce and feed it
 * to `loadTokenizer`:
 *  - 'llama' (SentencePiece BPE): tokens + scores + token types. BPE merges
 *    are derived from the scores exactly like transformers' LlamaConverter
 *    (`SentencePieceExtractor`): every split of a piece into two vocabulary
 *    pieces is a merge, ranked by the piece's score (higher first, ties in id
 *    order; equal placeholder scores thus fall back to id order). When the
 *    file also stores `tokenizer.ggml.merges` (converted from a
 *    tokenizer.json) those exact merges are used instead. Byte tokens
 *    `<0xNN>` enable byte fallback; `add_space_prefix` selects the ▁-prepend
 *    normalizer and the leading-space Strip decoder.
 *  - 'gpt2' (byte-level BPE): tokens + merges; the pre-tokenizer regex comes
 *    from `tokenizer.ggml.pre` (llama.cpp's names).
 * Special ids, add_bos/add_eos and `tokenizer.chat_template[.name]` map onto
 * tokenizer_config fields. Input is the plain metadata record from the GGUF
 * parser; arrays may be JS arrays or typed arrays, integers may be bigints.
 */
import { ModelFormatError, UnsupportedModelError } from '../errors.ts';
import { loadTokenizer, type Tokenizer } from './tokenizer.ts';

/** llama.cpp `llama_token_type`. */
export const GGUF_TOKEN_TYPE = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 } as const;

const LLAMA3_SPLIT =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_SPLIT =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

interface PreTokenizerSpec {
  split: string | null; // null: GPT-2's built-in ByteLevel regex
  nfc: boolean;
  ignoreMerges: boolean;
}

/** `tokenizer.ggml.pre` values we can reproduce (llama.cpp names). */
const BYTE_LEVEL_PRE: Record<string, PreTokenizerSpec> = {
  default: { split: null, nfc: false, ignoreMerges: false },
  gpt2: { split: null, nfc: false, ignoreMerges: false },
  'gpt-2': { split: null, nfc: false, ignoreMerges: false },
  'llama-bpe': { split: LLAMA3_SPLIT, nfc: false, ignoreMerges: true },
  llama3: { split: LLAMA3_SPLIT, nfc: false, ignoreMerges: true },
  qwen2: { split: QWEN2_SPLIT, nfc: true, ignoreMerges: false },
  'deepseek-r1-qwen': { split: QWEN2_SPLIT, nfc: true, ignoreMerges: false },
};

type Json = Record<string, unknown>;

function arr(meta: Json, key: string, required: boolean): ArrayLike<unknown> | undefined {
  const v = meta[key];
  if (v === undefined || v === null) {
    if (required) throw new ModelFormatError(`GGUF metadata is missing ${key}`, { key });
    return undefined;
  }
  if (Array.isArray(v) || ArrayBuffer.isView(v)) return v as unknown as ArrayLike<unknown>;
  throw new ModelFormatError(`GGUF metadata ${key} must be an array`, { key });
}

function num(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  return undefined;
}

function bool(v: unknown, dflt: boolean): boolean {
  return typeof v === 'boolean' ? v : dflt;
}

export interface SynthesizedTokenizer {
  tokenizerJson: Json;
  tokenizerConfig: Json;
  chatTemplate: Record<string, string> | undefined;
  eosIds: number[];
  duplicateTokens: Map<number, string>;
}

/** Build the tokenizer.json / tokenizer_config.json equivalent of GGUF tokenizer metadata. */
export function ggufToTokenizerJson(meta: Record<string, unknown>): SynthesizedTokenizer {
  const kind = meta['tokenizer.ggml.model'];
  if (kind !== 'llama' && kind !== 'gpt2') {
    throw new UnsupportedModelError(`unsupported GGUF tokenizer model ${JSON.stringify(kind)}; supported: llama, gpt2`, {
      model: kind,
    });
  }
  const rawTokens = arr(meta, 'tokenizer.ggml.tokens', true)!;
  const tokens: string[] = Array.from(rawTokens, (t, i) => {
    if (typeof t !== 'string') throw new ModelFormatError(`tokenizer.ggml.tokens[${i}] is not a string`);
    return t;
  });
  const n = tokens.length;
  const typesRaw = arr(meta, 'tokenizer.ggml.token_type', false);
  const types = Array.from({ length: n }, (_, i) => (typesRaw ? num(typesRaw[i]) : undefined) ?? GGUF_TOKEN_TYPE.NORMAL);

  // First occurrence wins for duplicated strings (they cannot be told apart
  // when encoding); later ids stay decodable through `duplicateTokens`.
  const vocab: Record<string, number> = Object.create(null);
  const duplicateTokens = new Map<number, string>();
  for (let i = 0; i < n; i++) {
    const t = tokens[i] as string;
    if (t in vocab) duplicateTokens.set(i, t);
    else vocab[t] = i;
  }

  const idMeta = (key: string): number | null => {
    const v = num(meta[key]);
    return v !== undefined && v >= 0 && v < n ? v : null;
  };
  const bos = idMeta('tokenizer.ggml.bos_token_id');
  const eos = idMeta('tokenizer.ggml.eos_token_id');
  const unk = idMeta('tokenizer.ggml.unknown_token_id');
  const pad = idMeta('tokenizer.ggml.padding_token_id');
  const addBos = bool(meta['tokenizer.ggml.add_bos_token'], kind === 'llama') && bos !== null;
  const addEos = bool(meta['tokenizer.ggml.add_eos_token'], false) && eos !== null;

  const addedTokens: Json[] = [];
  for (let i = 0; i < n; i++) {
    const t = types[i];
    if (t === GGUF_TOKEN_TYPE.NORMAL || t === GGUF_TOKEN_TYPE.BYTE) continue;
    if (vocab[tokens[i] as string] !== i) continue;
    const special = t === GGUF_TOKEN_TYPE.CONTROL || t === GGUF_TOKEN_TYPE.UNKNOWN || i === bos || i === eos;
    addedTokens.push({ id: i, content: tokens[i], single_word: false, lstrip: false, rstrip: false, normalized: false, special });
  }

  const tokenAt = (id: number | null): string | null => (id === null ? null : (tokens[id] as string));
  const template = (a: string): Json[] => [
    ...(addBos ? [{ SpecialToken: { id: tokenAt(bos), type_id: 0 } }] : []),
    { Sequence: { id: a, type_id: 0 } },
    ...(addEos ? [{ SpecialToken: { id: tokenAt(eos), type_id: 0 } }] : []),
  ];
  const specialMap: Json = {};
  for (const id of [addBos ? bos : null, addEos ? eos : null]) {
    if (id !== null) specialMap[tokens[id] as string] = { id: tokens[id], ids: [id], tokens: [tokens[id]] };
  }
  const postProcessor =
    addBos || addEos ? { type: 'TemplateProcessing', single: template('A'), pair: [...template('A'), ...template('B')], special_tokens: specialMap } : null;

  let json: Json;
  if (kind === 'llama') {
    const scoresRaw = arr(meta, 'tokenizer.ggml.scores', true)!;
    const scores = Array.from({ length: n }, (_, i) => num(scoresRaw[i]) ?? 0);
    const addSpacePrefix = bool(meta['tokenizer.ggml.add_space_prefix'], true);
    const byteFallback = types.includes(GGUF_TOKEN_TYPE.BYTE);
    const replaceSpace = { type: 'Replace', pattern: { String: ' ' }, content: '\u2581' };
    json = {
      version: '1.0',
      added_tokens: addedTokens,
      normalizer: addSpacePrefix
        ? { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '\u2581' }, replaceSpace] }
        : replaceSpace,
      pre_tokenizer: null,
      post_processor: postProcessor,
      decoder: {
        type: 'Sequence',
        decoders: [
          { type: 'Replace', pattern: { String: '\u2581' }, content: ' ' },
          { type: 'ByteFallback' },
          { type: 'Fuse' },
          ...(addSpacePrefix ? [{ type: 'Strip', content: ' ', start: 1, stop: 0 }] : []),
        ],
      },
      model: {
        type: 'BPE',
        dropout: null,
        unk_token: tokenAt(unk),
        continuing_subword_prefix: null,
        end_of_word_suffix: null,
        fuse_unk: true,
        byte_fallback: byteFallback,
        ignore_merges: false,
        vocab,
        merges: storedSpmMerges(meta, vocab) ?? spmMerges(tokens, scores, types, vocab),
      },
    };
  } else {
    const merges = Array.from(arr(meta, 'tokenizer.ggml.merges', true)!, (m, i) => {
      if (typeof m !== 'string') throw new ModelFormatError(`tokenizer.ggml.merges[${i}] is not a string`);
      return m;
    });
    const preName = typeof meta['tokenizer.ggml.pre'] === 'string' ? (meta['tokenizer.ggml.pre'] as string) : 'default';
    const pre = BYTE_LEVEL_PRE[preName];
    if (!pre) {
      throw new UnsupportedModelError(`unsupported GGUF pre-tokenizer "${preName}"`, {
        pre: preName,
        valid: Object.keys(BYTE_LEVEL_PRE),
      });
    }
    const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: pre.split === null };
    json = {
      version: '1.0',
      added_tokens: addedTokens,
      normalizer: pre.nfc ? { type: 'NFC' } : null,
      pre_tokenizer:
        pre.split === null
          ? byteLevel
          : { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: pre.split }, behavior: 'Isolated', invert: false }, byteLevel] },
      post_processor: postProcessor,
      decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
      model: {
        type: 'BPE',
        dropout: null,
        unk_token: tokenAt(unk),
        continuing_subword_prefix: null,
        end_of_word_suffix: null,
        fuse_unk: false,
        byte_fallback: false,
        ignore_merges: pre.ignoreMerges,
        vocab,
        merges,
      },
    };
  }

  const tokenizerConfig: Json = {
    bos_token: tokenAt(bos),
    eos_token: tokenAt(eos),
    unk_token: tokenAt(unk),
    pad_token: tokenAt(pad),
    add_bos_token: addBos,
    add_eos_token: addEos,
    clean_up_tokenization_spaces: false,
  };
  const eosIds = ['tokenizer.ggml.eot_token_id', 'tokenizer.ggml.eom_token_id']
    .map(idMeta)
    .filter((x): x is number => x !== null);
  return { tokenizerJson: json, tokenizerConfig, chatTemplate: ggufChatTemplates(meta), eosIds, duplicateTokens };
}

/** `tokenizer.chat_template` is the default; `tokenizer.chat_template.<name>` are named ones. */
function ggufChatTemplates(meta: Json): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(meta)) {
    if (typeof v !== 'string') continue;
    if (k === 'tokenizer.chat_template') out.default = v;
    else if (k.startsWith('tokenizer.chat_template.')) out[k.slice('tokenizer.chat_template.'.length)] = v;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/** `tokenizer.ggml.merges` of a 'llama' file, if present and every entry is two vocabulary pieces. */
function storedSpmMerges(meta: Json, vocab: Readonly<Record<string, number>>): [string, string][] | null {
  const raw = arr(meta, 'tokenizer.ggml.merges', false);
  if (!raw || raw.length === 0) return null;
  const out: [string, string][] = [];
  for (let i = 0; i < raw.length; i++) {
    const m = raw[i];
    const parts = typeof m === 'string' ? m.split(' ') : [];
    if (parts.length !== 2 || vocab[parts[0] as string] === undefined || vocab[parts[1] as string] === undefined) return null;
    out.push(parts as [string, string]);
  }
  return out;
}

/**
 * Merges for a SentencePiece BPE vocabulary, as transformers'
 * `SentencePieceExtractor.extract(vocab_scores)`: for every piece, each split
 * into two vocabulary pieces (ordered by their ids), then all merges sorted
 * by the piece's score, highest first (stable). Like the converter (and
 * llama.cpp's SPM bigram lookup) every piece type takes part, so user-defined
 * pieces such as Gemma's '▁▁' runs are reachable; byte tokens never split.
 */
export function spmMerges(
  tokens: readonly string[],
  scores: readonly number[],
  types: readonly number[],
  vocab: Readonly<Record<string, number>>,
): [string, string][] {
  const left: string[] = [];
  const right: string[] = [];
  const score: number[] = [];
  const local: { l: string; r: string; li: number; ri: number }[] = [];
  for (let id = 0; id < tokens.length; id++) {
    const piece = tokens[id] as string;
    if (piece.length < 2 || types[id] === GGUF_TOKEN_TYPE.BYTE || vocab[piece] !== id) continue;
    local.length = 0;
    for (let k = 1; k < piece.length; k++) {
      // Split between code points only (Python slices by code point).
      const c = piece.charCodeAt(k);
      if (c >= 0xdc00 && c <= 0xdfff && (piece.charCodeAt(k - 1) & 0xfc00) === 0xd800) continue;
      const l = piece.slice(0, k);
      const li = vocab[l];
      if (li === undefined) continue;
      const r = piece.slice(k);
      const ri = vocab[r];
      if (ri !== undefined) local.push({ l, r, li, ri });
    }
    if (local.length > 1) local.sort((a, b) => a.li - b.li || a.ri - b.ri);
    const sc = scores[id] ?? 0;
    for (const m of local) {
      left.push(m.l);
      right.push(m.r);
      score.push(sc);
    }
  }
  let sorted = true;
  for (let i = 1; i < score.length && sorted; i++) sorted = (score[i] as number) <= (score[i - 1] as number);
  const order = [...score.keys()];
  // Array.prototype.sort is stable: equal scores keep id order.
  if (!sorted) order.sort((a, b) => (score[b] as number) - (score[a] as number));
  return order.map((i) => [left[i] as string, right[i] as string]);
}

/** Tokenizer for a GGUF file, from its metadata record. */
export function tokenizerFromGguf(meta: Record<string, unknown>): Tokenizer {
  const s = ggufToTokenizerJson(meta);
  return loadTokenizer(s.tokenizerJson, s.tokenizerConfig, {
    chatTemplate: s.chatTemplate,
    eosIds: s.eosIds,
    duplicateTokens: s.duplicateTokens,
  });
}
