/**
 * Licence files: an Ed25519-signed statement of who may run the server, until
 * when, with which features and how many readers (docs/licence.md). Verified
 * offline with node:crypto against the trusted public keys, at start-up and on
 * reload (SIGHUP or POST /license/reload on the management port). A licence
 * gates nothing unless `license_required` (WEFT_LICENSE_REQUIRED) is set; then
 * the server refuses to start without a valid one, and /healthz reports 503
 * once it expires.
 *
 * File shape (JSON): { "format": "weft-license/1", "payload": base64url(JSON
 * of LicensePayload), "signature": base64url(Ed25519 over the UTF-8 bytes of
 * "weft-license/1." + payload) }. The payload is signed as bytes, so no JSON
 * canonicalisation is involved.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { WeftError } from '../core/errors.ts';

export const LICENSE_FORMAT = 'weft-license/1';

export interface LicensePayload {
  licensee: string;
  /** ISO 8601 instant after which the licence is expired. */
  expires: string;
  /** Feature names granted (free-form; none is gated by this server yet). */
  features: string[];
  /** Most readers the server may run at once; null = no limit. */
  max_readers: number | null;
  /** ISO 8601 instant the licence was signed. */
  issued: string;
}

export type LicenseStateName = 'valid' | 'missing' | 'invalid' | 'expired';

export interface LicenseState {
  state: LicenseStateName;
  /** Whether a valid licence is required to run (license_required). */
  required: boolean;
  /** The file read (null: none configured). */
  file: string | null;
  licensee: string | null;
  expires: string | null;
  features: string[];
  max_readers: number | null;
  /** Why the licence is not valid (null when valid). */
  reason: string | null;
  /** When the file was last read (ISO 8601). */
  checked_at: string;
}

const b64u = (b: Buffer | Uint8Array): string => Buffer.from(b).toString('base64url');
const message = (payload: string): Buffer => Buffer.from(`${LICENSE_FORMAT}.${payload}`, 'utf8');

/** A public key from raw base64/base64url (32 bytes) or PEM (SPKI). */
export function parsePublicKey(text: string): KeyObject {
  const t = text.trim();
  try {
    if (t.startsWith('-----BEGIN')) return createPublicKey(t);
    const raw = Buffer.from(t.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, ''), 'base64url');
    if (raw.length !== 32) throw new Error(`expected 32 bytes, got ${raw.length}`);
    const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: b64u(raw) }, format: 'jwk' });
    return key;
  } catch (e) {
    throw new WeftError('invalid_license_key', `license public key: not an Ed25519 public key (${(e as Error).message})`);
  }
}

/**
 * The trusted keys: WEFT_LICENSE_PUBLIC_KEY (comma-separated, each raw base64url or a PEM
 * file path). There is no built-in key: whoever issues licences configures the key they
 * sign with, so no build trusts a key whose private half it cannot account for.
 */
