/**
 * Server-side resolution of the images of a prompt's `<image:URL>` tags into
 * bytes, before the request goes to a reader: `data:image/...;base64,` URLs are
 * decoded; http(s) URLs are fetched (when `image_fetch` is on) with a timeout,
 * a byte limit enforced while streaming, at most 3 redirects, and — unless
 * `image_fetch_allow_private` — refusing hosts that are or resolve to loopback,
 * private, link-local, CGNAT or unspecified addresses (checked again on every
 * redirect; a DNS answer that changes between the check and the connect is not
 * caught). The tags are rewritten to `<image:#k>`, so the prompt that travels on
 * and counts against WEFT_MAX_PROMPT_STRING_BYTES no longer holds the data.
 *
 * Errors are 400 InvalidRequestError with stable codes: too_many_images,
 * invalid_image_url, invalid_image, image_too_large, image_fetch_disabled,
 * image_url_forbidden, image_fetch_failed.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { InvalidRequestError } from '../../core/errors.ts';
import { dataUrlBytes, imageUrls, mapImageTags } from '../../core/images/prompt.ts';

export interface ImageFetchConfig {
  /** Largest image, bytes (encoded). */
  maxBytes: number;
  /** Most images per prompt. */
  maxCount: number;
  timeoutMs: number;
  /** Fetch http(s) URLs at all. */
  fetch: boolean;
  /** Allow loopback / private / link-local targets (tests, trusted networks). */
  allowPrivate: boolean;
}

const bad = (code: string, message: string, details?: Record<string, unknown>): InvalidRequestError => new InvalidRequestError(code, message, { field: 'text', ...details });

/** Loopback, private, link-local, CGNAT, unspecified, multicast and reserved ranges (v4 and v6, v4-mapped). */
export function isPrivateAddress(ip: string): boolean {
  const v4 = ip.startsWith('::ffff:') && isIP(ip.slice(7)) === 4 ? ip.slice(7) : ip;
  if (isIP(v4) === 4) {
    const [a, b] = v4.split('.').map(Number) as [number, number];
    return a === 0 || a === 10 || a === 127 || a >= 224 || (a === 100 && b >= 64 && b < 128) || (a === 169 && b === 254) || (a === 172 && b >= 16 && b < 32) || (a === 192 && b === 168);
  }
  const s = ip.toLowerCase();
  return s === '::' || s === '::1' || /^f[cd]/.test(s) || /^fe[89ab]/.test(s) || s.startsWith('ff');
}

async function checkHost(url: URL, cfg: ImageFetchConfig): Promise<void> {
  if (cfg.allowPrivate) return;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addrs: string[];
  if (isIP(host)) addrs = [host];
  else {
    try {
      addrs = (await lookup(host, { all: true })).map((a) => a.address);
    } catch (e) {
      throw bad('image_fetch_failed', `cannot resolve ${host}: ${(e as Error).message}`, { url: url.href });
    }
  }
  if (addrs.some(isPrivateAddress)) {
    throw bad('image_url_forbidden', `image URLs on loopback or private addresses are refused (${host}); set image_fetch_allow_private to allow them`, { url: url.href });
  }
}

async function fetchImage(href: string, cfg: ImageFetchConfig): Promise<Uint8Array> {
  if (!cfg.fetch) throw bad('image_fetch_disabled', 'fetching image URLs is disabled on this server (image_fetch); send data URLs', { url: href });
  let url = new URL(href);
  const signal = AbortSignal.timeout(cfg.timeoutMs);
  for (let hop = 0; ; hop++) {
    await checkHost(url, cfg);
    let res: Response;
    try {
      res = await fetch(url, { redirect: 'manual', signal, headers: { accept: 'image/png, image/jpeg' } });
    } catch (e) {
      const timeout = (e as Error).name === 'TimeoutError' || signal.aborted;
      throw bad('image_fetch_failed', timeout ? `fetching ${url.href} took longer than ${cfg.timeoutMs} ms` : `fetching ${url.href} failed: ${(e as Error).message}`, { url: url.href });
    }
    if (res.status >= 300 && res.status < 400 && res.headers.get('location')) {
      await res.body?.cancel();
      if (hop >= 3) throw bad('image_fetch_failed', `too many redirects fetching ${href}`, { url: href });
      url = new URL(res.headers.get('location')!, url);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw bad('image_fetch_failed', `redirect to a non-http URL from ${href}`, { url: href });
      continue;
    }
    if (!res.ok || !res.body) {
      await res.body?.cancel();
      throw bad('image_fetch_failed', `fetching ${url.href} answered HTTP ${res.status}`, { url: url.href, status: res.status });
    }
    const declared = Number(res.headers.get('content-length') ?? NaN);
    if (declared > cfg.maxBytes) {
      await res.body.cancel();
      throw bad('image_too_large', `the image at ${url.href} is ${declared} bytes; the limit is ${cfg.maxBytes}`, { url: url.href, limit: cfg.maxBytes });
    }
    const chunks: Uint8Array[] = [];
    let n = 0;
    const reader = res.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        n += value.length;
        if (n > cfg.maxBytes) {
          await reader.cancel();
          throw bad('image_too_large', `the image at ${url.href} exceeds ${cfg.maxBytes} bytes`, { url: url.href, limit: cfg.maxBytes });
        }
        chunks.push(value);
      }
    } catch (e) {
      if (e instanceof InvalidRequestError) throw e;
      throw bad('image_fetch_failed', `reading ${url.href} failed: ${(e as Error).message}`, { url: url.href });
    }
    const out = new Uint8Array(n);
    let o = 0;
    for (const c of chunks) out.set(c, (o += c.length) - c.length);
    return out;
  }
}

/** Resolves every `<image:URL>` of `prompt`; returns the prompt with `<image:#k>` tags and the bytes in order. */
export async function resolvePromptImages(prompt: string, cfg: ImageFetchConfig): Promise<{ prompt: string; images: Uint8Array[] }> {
  const urls = imageUrls(prompt);
  if (urls.length > cfg.maxCount) throw bad('too_many_images', `the prompt has ${urls.length} images; the limit is ${cfg.maxCount} (image_max_count)`, { limit: cfg.maxCount });
  const images = await Promise.all(
    urls.map(async (u) => {
      if (/^data:/i.test(u)) {
        if (u.length * 0.75 > cfg.maxBytes + 3) throw bad('image_too_large', `an inline image exceeds ${cfg.maxBytes} bytes (image_max_bytes)`, { limit: cfg.maxBytes });
        return dataUrlBytes(u);
      }
      if (/^https?:\/\//i.test(u)) {
        try {
          new URL(u);
        } catch {
          throw bad('invalid_image_url', `not a valid URL: ${u.slice(0, 64)}`);
        }
        return fetchImage(u, cfg);
      }
      throw bad('invalid_image_url', `image URLs must be data:image/png|jpeg;base64 or http(s) URLs (got ${JSON.stringify(u.slice(0, 32))})`);
    }),
  );
  return { prompt: mapImageTags(prompt, (_, k) => `<image:#${k}>`), images };
}
