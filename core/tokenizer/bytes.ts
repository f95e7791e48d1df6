/**
 * Byte-level helpers shared by the tokenizer modules.
 *
 * GPT-2 style byte-level BPE stores every byte as a printable code point
 * (space -> 'Ġ', newline -> 'Ċ', ...); `BYTE_LEVEL_DECODER` undoes that
 * mapping so `tokenBytes` can return the exact bytes of a token. The UTF-8
 * helpers let the incremental decoder tell a character that is merely
 * unfinished (hold it back) from bytes that are definitively invalid (emit
 * U+FFFD now, exactly like a one-shot decode would).
 */

/** byte -> printable code point, the table from GPT-2's `bytes_to_unicode`. */
export const BYTE_LEVEL_ENCODER: readonly string[] = (() => {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const table = new Array<string>(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    table[b] = String.fromCharCode(printable.includes(b) ? b : 256 + extra++);
  }
  return table;
})();

/** printable code point -> byte (inverse of `BYTE_LEVEL_ENCODER`). */
export const BYTE_LEVEL_DECODER: ReadonlyMap<string, number> = new Map(
  BYTE_LEVEL_ENCODER.map((ch, b) => [ch, b] as const),
);

const encoder = new TextEncoder();

export function utf8(text: string): Uint8Array {
  return encoder.encode(text);
}

/** `<0xNN>` byte-fallback token -> NN, else null (same test as tokenizers' ByteFallback decoder). */
export function byteFallbackValue(token: string): number | null {
  if (token.length !== 6 || !token.startsWith('<0x') || !token.endsWith('>')) return null;
  const v = parseInt(token.slice(3, 5), 16);
  return Number.isNaN(v) ? null : v;
}

export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/**
 * True when `tail` (the last few bytes of a stream) ends inside a UTF-8
 * sequence that later bytes could still complete. Uses the WHATWG decoder's
 * rules (valid lead bytes C2..F4, restricted second byte after E0/ED/F0/F4),
 * so "incomplete" here means a streaming TextDecoder would still wait.
 */
export function endsWithIncompleteUtf8(tail: ArrayLike<number>): boolean {
  const n = tail.length;
  let i = n - 1;
  let cont = 0;
  while (i >= 0 && cont < 3 && ((tail[i] ?? 0) & 0xc0) === 0x80) {
    i--;
    cont++;
  }
  if (i < 0) return false;
  const lead = tail[i] ?? 0;
  let need: number;
  if (lead >= 0xc2 && lead <= 0xdf) need = 1;
  else if (lead >= 0xe0 && lead <= 0xef) need = 2;
  else if (lead >= 0xf0 && lead <= 0xf4) need = 3;
  else return false;
  if (cont >= need) return false;
  if (cont >= 1) {
    const second = tail[i + 1] ?? 0;
    let lo = 0x80;
    let hi = 0xbf;
    if (lead === 0xe0) lo = 0xa0;
    else if (lead === 0xed) hi = 0x9f;
    else if (lead === 0xf0) lo = 0x90;
    else if (lead === 0xf4) hi = 0x8f;
    if (second < lo || second > hi) return false;
  }
  return true;
}
