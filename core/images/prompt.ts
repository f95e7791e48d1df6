/**
 * Inline images in prompts: `<image:URL>` tags (the spec's form). A prompt
 * splits into text segments and image references, in order; the URL is
 * whatever the client wrote (a data URL, an http(s) URL, or `#k` once the
 * server has resolved the k-th image into bytes). Pure string work, portable.
 */
import { InvalidRequestError } from '../errors.ts';

/** `<image:` then a URL without whitespace or angle brackets, then `>`. */
const TAG = /<image:([^\s<>]+)>/g;

export type PromptPart = { text: string } | { image: string };

/** Text and image parts in prompt order; empty text parts are dropped. */
export function splitImageTags(prompt: string): PromptPart[] {
  const parts: PromptPart[] = [];
  let at = 0;
  for (const m of prompt.matchAll(TAG)) {
    if (m.index > at) parts.push({ text: prompt.slice(at, m.index) });
    parts.push({ image: m[1]! });
    at = m.index + m[0].length;
  }
  if (at < prompt.length) parts.push({ text: prompt.slice(at) });
  return parts;
}

/** The URLs of a prompt's image tags, in order. */
export function imageUrls(prompt: string): string[] {
  return [...prompt.matchAll(TAG)].map((m) => m[1]!);
}

/** Replaces the k-th tag by `replace(url, k)`. */
export function mapImageTags(prompt: string, replace: (url: string, k: number) => string): string {
  let k = 0;
  return prompt.replace(TAG, (_, url: string) => replace(url, k++));
}

/** Bytes of a `data:image/...;base64,` URL; anything else is `invalid_image_url`. */
export function dataUrlBytes(url: string): Uint8Array {
  const m = /^data:(image\/[a-z0-9.+-]+)?(;[^,;]+)*;base64,([A-Za-z0-9+/=_-]*)$/i.exec(url);
  if (!m) throw new InvalidRequestError('invalid_image_url', 'an inline image must be a base64 data URL (data:image/png;base64,... or data:image/jpeg;base64,...)', { url: url.slice(0, 64) });
  const b64 = m[3]!.replace(/-/g, '+').replace(/_/g, '/');
  let bin: string;
  try {
    bin = atob(b64);
  } catch {
    throw new InvalidRequestError('invalid_image', 'the data URL is not valid base64', { url: url.slice(0, 64) });
  }
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
