/**
 * The Tokenizer interface and its implementation on @huggingface/tokenizers.
 *
 * `loadTokenizer` takes a parsed tokenizer.json (+ tokenizer_config.json) and
 * supports whatever that library supports: byte-level BPE (Llama 3, Qwen),
 * SentencePiece-style BPE with byte fallback (Llama 2, Mistral, Gemma),
 * WordPiece and Unigram. On top of the library this module adds what a server
 * needs: typed errors, special-token bookkeeping (BOS / all end-of-generation
 * ids / pad), config-driven BOS/EOS insertion, exact per-token bytes for
 * structured-output masks, and chat templates. `decode` never applies
 * `clean_up_tokenization_spaces`, so decoded text is always the concatenation
 * of token bytes (streaming and one-shot output agree byte for byte).
 */
import { Tokenizer as HfTokenizer } from '@huggingface/tokenizers';
import { InvalidRequestError, ModelFormatError } from '../errors.ts';
import { BYTE_LEVEL_DECODER, byteFallbackValue, utf8 } from './bytes.ts';
import { type ChatMessage, ChatTemplates, type ChatTemplateOptions, normalizeChatTemplates } from './chat_template.ts';

export type { ChatMessage, ChatTemplateOptions } from './chat_template.ts';

export interface Tokenizer {
  encode(text: string, opts?: { addSpecialTokens?: boolean }): number[];
  decode(ids: readonly number[], opts?: { skipSpecialTokens?: boolean }): string;
  /** Number of token ids (highest id + 1, added tokens included). */
  readonly vocabSize: number;
  readonly bosId: number | null;
  /** Every id that ends generation: config eos, generation_config eos ids, known end-of-turn specials. */
  readonly eosIds: readonly number[];
  readonly padId: number | null;
  tokenToId(t: string): number | undefined;
  idToToken(id: number): string | undefined;
  isSpecial(id: number): boolean;
  /**
   * Exact bytes this token contributes to decoded text (byte-level BPE
   * Ġ-mapping undone; SentencePiece ▁ -> space; <0xNN> byte-fallback tokens ->
   * that byte; special tokens -> their text), as it appears mid-sequence: a
   * decoder that strips the leading space of the *first* token (SentencePiece
   * `Strip`, Metaspace, WordPiece) is the only place decode() differs from the
   * concatenation. Used to build structured-output token masks.
   */
  tokenBytes(id: number): Uint8Array;
  applyChatTemplate(messages: ChatMessage[], opts?: ChatTemplateOptions): string;
  readonly hasChatTemplate: boolean;
  /**
   * What this tokenizer was built from (plain, structured-cloneable data): loadTokenizer on
   * it builds an equal tokenizer elsewhere, e.g. on a worker thread that tokenizes long texts.
   */
  readonly source?: TokenizerSource;
}

/** The inputs of loadTokenizer: parsed tokenizer.json, tokenizer_config.json (or none) and options. */
export interface TokenizerSource {
  json: unknown;
  config: unknown;
  opts: LoadTokenizerOptions;
}

export interface LoadTokenizerOptions {
  /** Overrides tokenizer_config's `chat_template` (string, `[{name, template}]` or `{name: template}`). */
  chatTemplate?: unknown;
  /** Extra end-of-generation ids (e.g. generation_config.json `eos_token_id`). */
  eosIds?: readonly number[];
  /**
   * Ids whose string repeats an earlier id's (GGUF vocabularies can have
   * them): decodable, but encode always yields the first id.
   */
  duplicateTokens?: ReadonlyMap<number, string>;
}

/** Special tokens that end a turn in common chat formats; added to eosIds when present and special. */
const END_OF_TURN_TOKENS = ['<|eot_id|>', '<|eom_id|>', '<|im_end|>', '<|endoftext|>', '<|end_of_text|>',
  '<end_of_turn>', '<eos>', '<|end|>', '<|return|>'];

const ANCHOR = 'a';
const EMPTY = new Uint8Array(0);

interface LibInternals {
  model: { vocab: (string | undefined)[] };
  decoder: ((tokens: string[]) => string) & { end_of_word_suffix?: string | null } | null;
}

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A token field of tokenizer_config: a string, or an AddedToken object `{content}`. */
function tokenString(v: unknown): string | null {
  if (typeof v === 'string') return v;
  if (isObject(v) && typeof v.content === 'string') return v.content;
  return null;
}

