/**
 * The one default of `max_new_tokens` (OpenAI: `max_tokens`,
 * `max_completion_tokens`, `max_output_tokens`), for every route and the
 * engine: a request that sets none generates until the model stops (EOS, a
 * stop string or token, a completed constraint) or the context is full.
 *
 * Why: clients of OpenAI's Chat Completions and of vLLM's OpenAI server send
 * no limit and expect the whole answer; a fixed number (128, 256) silently
 * cuts answers of models that would have stopped on their own, and differing
 * numbers per route made the same request behave differently by path. The
 * context bounds the cost; admission reserves the same number (server/admission.ts).
 */

/** Tokens a request may generate: what it asked for (default: no limit of its own), capped by the context the prompt leaves. */
export function maxNewTokensFor(requested: number | undefined, promptTokens: number, contextLength: number): number {
  return Math.min(requested ?? contextLength, contextLength - promptTokens);
}
