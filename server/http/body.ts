/**
 * Request bodies read within limits: bytes are counted as they arrive (a chunked
 * upload of any size is refused with 413 after `maxBytes`, never buffered
 * whole), and JSON nesting is bounded before anything walks the parsed value
 * recursively (validation, request sizing, schema compilation), so a deeply
 * nested `json_schema` is a 400 instead of a stack overflow.
 *
 * Errors: 413 `body_too_large` (details.limit, bytes), 400 `json_too_deep`
 * (details.limit, levels), 400 `invalid_json`.
 */
import { InvalidRequestError, PayloadTooLargeError } from '../../core/errors.ts';

/** Deepest JSON nesting accepted in a request body (objects and arrays, levels). */
export const MAX_JSON_DEPTH = 64;

const tooLarge = (maxBytes: number): PayloadTooLargeError =>
  new PayloadTooLargeError('body_too_large', `request body exceeds the ${maxBytes}-byte limit`, { limit: maxBytes });

/** The body's bytes, at most `maxBytes`: stops reading (and cancels the stream) at the first byte past it. */
export async function readBodyBytes(req: Request, maxBytes: number): Promise<Uint8Array> {
  const declared = Number(req.headers.get('content-length') ?? '0');
  if (declared > maxBytes) throw tooLarge(maxBytes);
  if (!req.body) return new Uint8Array(0);
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.byteLength;
    if (n > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(maxBytes);
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(n);
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.byteLength;
  }
  return out;
}

/** Deepest `[`/`{` nesting of JSON text (brackets inside strings skipped); stops counting past `limit`. */
export function jsonDepth(text: string, limit = MAX_JSON_DEPTH): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c) i++; // backslash: skip the escaped character
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) inString = true;
    else if (ch === 0x5b || ch === 0x7b) {
      if (++depth > max && (max = depth) > limit) return max;
    } else if (ch === 0x5d || ch === 0x7d) depth--;
  }
  return max;
}

/** JSON text parsed, refusing nesting deeper than MAX_JSON_DEPTH. */
export function parseJsonText(text: string): unknown {
  if (jsonDepth(text) > MAX_JSON_DEPTH) {
    throw new InvalidRequestError('json_too_deep', `request body nests deeper than ${MAX_JSON_DEPTH} levels`, { limit: MAX_JSON_DEPTH });
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new InvalidRequestError('invalid_json', `request body is not valid JSON: ${(e as Error).message.slice(0, 200)}`);
  }
}
