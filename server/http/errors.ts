/**
 * Typed errors -> HTTP. Every error body is `{"error": {"code", "message",
 * "details"?}}` with a stable code; the status follows the error's class.
 */
import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import {
  AuthError,
  ForbiddenError,
  CancelledError,
  GpuError,
  InvalidRequestError,
  ModelFormatError,
  ModelTooLargeError,
  NotFoundError,
  PayloadTooLargeError,
  UnavailableError,
  UnsupportedModelError,
  WeftError,
} from '../../core/errors.ts';

export function statusOf(e: unknown): ContentfulStatusCode {
  if (e instanceof InvalidRequestError) return 400;
  if (e instanceof AuthError) return 401;
  if (e instanceof ForbiddenError) return 403;
  if (e instanceof NotFoundError) return 404;
  if (e instanceof PayloadTooLargeError) return 413;
  if (e instanceof ModelFormatError || e instanceof UnsupportedModelError) return 422;
  // The model does not fit this server's device memory: a server-side capacity limit, not a
  // malformed request (413 would blame the request body) — 507 Insufficient Storage.
  if (e instanceof ModelTooLargeError) return 507 as ContentfulStatusCode;
  if (e instanceof CancelledError) return 499 as ContentfulStatusCode;
  if (e instanceof UnavailableError) return 503;
  if (e instanceof GpuError) return e.code === 'gpu_out_of_memory' ? 503 : 500;
  if (e instanceof WeftError) {
    // Errors rebuilt from a worker keep their code but not always their class.
    if (e.name === 'ModelFormatError' || e.name === 'UnsupportedModelError') return 422;
    if (e.code === 'model_too_large') return 507 as ContentfulStatusCode;
    if (e.code === 'reader_crashed') return 503;
    if (e.code === 'license_reader_limit') return 403;
    return 500;
  }
  return 500;
}

export function errorBody(e: unknown): { error: { code: string; message: string; details?: Record<string, unknown> } } {
  if (e instanceof WeftError) {
    return { error: { code: e.code, message: e.message, ...(e.details ? { details: e.details } : {}) } };
  }
  return { error: { code: 'internal_error', message: 'internal server error' } };
}

/** Hono onError handler: typed errors to JSON, anything else to a logged 500. */
export function onError(log: (msg: string, fields?: Record<string, unknown>) => void) {
  return (err: Error, c: Context): Response => {
    const status = statusOf(err);
    // 507 model_too_large is a refusal with its numbers in the body, not a server fault: no stack.
    if (status >= 500 && status !== 507) log('request failed', { path: c.req.path, error: err.message, stack: err.stack });
    const res = c.json(errorBody(err), status);
    if (err instanceof UnavailableError) res.headers.set('Retry-After', String(err.retryAfter));
    return res;
  };
}