export function trustedKeys(config: string | null): KeyObject[] {
  const list = (config ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  return list.map((k) => (/^[A-Za-z0-9_\-+/]{42,44}=?$/.test(k) ? parsePublicKey(k) : parsePublicKey(readFileSync(k, 'utf8'))));
}

/** A new key pair: the private key as PKCS#8 PEM, the public key as raw base64url. */
export function generateLicenseKeys(): { privatePem: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const jwk = publicKey.export({ format: 'jwk' });
  return { privatePem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(), publicKey: jwk.x! };
}

/** Signs `payload` with a PKCS#8 PEM private key; returns the licence file's JSON text. */
export function signLicense(payload: LicensePayload, privatePem: string): string {
  const p = b64u(Buffer.from(JSON.stringify(payload), 'utf8'));
  const signature = b64u(sign(null, message(p), createPrivateKey(privatePem)));
  return `${JSON.stringify({ format: LICENSE_FORMAT, payload: p, signature }, null, 2)}\n`;
}

function checkPayload(v: unknown): LicensePayload {
  const o = v as Record<string, unknown>;
  const bad = (why: string): never => {
    throw new Error(`payload: ${why}`);
  };
  if (typeof v !== 'object' || v === null || Array.isArray(v)) bad('not an object');
  if (typeof o.licensee !== 'string' || !o.licensee) bad('licensee must be a non-empty string');
  if (typeof o.expires !== 'string' || Number.isNaN(Date.parse(o.expires))) bad('expires must be an ISO 8601 date');
  if (!Array.isArray(o.features) || !o.features.every((f) => typeof f === 'string')) bad('features must be a list of strings');
  if (o.max_readers !== null && !(typeof o.max_readers === 'number' && Number.isInteger(o.max_readers) && o.max_readers >= 1)) bad('max_readers must be a positive integer or null');
  return o as unknown as LicensePayload;
}

/**
 * Verifies licence text against `keys` at time `now`: the payload when the
 * signature checks under one of the keys, else an error naming why.
 */
export function verifyLicense(text: string, keys: KeyObject[], now = new Date()): { payload: LicensePayload; expired: boolean } {
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new Error('not JSON');
  }
  if (doc?.format !== LICENSE_FORMAT) throw new Error(`format must be "${LICENSE_FORMAT}"`);
  if (typeof doc.payload !== 'string' || typeof doc.signature !== 'string') throw new Error('payload and signature must be strings');
  const sig = Buffer.from(doc.signature, 'base64url');
  if (keys.length === 0) throw new Error('no trusted public key is configured (license_public_key / WEFT_LICENSE_PUBLIC_KEY)');
  if (!keys.some((k) => verify(null, message(doc.payload as string), k, sig))) throw new Error('signature does not verify under any trusted key');
  let raw: unknown;
  try {
    raw = JSON.parse(Buffer.from(doc.payload, 'base64url').toString('utf8'));
  } catch {
    throw new Error('payload: not base64url JSON');
  }
  const payload = checkPayload(raw);
  return { payload, expired: Date.parse(payload.expires) <= now.getTime() };
}

/** The server's licence: read at start-up and on reload; expiry is judged at each look. */
export class License {
  private current: LicenseState;

  constructor(private readonly opts: { file: string | null; required: boolean; publicKey: string | null }) {
    this.current = this.read();
  }

  /** Re-reads the file (SIGHUP, POST /license/reload); returns the new state. */
  reload(): LicenseState {
    this.current = this.read();
    return this.state();
  }

  /** The state now (a valid licence past its expiry reads `expired`). */
  state(now = new Date()): LicenseState {
    const s = this.current;
    if (s.state === 'valid' && s.expires && Date.parse(s.expires) <= now.getTime()) return { ...s, state: 'expired', reason: `expired at ${s.expires}` };
    return s;
  }

  /** True when the server may serve: no licence required, or a valid one. */
  get ok(): boolean {
    return !this.opts.required || this.state().state === 'valid';
  }

  /** Throws `license_required` when a valid licence is required and absent. */
  assertUsable(): void {
    const s = this.state();
    if (!this.ok) throw new WeftError('license_required', `a valid licence is required (license_required) but the licence is ${s.state}: ${s.reason}`, { license: s.state, file: s.file });
  }

  /** Throws `license_reader_limit` when starting one more reader would exceed max_readers of a required licence. */
  assertReaderSlot(running: number): void {
    const max = this.state().max_readers;
    if (this.opts.required && max !== null && running + 1 > max) {
      throw new WeftError('license_reader_limit', `the licence allows ${max} readers and ${running} are running`, { max_readers: max });
    }
  }

  private read(): LicenseState {
    const base = { required: this.opts.required, file: this.opts.file, licensee: null, expires: null, features: [], max_readers: null, checked_at: new Date().toISOString() };
    if (!this.opts.file) return { ...base, state: 'missing', reason: 'no licence file configured (license_file)' };
    let text: string;
    try {
      text = readFileSync(this.opts.file, 'utf8');
    } catch (e) {
      return { ...base, state: 'missing', reason: `cannot read ${this.opts.file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` };
    }
    try {
      const { payload, expired } = verifyLicense(text, trustedKeys(this.opts.publicKey));
      const fields = { licensee: payload.licensee, expires: payload.expires, features: payload.features, max_readers: payload.max_readers };
      return { ...base, ...fields, state: expired ? 'expired' : 'valid', reason: expired ? `expired at ${payload.expires}` : null };
    } catch (e) {
      return { ...base, state: 'invalid', reason: (e as Error).message };
    }
  }
}