/** Flatten decoder types, e.g. Sequence[Replace, ByteFallback, Fuse, Strip]. */
function decoderTypes(dec: unknown, out: Set<string> = new Set()): Set<string> {
  if (!isObject(dec)) return out;
  if (typeof dec.type === 'string') out.add(dec.type);
  if (Array.isArray(dec.decoders)) for (const d of dec.decoders) decoderTypes(d, out);
  return out;
}

class HfBackedTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly bosId: number | null;
  readonly eosIds: readonly number[];
  readonly padId: number | null;
  private readonly lib: HfTokenizer;
  private readonly internals: LibInternals;
  private readonly specialIds = new Set<number>();
  private readonly addedIds = new Set<number>();
  private readonly byteLevel: boolean;
  private readonly byteFallback: boolean;
  private readonly bytesCache: (Uint8Array | undefined)[];
  private readonly chat: ChatTemplates;
  /** null: the post-processor's own special tokens are right; else insert these ourselves. */
  private readonly explicitSpecials: { bos: boolean; eos: boolean } | null;

  constructor(json: Json, config: Json, hasConfig: boolean, opts: LoadTokenizerOptions, readonly source: TokenizerSource) {
    // The library requires these keys to exist and `added_tokens` to be iterable.
    const full: Json = { normalizer: null, pre_tokenizer: null, post_processor: null, decoder: null, ...json };
    if (!Array.isArray(full.added_tokens)) full.added_tokens = [];
    const libConfig: Json = { ...config, clean_up_tokenization_spaces: false };
    for (const k of ['bos_token', 'eos_token', 'unk_token', 'pad_token', 'sep_token', 'cls_token', 'mask_token']) {
      if (k in libConfig) libConfig[k] = tokenString(libConfig[k]) ?? undefined;
    }
    const extraSpecial = Array.isArray(config.additional_special_tokens)
      ? config.additional_special_tokens.map(tokenString).filter((s): s is string => s !== null)
      : [];
    libConfig.additional_special_tokens = extraSpecial;
    try {
      this.lib = new HfTokenizer(full, libConfig);
    } catch (e) {
      throw new ModelFormatError(`cannot build tokenizer: ${e instanceof Error ? e.message : String(e)}`, {
        model: isObject(json.model) ? json.model.type : undefined,
      });
    }
    this.internals = this.lib as unknown as LibInternals;
    for (const [id, token] of opts.duplicateTokens ?? []) {
      if (this.internals.model.vocab[id] === undefined) this.internals.model.vocab[id] = token;
    }
    this.vocabSize = this.internals.model.vocab.length;
    this.bytesCache = new Array(this.vocabSize);

    for (const t of full.added_tokens as Json[]) {
      if (typeof t.id !== 'number') continue;
      this.addedIds.add(t.id);
      if (t.special === true) this.specialIds.add(t.id);
    }
    const idOf = (s: string | null): number | null => (s === null ? null : (this.lib.token_to_id(s) ?? null));
    for (const s of extraSpecial) {
      const id = idOf(s);
      if (id !== null) this.specialIds.add(id);
    }
    for (const k of ['bos_token', 'eos_token', 'unk_token', 'pad_token']) {
      const id = idOf(tokenString(config[k]));
      if (id !== null) this.specialIds.add(id);
    }

    const types = decoderTypes(full.decoder);
    this.byteLevel = types.has('ByteLevel');
    this.byteFallback = types.has('ByteFallback');

    // Without a tokenizer_config, BOS/EOS are read off the post-processor template.
    const inferred = hasConfig ? { bos: null, eos: null } : inferTemplateSpecials(isObject(full.post_processor) ? full.post_processor : null);
    this.bosId = idOf(tokenString(config.bos_token)) ?? idOf(inferred.bos);
    this.padId = idOf(tokenString(config.pad_token));
    const eos: number[] = [];
    const addEos = (id: number | null | undefined) => {
      if (id !== null && id !== undefined && id >= 0 && id < this.vocabSize && !eos.includes(id)) eos.push(id);
    };
    addEos(idOf(tokenString(config.eos_token)) ?? idOf(inferred.eos));
    for (const id of opts.eosIds ?? []) addEos(id);
    for (const s of END_OF_TURN_TOKENS) {
      const id = idOf(s);
      if (id !== null && this.specialIds.has(id)) addEos(id);
    }
    this.eosIds = eos;

    this.explicitSpecials = this.resolveSpecialInsertion(config);

    const specialStrings: Record<string, unknown> = {};
    for (const k of ['bos_token', 'eos_token', 'unk_token', 'pad_token', 'sep_token', 'cls_token', 'mask_token']) {
      specialStrings[k] = tokenString(config[k]) ?? null;
    }
    specialStrings.additional_special_tokens = extraSpecial;
    const rawTemplate = opts.chatTemplate !== undefined ? opts.chatTemplate : config.chat_template;
    this.chat = new ChatTemplates(normalizeChatTemplates(rawTemplate), specialStrings);
  }

  /**
   * tokenizer_config's add_bos_token / add_eos_token win over the
   * tokenizer.json post-processor when they disagree (as LlamaTokenizerFast
   * rebuilds its post-processor from them).
   */
  private resolveSpecialInsertion(config: Json): { bos: boolean; eos: boolean } | null {
    const probe = this.lib.encode('', { add_special_tokens: true }).ids;
    const eosId = this.eosIds[0] ?? null;
    const postBos = this.bosId !== null && probe[0] === this.bosId;
    const postEos = eosId !== null && probe.length > 0 && probe[probe.length - 1] === eosId;
    const wantBos = typeof config.add_bos_token === 'boolean' ? config.add_bos_token && this.bosId !== null : postBos;
    const wantEos = typeof config.add_eos_token === 'boolean' ? config.add_eos_token && eosId !== null : postEos;
    return wantBos === postBos && wantEos === postEos ? null : { bos: wantBos, eos: wantEos };
  }

  encode(text: string, opts?: { addSpecialTokens?: boolean }): number[] {
    if (typeof text !== 'string') throw new InvalidRequestError('invalid_prompt', 'text to encode must be a string');
    const add = opts?.addSpecialTokens ?? true;
    const lib = this.explicitSpecials === null ? add : false;
    const ids = this.lib.encode(text, { add_special_tokens: lib }).ids.filter((id) => id !== undefined);
    if (add && this.explicitSpecials) {
      if (this.explicitSpecials.bos && this.bosId !== null) ids.unshift(this.bosId);
      const eos = this.eosIds[0];
      if (this.explicitSpecials.eos && eos !== undefined) ids.push(eos);
    }
    return ids;
  }

  decode(ids: readonly number[], opts?: { skipSpecialTokens?: boolean }): string {
    const keep: number[] = [];
    for (const id of ids) {
      this.checkId(id);
      if (opts?.skipSpecialTokens && this.specialIds.has(id)) continue;
      keep.push(id);
    }
    if (keep.length === 0) return '';
    return this.lib.decode(keep, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  }

  tokenToId(t: string): number | undefined {
    return this.lib.token_to_id(t);
  }

  idToToken(id: number): string | undefined {
    return Number.isInteger(id) && id >= 0 ? this.lib.id_to_token(id) : undefined;
  }

  isSpecial(id: number): boolean {
    return this.specialIds.has(id);
  }

  tokenBytes(id: number): Uint8Array {
    this.checkId(id);
    const hit = this.bytesCache[id];
    if (hit) return hit;
    const bytes = this.computeTokenBytes(id, this.lib.id_to_token(id) ?? '');
    this.bytesCache[id] = bytes;
    return bytes;
  }

  private computeTokenBytes(id: number, token: string): Uint8Array {
    if (token === '') return EMPTY;
    const added = this.addedIds.has(id);
    if (this.byteLevel) {
      if (added) return utf8(token);
      const out: number[] = [];
      for (const ch of token) {
        const b = BYTE_LEVEL_DECODER.get(ch);
        if (b !== undefined) out.push(b);
        else for (const x of utf8(ch)) out.push(x);
      }
      return Uint8Array.from(out);
    }
    if (this.byteFallback && !added) {
      const b = byteFallbackValue(token);
      if (b !== null) return Uint8Array.of(b);
    }
    // Run the real decoder chain with a plain anchor token in front, so
    // first-token effects (Strip, Metaspace, WordPiece spacing) don't apply.
    const dec = this.internals.decoder;
    const run = (tokens: string[]): string => {
      let s = dec ? dec(tokens) : tokens.join(' ');
      const suffix = dec?.end_of_word_suffix;
      if (suffix) s = s.replaceAll(suffix, ' ');
      return s;
    };
    const base = run([ANCHOR]);
    const both = run([ANCHOR, token]);
    return utf8(both.startsWith(base) ? both.slice(base.length) : both);
  }

  private checkId(id: number): void {
    if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize || this.internals.model.vocab[id] === undefined) {
      throw new InvalidRequestError('invalid_token_id', `token id ${id} is not in the vocabulary (size ${this.vocabSize})`, {
        id,
        vocabSize: this.vocabSize,
      });
    }
  }

  applyChatTemplate(messages: ChatMessage[], opts?: ChatTemplateOptions): string {
    return this.chat.render(messages, opts);
  }

  get hasChatTemplate(): boolean {
    return this.chat.hasTemplate;
  }
}

