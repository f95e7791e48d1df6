/**
 * OpenAI's logprobs shapes from the engine's per-token logprobs
 * (core/engine TokenLogprobs: raw log-softmax of the model's logits, computed
 * on the GPU in the sampling step). Chat: `{content: [{token, logprob, bytes,
 * top_logprobs}], refusal: null}`; completions (legacy): parallel lists
 * `tokens`, `token_logprobs`, `top_logprobs` ({token: logprob}) and
 * `text_offset`. A token that is part of a multi-byte character has a
 * token string with U+FFFD, as OpenAI's; `bytes` is exact.
 */
import type { PromptTokenLogprobs, TokenLogprob, TokenLogprobs } from '../../core/engine/engine.ts';

const utf8 = new TextDecoder('utf-8', { fatal: false });
const text = (t: { bytes: readonly number[] }): string => utf8.decode(Uint8Array.from(t.bytes));
const entry = (t: TokenLogprob): { token: string; logprob: number; bytes: number[] } => ({ token: text(t), logprob: t.logprob, bytes: t.bytes });

export interface ChatLogprobs {
  content: { token: string; logprob: number; bytes: number[]; top_logprobs: { token: string; logprob: number; bytes: number[] }[] }[];
  refusal: null;
}

export function chatLogprobs(lps: readonly TokenLogprobs[]): ChatLogprobs {
  return { content: lps.map((t) => ({ ...entry(t), top_logprobs: t.top.map(entry) })), refusal: null };
}

export interface CompletionLogprobs {
  tokens: string[];
  /** null for the first prompt token with echo (nothing precedes it). */
  token_logprobs: (number | null)[];
  top_logprobs: (Record<string, number> | null)[];
  text_offset: number[];
}

/**
 * `offset`: characters of output before the first token (0, or the prompt's
 * length with echo). With echo, `prompt` (the prompt tokens' entries) comes
 * first, offsets counted from 0 over the prompt tokens' own text.
 */
export function completionLogprobs(lps: readonly TokenLogprobs[], offset = 0, prompt: readonly PromptTokenLogprobs[] = []): CompletionLogprobs {
  const out: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let at = prompt.length ? 0 : offset;
  for (const t of [...prompt, ...lps]) {
    const s = text(t);
    out.tokens.push(s);
    out.token_logprobs.push(t.logprob);
    out.top_logprobs.push(t.logprob === null ? null : Object.fromEntries(t.top.map((x) => [text(x), x.logprob])));
    out.text_offset.push(at);
    at += s.length;
  }
  return out;
}
