/**
 * Per-request sampling parameters: the one validated shape that the server
 * builds from an API request and that `core/ops/sample.ts` uploads per batch
 * row. Semantics follow HF transformers (temperature -> top-k -> top-p ->
 * min-p, repetition penalty as RepetitionPenaltyLogitsProcessor) plus OpenAI
 * presence/frequency penalties; `temperature == 0` means greedy (argmax).
 * Validation rejects out-of-range values with InvalidRequestError
 * (code `invalid_sampling`, details `{ field, value }`) so bad requests fail
 * before they reach the GPU.
 */
import { InvalidRequestError } from '../errors.ts';

export interface SamplingParams {
  /** Logits are divided by this; 0 = greedy. >= 0. */
  temperature: number;
  /** Keep the k most likely tokens (ties at the k-th value kept); 0 = off. Integer >= 0. */
  topK: number;
  /** Nucleus: keep the smallest top set with probability mass >= topP; 1 = off. In (0, 1]. */
  topP: number;
  /** Drop tokens with prob < minP * (top prob); 0 = off. In [0, 1]. */
  minP: number;
  /** HF repetition penalty over distinct history tokens; 1 = off. > 0. */
  repetitionPenalty: number;
  /** OpenAI: logit -= presencePenalty if the token occurs in the history. In [-2, 2]. */
  presencePenalty: number;
  /** OpenAI: logit -= frequencyPenalty * (occurrences in history). In [-2, 2]. */
  frequencyPenalty: number;
  /** RNG stream: sample n of a request uses hash(seed, n). Integer in [0, 2^32). */
  seed: number;
}

/** Sampled id of a row that has no allowed token (the caller raises an error). */
export const NO_TOKEN = 0xffffffff;

export const GREEDY: SamplingParams = Object.freeze({
  temperature: 0,
  topK: 0,
  topP: 1,
  minP: 0,
  repetitionPenalty: 1,
  presencePenalty: 0,
  frequencyPenalty: 0,
  seed: 0,
});

const DEFAULTS: Omit<SamplingParams, 'seed'> = {
  temperature: 1,
  topK: 0,
  topP: 1,
  minP: 0,
  repetitionPenalty: 1,
  presencePenalty: 0,
  frequencyPenalty: 0,
};

/** A uniformly random u32 (crypto when available: browsers, Node >= 19, Deno). */
function randomSeed(): number {
  const c = (globalThis as { crypto?: { getRandomValues?(a: Uint32Array): Uint32Array } }).crypto;
  if (c?.getRandomValues) return c.getRandomValues(new Uint32Array(1))[0]!;
  return Math.floor(Math.random() * 2 ** 32) >>> 0;
}

/** Temperatures below this are treated as 0 (greedy). */
export const MIN_TEMPERATURE = 1e-5;

type Check = (v: number) => boolean;
const RULES: Record<keyof SamplingParams, [Check, string]> = {
  temperature: [(v) => v >= 0, 'must be >= 0'],
  topK: [(v) => v >= 0 && Number.isInteger(v), 'must be an integer >= 0 (0 = off)'],
  topP: [(v) => v > 0 && v <= 1, 'must be in (0, 1]'],
  minP: [(v) => v >= 0 && v <= 1, 'must be in [0, 1]'],
  repetitionPenalty: [(v) => v > 0, 'must be > 0'],
  presencePenalty: [(v) => v >= -2 && v <= 2, 'must be in [-2, 2]'],
  frequencyPenalty: [(v) => v >= -2 && v <= 2, 'must be in [-2, 2]'],
  seed: [(v) => v >= 0 && v < 2 ** 32 && Number.isInteger(v), 'must be an integer in [0, 2^32)'],
};

/**
 * Fills defaults (temperature 1, topK 0, topP 1, minP 0, neutral penalties,
 * random seed) and validates; temperatures below MIN_TEMPERATURE become 0. `undefined` and `null` mean "default" (JSON
 * clients send null for unset fields). Throws InvalidRequestError
 * `invalid_sampling` with `details.field` naming the first bad field.
 */
export function validateSampling(p: Partial<SamplingParams>): SamplingParams {
  const out = { ...DEFAULTS, seed: 0 } as SamplingParams;
  const given = (p ?? {}) as Record<string, unknown>;
  for (const field of Object.keys(RULES) as (keyof SamplingParams)[]) {
    const v = given[field];
    if (v === undefined || v === null) {
      out[field] = field === 'seed' ? randomSeed() : DEFAULTS[field];
      continue;
    }
    const [ok, why] = RULES[field];
    if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v)) {
      throw new InvalidRequestError('invalid_sampling', `sampling parameter ${field} ${why} (got ${String(v)})`, { field, value: v });
    }
    out[field] = v;
  }
  // As vLLM: a temperature this small is greedy (logits / T would overflow f32).
  if (out.temperature < MIN_TEMPERATURE) out.temperature = 0;
  return out;
}

/** True when the row is a plain argmax (temperature 0). */
export function isGreedy(p: SamplingParams): boolean {
  return p.temperature === 0;
}

/** True when any history-based penalty changes logits. */
export function hasPenalties(p: SamplingParams): boolean {
  return p.repetitionPenalty !== 1 || p.presencePenalty !== 0 || p.frequencyPenalty !== 0;
}
