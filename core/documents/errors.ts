/**
 * Typed errors of the document pipeline. Each carries a stable code; a failed
 * document stores `{code, message}` so clients can act on the code.
 *
 * `permanent` separates errors that would recur on every attempt (the file is
 * not a valid PDF, it has no text) from transient ones (a GPU hiccup), which
 * the worker pool retries up to `max_attempts`.
 */
import { WeftError } from '../errors.ts';

export class DocumentError extends WeftError {
  constructor(
    code: string,
    message: string,
    readonly permanent: boolean,
    details?: Record<string, unknown>,
  ) {
    super(code, message, details);
  }
}

/** The reader could not turn the bytes into text (corrupt / wrong format). */
export class DocumentReadError extends DocumentError {
  constructor(format: string, message: string) {
    super('document_unreadable', `cannot read the document as ${format}: ${message}`, true, { format });
  }
}

/** The document was read but holds no text to index. */
export class EmptyDocumentError extends DocumentError {
  constructor(format: string) {
    super('document_empty', `the ${format} document contains no text`, true, { format });
  }
}

/** The store holds vectors of another embedder (different model or width). */
export class StoreEmbedderMismatchError extends WeftError {
  constructor(stored: { id: string; dims: number }, wanted: { id: string; dims: number }) {
    super(
      'store_embedder_mismatch',
      `the document store holds vectors of embedder "${stored.id}" (${stored.dims} dims); the configured embedder is "${wanted.id}" (${wanted.dims} dims). Use another data directory, or re-ingest after clearing it.`,
      { stored, wanted },
    );
  }
}

/** Plain form kept on a failed document. */
export function docErrorOf(e: unknown): { code: string; message: string } {
  if (e instanceof WeftError) return { code: e.code, message: e.message };
  return { code: 'internal_error', message: e instanceof Error ? e.message : String(e) };
}

/** Whether a processing error should be retried (anything not known to be permanent). */
export function isPermanent(e: unknown): boolean {
  return e instanceof DocumentError && e.permanent;
}