/** BOS/EOS implied by a TemplateProcessing post-processor (leading/trailing SpecialToken of `single`). */
function inferTemplateSpecials(post: Json | null): { bos: string | null; eos: string | null } {
  const none = { bos: null, eos: null };
  if (!post) return none;
  if (post.type === 'Sequence' && Array.isArray(post.processors)) {
    for (const p of post.processors) {
      const r = inferTemplateSpecials(isObject(p) ? p : null);
      if (r.bos !== null || r.eos !== null) return r;
    }
    return none;
  }
  if (post.type !== 'TemplateProcessing' || !Array.isArray(post.single)) return none;
  const single = post.single as Json[];
  const special = (piece: Json | undefined): string | null => {
    const st = piece && isObject(piece.SpecialToken) ? piece.SpecialToken : null;
    return st && typeof st.id === 'string' ? st.id : null;
  };
  return { bos: special(single[0]), eos: single.length > 1 ? special(single[single.length - 1]) : null };
}

/** Build a Tokenizer from parsed tokenizer.json and (optionally) tokenizer_config.json. */
export function loadTokenizer(tokenizerJson: unknown, tokenizerConfig?: unknown, opts: LoadTokenizerOptions = {}): Tokenizer {
  if (!isObject(tokenizerJson) || !isObject(tokenizerJson.model)) {
    throw new ModelFormatError('tokenizer.json must be an object with a "model" section');
  }
  if (tokenizerConfig !== undefined && tokenizerConfig !== null && !isObject(tokenizerConfig)) {
    throw new ModelFormatError('tokenizer_config.json must be an object');
  }
  const hasConfig = isObject(tokenizerConfig);
  return new HfBackedTokenizer(tokenizerJson, hasConfig ? tokenizerConfig : {}, hasConfig, opts, { json: tokenizerJson, config: tokenizerConfig ?? null, opts });
}

