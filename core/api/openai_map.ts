/**
 * OpenAI-shaped requests onto the reader API and generation events back into
 * OpenAI-shaped results: the translation the engine library (engine.ts) runs
 * on whichever side of a Web Worker boundary the caller is on. Mirrors what
 * the server's /v1 layer does (temperature 1 unless given, top_p 0 = greedy,
 * `developer` = `system`, models without a chat template chat in ChatML with
 * `<|im_end|>` as an extra stop), without any Node API.
 */
import type { FinishReason as EngineFinish, GenerationEvent } from '../engine/engine.ts';
import type { ConstraintRequest, GenerateRequest } from '../engine/reader_api.ts';
import { InvalidRequestError } from '../errors.ts';
import { DEFAULT_CHATML_TEMPLATE, type ChatMessage } from '../tokenizer/chat_template.ts';
import type { ChatCompletionCreateParams, CompletionUsage, FinishReason, ResponseFormat, SamplingFields } from './types.ts';

type Done = Extract<GenerationEvent, { type: 'done' }>;

const unsupported = (field: string, message: string): InvalidRequestError => new InvalidRequestError('unsupported_parameter', message, { field });

function num(v: unknown, field: string, ok: (x: number) => boolean = Number.isFinite): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !ok(v)) throw new InvalidRequestError('invalid_parameter', `${field} must be a valid number (got ${JSON.stringify(v)})`, { field });
  return v;
}

function constraintOf(rf: ResponseFormat | null | undefined): ConstraintRequest | undefined {
  if (!rf || rf.type === 'text') return undefined;
  if (rf.type === 'json_object') return { kind: 'json_object' };
  if (rf.type === 'json_schema') return { kind: 'json_schema', schema: rf.json_schema?.schema ?? {} };
  throw new InvalidRequestError('invalid_response_format', `response_format.type must be text, json_object or json_schema (got ${JSON.stringify((rf as { type: unknown }).type)})`, { field: 'response_format' });
}

/** Everything but the prompt: sampling, limits, stops and the structured-output constraint (no max_tokens: the engine's default, max_new_tokens.ts). */
export function baseRequest(b: SamplingFields): Omit<GenerateRequest, 'prompt'> {
  if (b.n !== undefined && b.n !== null && b.n !== 1) throw unsupported('n', 'only n=1 is supported; make parallel requests for more choices');
  const maxTokens = num(b.max_tokens, 'max_tokens', (x) => Number.isInteger(x) && x >= 1);
  const seed = num(b.seed, 'seed', Number.isInteger);
  const topP = num(b.top_p, 'top_p');
  const opt = (k: string, v: unknown): Record<string, number> => {
    const x = num(v, k);
    return x === undefined ? {} : { [k]: x };
  };
  const sampling = {
    temperature: topP === 0 ? 0 : (num(b.temperature, 'temperature') ?? 1),
    ...(topP ? { topP } : {}),
    ...(num(b.top_k, 'top_k') !== undefined ? { topK: b.top_k as number } : {}),
    ...(opt('minP', b.min_p)),
    ...(opt('repetitionPenalty', b.repetition_penalty)),
    ...(opt('presencePenalty', b.presence_penalty)),
    ...(opt('frequencyPenalty', b.frequency_penalty)),
    ...(seed !== undefined ? { seed: ((seed % 2 ** 32) + 2 ** 32) % 2 ** 32 } : {}),
  };
  const stop = typeof b.stop === 'string' ? [b.stop] : (b.stop ?? undefined);
  if (stop && (!Array.isArray(stop) || stop.some((s) => typeof s !== 'string'))) throw new InvalidRequestError('invalid_parameter', 'stop must be a string or an array of strings', { field: 'stop' });
  const constraint = constraintOf(b.response_format);
  return {
    ...(maxTokens !== undefined ? { maxNewTokens: maxTokens } : {}),
    sampling,
    ...(stop?.length ? { stop } : {}),
    ...(constraint ? { constraint } : {}),
  };
}

/** Chat messages as the chat template expects them: text content, `developer` as `system`. */
export function chatMessages(ms: ChatCompletionCreateParams['messages']): ChatMessage[] {
  if (!Array.isArray(ms) || ms.length === 0) throw new InvalidRequestError('invalid_parameter', 'messages must be a non-empty array', { field: 'messages' });
  return ms.map((m, i) => {
    if (!m || typeof m !== 'object' || typeof m.role !== 'string') throw new InvalidRequestError('invalid_parameter', `messages[${i}] needs a role`, { field: `messages.${i}` });
    let content = m.content ?? '';
    if (Array.isArray(content)) {
      content = content
        .map((p, k) => {
          if (p.type === 'text' && typeof p.text === 'string') return p.text;
          throw new InvalidRequestError('unsupported_content', `only text content parts are supported (got "${String(p.type)}")`, { field: `messages.${i}.content.${k}` });
        })
        .join('');
    }
    if (typeof content !== 'string') throw new InvalidRequestError('invalid_parameter', `messages[${i}].content must be a string or content parts`, { field: `messages.${i}.content` });
    return { role: m.role === 'developer' ? 'system' : m.role, content };
  });
}

/** The chat request: the model's own template, or ChatML for models that ship none. */
export function chatRequest(b: ChatCompletionCreateParams): GenerateRequest {
  return {
    ...baseRequest(b),
    prompt: { messages: chatMessages(b.messages) },
    chatTemplateFallback: { template: DEFAULT_CHATML_TEMPLATE, stop: ['<|im_end|>'] },
  };
}

export function finishReason(r: EngineFinish): FinishReason {
  return r === 'length' ? 'length' : r === 'cancelled' ? 'abort' : 'stop';
}

export function usageOf(d: Done): CompletionUsage {
  const u = d.usage;
  return { prompt_tokens: u.promptTokens, completion_tokens: u.completionTokens, total_tokens: u.promptTokens + u.completionTokens, prompt_tokens_details: { cached_tokens: u.cachedTokens } };
}

/** A vector as OpenAI's base64 encoding: little-endian float32 bytes (btoa: browsers, Node, Deno). */
export function float32Base64(v: readonly number[]): string {
  const dv = new DataView(new ArrayBuffer(v.length * 4));
  v.forEach((x, i) => dv.setFloat32(i * 4, x, true));
  const u8 = new Uint8Array(dv.buffer);
  let s = '';
  for (let i = 0; i < u8.length; i += 0x8000) s += String.fromCharCode(...u8.subarray(i, i + 0x8000));
  return btoa(s);
}

let seq = 0;
/** A response id: prefix + time + counter (unique within this process). */
export const newId = (prefix: string): string => `${prefix}-${Date.now().toString(36)}${(++seq).toString(36)}`;
export const now = (): number => Math.floor(Date.now() / 1000);
