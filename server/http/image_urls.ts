/**
 * Server-side resolution of the images of a prompt's `<image:URL>` tags into
 * bytes, before the request goes to a reader: `data:image/...;base64,` URLs are
 * decoded; http(s) URLs are fetched (when `image_fetch` is on) with a timeout,
 * a byte limit enforced while streaming and at most 3 redirects. Unless
 * `image_fetch_allow_private`, every hop's host is resolved once, each address
 * checked (server/http/ip_ranges.ts: every IPv4/IPv6 form, loopback, private,
 * link-local, metadata, CGNAT, multicast, unspecified) and the connection made
 * to a checked address (the socket's `lookup` answers with the checked list, so
 * a DNS answer that changes between check and connect is never used).
 * Addresses in `image_fetch_allow_addresses` are allowed (a trusted image host).
 *
 * Errors are 400 InvalidRequestError with stable codes: too_many_images,
 * invalid_image_url, invalid_image, image_too_large (inline), image_fetch_disabled,
 * image_url_forbidden (refused before any connection), image_fetch_failed. Once a
 * connection is attempted, every failure (refused, timeout, HTTP status,
 * redirect to a refused address, over the byte limit) is the same
 * image_fetch_failed with the same message: the target's answer is not revealed.
 */
import { lookup } from 'node:dns/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { InvalidRequestError } from '../../core/errors.ts';
import { dataUrlBytes, imageUrls, mapImageTags } from '../../core/images/prompt.ts';
import { ipBytes, isForbiddenAddress } from './ip_ranges.ts';

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
  /** IP addresses allowed although in a refused range (exact match after normalisation). */
  allowAddresses?: readonly string[];
  /** Host name -> addresses (default: the system resolver, every address). */
  resolve?: (host: string) => Promise<string[]>;
}

const bad = (code: string, message: string, details?: Record<string, unknown>): InvalidRequestError => new InvalidRequestError(code, message, { field: 'text', ...details });

const FORBIDDEN = Symbol('forbidden');
const key = (ip: string): string => (ipBytes(ip) ?? []).join('.');

/** The addresses `url`'s host stands for, every one allowed, else FORBIDDEN; null when it does not resolve. */
async function checkedAddresses(url: URL, cfg: ImageFetchConfig): Promise<string[] | null | typeof FORBIDDEN> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addrs: string[];
  if (ipBytes(host)) addrs = [host];
  else {
    try {
      addrs = cfg.resolve ? await cfg.resolve(host) : (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
    } catch {
      return null;
    }
    if (!addrs.length) return null;
  }
  if (cfg.allowPrivate) return addrs;
  const allowed = new Set((cfg.allowAddresses ?? []).map(key));
  return addrs.every((a) => ipBytes(a) !== null && (allowed.has(key(a)) || !isForbiddenAddress(a))) ? addrs : FORBIDDEN;
}

/** A `lookup` that answers with the already-checked addresses only (no second DNS query). */
function pinned(addrs: string[]): LookupFunction {
  const list = addrs.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  return ((_host: string, opts: { all?: boolean }, cb: (...a: unknown[]) => void) => {
    if (opts?.all) cb(null, list);
    else cb(null, list[0]!.address, list[0]!.family);
  }) as unknown as LookupFunction;
}

class FetchFailed extends Error {}

/** One GET to a checked address; the response, or FetchFailed for any failure. */
function get(url: URL, addrs: string[], signal: AbortSignal): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, { method: 'GET', lookup: pinned(addrs), signal, headers: { accept: 'image/png, image/jpeg' } }, resolve);
    req.on('error', () => reject(new FetchFailed()));
    req.end();
  });
}

async function readBody(res: IncomingMessage, maxBytes: number): Promise<Uint8Array> {
  const declared = Number(res.headers['content-length'] ?? NaN);
  if (declared > maxBytes) throw new FetchFailed();
  const chunks: Buffer[] = [];
  let n = 0;
  try {
    for await (const c of res as AsyncIterable<Buffer>) {
      n += c.length;
      if (n > maxBytes) throw new FetchFailed();
      chunks.push(c);
    }
  } catch {
    throw new FetchFailed();
  } finally {
    res.destroy();
  }
  return new Uint8Array(Buffer.concat(chunks, n));
}

async function fetchImage(href: string, cfg: ImageFetchConfig): Promise<Uint8Array> {
  if (!cfg.fetch) throw bad('image_fetch_disabled', 'fetching image URLs is disabled on this server (image_fetch); send data URLs', { url: href });
  let url = new URL(href);
  const failed = (): InvalidRequestError =>
    bad('image_fetch_failed', `could not fetch an image from ${href} (unreachable, refused, not answered within ${cfg.timeoutMs} ms or ${cfg.maxBytes} bytes, or not a successful answer)`, { url: href });
  const signal = AbortSignal.timeout(cfg.timeoutMs);
  for (let hop = 0; ; hop++) {
    const addrs = await checkedAddresses(url, cfg);
    if (addrs === FORBIDDEN && hop === 0) throw bad('image_url_forbidden', `image URLs on loopback, private, link-local or reserved addresses are refused; set image_fetch_allow_private or image_fetch_allow_addresses to allow them`, { url: href });
    if (addrs === FORBIDDEN || addrs === null) throw failed();
    let res: IncomingMessage;
    try {
      res = await get(url, addrs, signal);
    } catch {
      throw failed();
    }
    const status = res.statusCode ?? 0;
    const location = res.headers.location;
    if (status >= 300 && status < 400 && location) {
      res.destroy();
      if (hop >= 3) throw failed();
      try {
        url = new URL(location, url);
      } catch {
        throw failed();
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw failed();
      continue;
    }
    if (status < 200 || status >= 300) {
      res.destroy();
      throw failed();
    }
    try {
      return await readBody(res, cfg.maxBytes);
    } catch {
      throw failed();
    }
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