/** Minimal read-only view of a model folder (paths are relative to it). */
export interface TokenizerFileSource {
  readText(path: string): Promise<string>;
  exists(path: string): Promise<boolean>;
}

async function readJson(ms: TokenizerFileSource, path: string): Promise<unknown> {
  let text: string;
  try {
    text = await ms.readText(path);
  } catch (e) {
    throw new ModelFormatError(`cannot read ${path}: ${e instanceof Error ? e.message : String(e)}`, { path });
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new ModelFormatError(`${path} is not valid JSON: ${e instanceof Error ? e.message : String(e)}`, { path });
  }
}

async function readOptionalJson(ms: TokenizerFileSource, path: string): Promise<Json | undefined> {
  if (!(await ms.exists(path))) return undefined;
  const v = await readJson(ms, path);
  if (!isObject(v)) throw new ModelFormatError(`${path} must be a JSON object`, { path });
  return v;
}

/**
 * Load a tokenizer from a Hugging Face model folder: tokenizer.json
 * (required), tokenizer_config.json, special_tokens_map.json (fills missing
 * bos/eos/unk/pad), chat_template.jinja or chat_template.json (override the
 * config's template, as transformers does) and generation_config.json
 * (`eos_token_id`, added to eosIds).
 */
export async function loadTokenizerFromSource(ms: TokenizerFileSource): Promise<Tokenizer> {
  if (!(await ms.exists('tokenizer.json'))) {
    throw new ModelFormatError('model folder has no tokenizer.json', { path: 'tokenizer.json' });
  }
  const json = await readJson(ms, 'tokenizer.json');
  const config: Json = { ...((await readOptionalJson(ms, 'tokenizer_config.json')) ?? {}) };
  const specialMap = await readOptionalJson(ms, 'special_tokens_map.json');
  if (specialMap) {
    for (const k of ['bos_token', 'eos_token', 'unk_token', 'pad_token']) {
      if (config[k] === undefined && specialMap[k] !== undefined) config[k] = specialMap[k];
    }
  }
  const opts: LoadTokenizerOptions = {};
  if (await ms.exists('chat_template.jinja')) {
    opts.chatTemplate = await ms.readText('chat_template.jinja');
  } else {
    const ct = await readOptionalJson(ms, 'chat_template.json');
    if (ct && ct.chat_template !== undefined) opts.chatTemplate = ct.chat_template;
  }
  const gen = await readOptionalJson(ms, 'generation_config.json');
  const eos = gen?.eos_token_id;
  if (typeof eos === 'number') opts.eosIds = [eos];
  else if (Array.isArray(eos)) opts.eosIds = eos.filter((x): x is number => typeof x === 'number');
  return loadTokenizer(json, config, opts);
}
