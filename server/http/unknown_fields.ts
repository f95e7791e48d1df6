/**
 * Unknown request fields -> `400 unknown_field`, with a suggestion where the
 * name is a near miss or another API's name for one of ours (`regex` ->
 * `regex_string`, `temperature` -> `sampling_temperature`). Why not ignore
 * them: a misspelt constraint or limit would otherwise be dropped silently and
 * the request would run unconstrained (`{"regex": ...}` generated free text).
 * The documents API uses the same code (core/documents/intake.ts).
 */
import type { z } from 'zod';
import { InvalidRequestError } from '../../core/errors.ts';

/** Other APIs' names (OpenAI, TGI, vLLM) for fields the native routes spell differently. */
const ALIASES: ReadonlyMap<string, readonly string[]> = new Map(Object.entries({
  regex: ['regex_string'],
  guided_regex: ['regex_string'],
  pattern: ['regex_string'],
  guided_json: ['json_schema'],
  response_format: ['json_schema'],
  schema: ['json_schema'],
  temperature: ['sampling_temperature'],
  top_p: ['sampling_topp'],
  top_k: ['sampling_topk'],
  max_tokens: ['max_new_tokens'],
  max_completion_tokens: ['max_new_tokens'],
  min_tokens: ['min_new_tokens'],
  stop_sequences: ['stop'],
  prompt: ['text'],
  inputs: ['text'],
  input: ['text'],
  model: ['consumer_group'],
  group: ['consumer_group'],
}));

/** Levenshtein distance, early exit past `max` (names are short: a few dozen characters). */
function distance(a: string, b: string, max: number): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    let best = i;
    for (let j = 1; j <= b.length; j++) {
      const v = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      row.push(v);
      best = Math.min(best, v);
    }
    if (best > max) return max + 1;
    prev = row;
  }
  return prev[b.length]!;
}

/** The field `name` probably meant, among `known` (null when nothing is close). */
export function suggestField(name: string, known: ReadonlySet<string>): string | null {
  const lower = name.toLowerCase();
  // (A Map, not an object lookup: a client's field may be named "constructor" or "__proto__".)
  for (const k of ALIASES.get(lower) ?? []) if (known.has(k)) return k;
  let best: string | null = null;
  let bestD = 3; // at most 2 edits, and fewer than half the name
  for (const k of known) {
    const d = distance(lower, k.toLowerCase(), 2);
    if (d < bestD && d * 2 < name.length) [best, bestD] = [k, d];
  }
  return best;
}

/** zod 4 internals the walk reads: every schema carries its definition in `_zod.def`. */
interface Def {
  type: string;
  shape?: Record<string, z.ZodType>;
  innerType?: z.ZodType;
  element?: z.ZodType;
  options?: z.ZodType[];
  in?: z.ZodType;
}
const defOf = (s: z.ZodType): Def => (s as unknown as { _zod: { def: Def } })._zod.def;

/** The keys of the object schema(s) at `path` inside `schema` (unions merged; empty when not an object). */
export function keysAt(schema: z.ZodType, path: readonly PropertyKey[]): Set<string> {
  const out = new Set<string>();
  const walk = (s: z.ZodType, i: number): void => {
    const d = defOf(s);
    if (d.innerType) return walk(d.innerType, i); // optional, nullable, default, readonly
    if (d.type === 'pipe' && d.in) return walk(d.in, i);
    if (d.type === 'union' && d.options) return d.options.forEach((o) => walk(o, i));
    if (i === path.length) {
      if (d.type === 'object' && d.shape) for (const k of Object.keys(d.shape)) out.add(k);
      return;
    }
    const step = path[i];
    if (d.type === 'array' && d.element && typeof step === 'number') return walk(d.element, i + 1);
    if (d.type === 'object' && d.shape && typeof step === 'string' && Object.hasOwn(d.shape, step)) return walk(d.shape[step]!, i + 1);
  };
  walk(schema, 0);
  return out;
}

/** Most unknown fields named in one error, and the longest name echoed (characters): the error stays small whatever the request held. */
export const MAX_LISTED_FIELDS = 16;
export const MAX_FIELD_NAME = 64;

const clip = (s: string): string => (s.length > MAX_FIELD_NAME ? `${s.slice(0, MAX_FIELD_NAME)}…` : s);

/**
 * The `unknown_field` error for zod's unrecognized-keys issue at `path` of a body validated by `schema`:
 * the first MAX_LISTED_FIELDS names (each clipped), `details.count` = how many there were.
 */
export function unknownFieldError(schema: z.ZodType, path: readonly PropertyKey[], all: readonly string[]): InvalidRequestError {
  const known = keysAt(schema, path);
  const at = clip(path.map(String).join('.'));
  const keys = all.slice(0, MAX_LISTED_FIELDS).map(clip);
  const fields = keys.map((k) => (at ? `${at}.${k}` : k));
  const suggestions: Record<string, string> = {};
  keys.forEach((k, i) => {
    const s = suggestField(k, known);
    if (s) suggestions[fields[i]!] = at ? `${at}.${s}` : s;
  });
  const named = fields.map((f) => (suggestions[f] ? `"${f}" (did you mean "${suggestions[f]}"?)` : `"${f}"`));
  const more = all.length - keys.length;
  return new InvalidRequestError('unknown_field', `unknown field${all.length > 1 ? 's' : ''} ${named.join(', ')}${more > 0 ? ` and ${more} more` : ''}`, {
    field: fields[0],
    fields,
    ...(more > 0 ? { count: all.length } : {}),
    ...(Object.keys(suggestions).length ? { suggestions } : {}),
  });
}
