/**
 * Pieces every OpenAI-shaped route shares (chat and completions in openai.ts,
 * the Responses API in openai_responses.ts): OpenAI's error shape, `model` ->
 * consumer group, and the chat-template fallback for models without one.
 */
import { NotFoundError, WeftError } from '../../core/errors.ts';
import { DEFAULT_CHATML_TEMPLATE } from '../../core/tokenizer/chat_template.ts';
import { statusOf } from '../http/errors.ts';
import type { Service } from '../service.ts';

/** Used for chat requests to models that ship no chat template. */
export const CHAT_FALLBACK = { template: DEFAULT_CHATML_TEMPLATE, stop: ['<|im_end|>'] };

/** OpenAI's error shape; `code` is Weft's stable code, `param` the offending field. */
export function openaiError(e: unknown): { error: { message: string; type: string; param: string | null; code: string | null } } {
  const status = statusOf(e);
  const type = status === 401 ? 'authentication_error' : status === 429 ? 'rate_limit_error' : status >= 500 ? 'server_error' : 'invalid_request_error';
  if (!(e instanceof WeftError)) return { error: { message: 'internal server error', type, param: null, code: 'internal_error' } };
  // The group comes from `model` here, whatever field the native API names.
  const field = e.code === 'wrong_reader_type' ? 'model' : e.details?.field;
  return { error: { message: e.message, type, param: typeof field === 'string' ? field : null, code: e.code } };
}

/** `model` -> consumer group: a group name, else a reader id (its group); absent = the default group. */
export function resolveModel(svc: Service, model: string | undefined): string {
  if (model === undefined) return svc.config.consumerGroup;
  if (svc.readers.groups().has(model)) return model;
  const r = svc.readers.all().find((x) => x.readerId === model);
  if (r) return r.spec.consumerGroup;
  throw modelNotFound(model);
}

export const modelNotFound = (model: string): NotFoundError =>
  new NotFoundError('model_not_found', `The model '${model}' does not exist; GET /v1/models lists the consumer groups and reader ids served here`, { field: 'model' });
