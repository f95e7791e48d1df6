/**
 * Typed errors for the whole core, in one module.
 *
 * Every error carries a stable machine-readable `code`; the HTTP boundary maps
 * each class to a status (see server/errors.ts) and never has to parse messages.
 * Grouped by parent: GPU problems, model/format problems, request problems.
 */

export class WeftError extends Error {
  /** Stable code, e.g. `gpu_validation`; part of the public API. */
  readonly code: string;
  /** Extra structured detail (offending path, valid options, ...). */
  readonly details: Record<string, unknown> | undefined;

  constructor(code: string, message: string, details?: Record<string, unknown>) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.details = details;
  }
}

// ---- GPU ---------------------------------------------------------------

export class GpuError extends WeftError {}

/** No adapter could be found for the requested backend(s). */
export class NoAdapterError extends GpuError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('gpu_no_adapter', message, details);
  }
}

/** An unknown backend name was asked for; `details.valid` lists the valid ones. */
export class UnknownBackendError extends GpuError {
  constructor(name: string, valid: readonly string[]) {
    super('gpu_unknown_backend', `unknown GPU backend "${name}"; valid: ${valid.join(', ')}`, {
      name,
      valid: [...valid],
    });
  }
}

/** WGSL failed to compile or a pipeline failed validation. */
export class ShaderCompileError extends GpuError {
  constructor(shader: string, message: string) {
    super('gpu_shader_compile', `shader ${shader}: ${message}`, { shader });
  }
}

/** A validation / out-of-memory / internal error surfaced from the device. */
export class GpuValidationError extends GpuError {
  constructor(kind: string, message: string) {
    super(kind === 'out-of-memory' ? 'gpu_out_of_memory' : 'gpu_validation', message, { kind });
  }
}

/** The device was lost (driver reset, destroy()). */
export class DeviceLostError extends GpuError {
  constructor(message: string) {
    super('gpu_device_lost', message);
  }
}

// ---- models and formats -------------------------------------------------

export class ModelFormatError extends WeftError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('model_format', message, details);
  }
}

export class UnsupportedModelError extends WeftError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('model_unsupported', message, details);
  }
}

/** The model (weights + activations + the smallest KV pool) does not fit the device's memory budget. */
export class ModelTooLargeError extends WeftError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('model_too_large', message, details);
  }
}

// ---- requests -----------------------------------------------------------

export class InvalidRequestError extends WeftError {
  constructor(code: string, message: string, details?: Record<string, unknown>) {
    super(code, message, details);
  }
}

export class CancelledError extends WeftError {
  constructor(message = 'request cancelled') {
    super('cancelled', message);
  }
}

// ---- service ------------------------------------------------------------

/** A named thing (reader, group, request, document) does not exist. */
export class NotFoundError extends WeftError {
  constructor(code: string, message: string, details?: Record<string, unknown>) {
    super(code, message, details);
  }
}

/** The service cannot take the request now (not ready, overloaded); retry later. */
export class UnavailableError extends WeftError {
  /** Seconds the client should wait before retrying. */
  readonly retryAfter: number;
  constructor(code: string, message: string, retryAfter = 1, details?: Record<string, unknown>) {
    super(code, message, details);
    this.retryAfter = retryAfter;
  }
}

/** The request is larger than a configured limit. */
export class PayloadTooLargeError extends WeftError {}

export class AuthError extends WeftError {}

/** Authenticated, but this credential may not do or see that (403). */
export class ForbiddenError extends WeftError {}

/** Plain-data form of an error, for crossing worker boundaries. */
export interface ErrorJSON {
  name: string;
  code: string;
  message: string;
  details?: Record<string, unknown>;
}

export function errorToJSON(e: unknown): ErrorJSON {
  if (e instanceof WeftError) return { name: e.name, code: e.code, message: e.message, ...(e.details ? { details: e.details } : {}) };
  const err = e instanceof Error ? e : new Error(String(e));
  return { name: 'Error', code: 'internal_error', message: err.message };
}

const CLASSES: Record<string, new (code: string, message: string, details?: Record<string, unknown>) => WeftError> = {
  InvalidRequestError,
  NotFoundError,
  PayloadTooLargeError,
  AuthError,
  WeftError,
};

/** Rebuilds an error from its plain form, keeping its class where it matters for status mapping. */
export function errorFromJSON(j: ErrorJSON): WeftError {
  if (j.name === 'CancelledError') return new CancelledError(j.message);
  if (j.name === 'UnavailableError') {
    // Retry-After crosses a worker or network boundary as details.retry_after (seconds).
    const ra = j.details?.retry_after;
    return new UnavailableError(j.code, j.message, typeof ra === 'number' && ra >= 1 ? Math.ceil(ra) : 1, j.details);
  }
  const C = CLASSES[j.name];
  if (C) return new C(j.code, j.message, j.details);
  // GPU, model and other errors keep their code; the class becomes the generic one.
  const e = new WeftError(j.code, j.message, j.details);
  Object.defineProperty(e, 'name', { value: j.name });
  return e;
}
