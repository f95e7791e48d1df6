/**
 * Strict base64 for file entries' `bytes` (portable: no Buffer, no atob).
 *
 * Accepted: the standard alphabet (RFC 4648 §4) or the URL-safe one (§5),
 * padding optional, ASCII whitespace ignored (MIME-style line breaks).
 * Anything else — a stray character, padding in the middle, a length that
 * cannot be base64 — is rejected, so a client that forgot to encode (sent
 * raw text) gets `invalid_base64` instead of a garbled document.
 */

const TABLE = (() => {
  const t = new Int16Array(128).fill(-1);
  const abc = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  for (let i = 0; i < 64; i++) t[abc.charCodeAt(i)] = i;
  t['-'.charCodeAt(0)] = 62;
  t['_'.charCodeAt(0)] = 63;
  return t;
})();

/** Decoded length of a base64 string without decoding it (whitespace ignored), or -1 if the length is impossible. */
export function base64DecodedLength(s: string): number {
  const clean = /\s/.test(s) ? s.replace(/\s+/g, '') : s;
  const body = clean.replace(/=+$/, '');
  if (body.length % 4 === 1) return -1;
  return Math.floor((body.length * 3) / 4);
}

/** Decodes `s`; null when it is not valid base64. */
export function decodeBase64(s: string): Uint8Array | null {
  const clean = /\s/.test(s) ? s.replace(/\s+/g, '') : s;
  let end = clean.length;
  let pad = 0;
  while (end > 0 && clean.charCodeAt(end - 1) === 61 /* = */ && pad < 2) {
    end--;
    pad++;
  }
  if (pad && clean.length % 4 !== 0) return null;
  if (end % 4 === 1) return null;
  const out = new Uint8Array(Math.floor((end * 3) / 4));
  let o = 0;
  let acc = 0;
  let bits = 0;
  for (let i = 0; i < end; i++) {
    const c = clean.charCodeAt(i);
    const v = c < 128 ? TABLE[c]! : -1;
    if (v < 0) return null;
    acc = ((acc << 6) | v) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 0xff;
    }
  }
  return out;
}

/** Standard base64 with padding (tests and clients). */
export function encodeBase64(b: Uint8Array): string {
  const abc = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  let s = '';
  let i = 0;
  for (; i + 2 < b.length; i += 3) {
    const n = (b[i]! << 16) | (b[i + 1]! << 8) | b[i + 2]!;
    s += abc[n >> 18]! + abc[(n >> 12) & 63]! + abc[(n >> 6) & 63]! + abc[n & 63]!;
  }
  if (i < b.length) {
    const n = (b[i]! << 16) | ((b[i + 1] ?? 0) << 8);
    s += abc[n >> 18]! + abc[(n >> 12) & 63]! + (i + 1 < b.length ? abc[(n >> 6) & 63]! : '=') + '=';
  }
  return s;
}
