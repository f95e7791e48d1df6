/**
 * Connecting to NATS, for readers (`weft reader --nats`), front ends (the
 * `nats:` config section) and document workers: one options shape, read from
 * flags, the config section or WEFT_NATS_* variables, turned into a
 * connection that reconnects by itself forever (a NATS server restart is
 * ridden out, not fatal).
 *
 * Credentials, as NATS clients take them: a `.creds` file (JWT + nkey seed),
 * an nkey seed (file or `SU...` string), user/password, or a token. A
 * `tls://` URL requires TLS (the server's certificate is checked against the
 * system roots or `tls_ca`); `tls_cert` + `tls_key` present a client
 * certificate.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { connect, credsAuthenticator, nkeyAuthenticator, type NatsConnection, type NodeConnectionOptions } from '@nats-io/transport-node';
import { InvalidRequestError } from '../../core/errors.ts';

export interface NatsOptions {
  /** `nats://host:4222` or `tls://host:4222`; several comma-separated for a cluster. */
  url: string;
  creds?: string;
  /** An nkey seed (`SU...`) or a file holding one. */
  nkey?: string;
  user?: string;
  password?: string;
  token?: string;
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
}

const KEYS: Record<string, keyof NatsOptions> = {
  url: 'url',
  creds: 'creds',
  nkey: 'nkey',
  user: 'user',
  password: 'password',
  token: 'token',
  tls_ca: 'tlsCa',
  tls_cert: 'tlsCert',
  tls_key: 'tlsKey',
};

/**
 * The `nats:` config section (keys above, snake_case) with WEFT_NATS_<KEY>
 * variables over it; null when no URL is set (NATS not used).
 */
export function resolveNatsOptions(section: Record<string, unknown> | null | undefined, env: Record<string, string | undefined> = process.env): NatsOptions | null {
  const out: Partial<NatsOptions> = {};
  for (const [k, v] of Object.entries(section ?? {})) {
    const key = KEYS[k];
    if (!key) throw new InvalidRequestError('invalid_config', `nats: unknown setting "${k}" (expected one of ${Object.keys(KEYS).join(', ')})`, { key: `nats.${k}` });
    if (v === null || v === undefined) continue;
    if (typeof v !== 'string' || !v) throw new InvalidRequestError('invalid_config', `nats.${k}: expected a non-empty string`, { key: `nats.${k}` });
    out[key] = v;
  }
  for (const [k, key] of Object.entries(KEYS)) {
    const v = env[`WEFT_NATS_${k.toUpperCase()}`];
    if (v) out[key] = v;
  }
  if (!out.url) {
    if (Object.keys(out).length > 0) throw new InvalidRequestError('invalid_config', 'nats: url is required when other nats settings are given', { key: 'nats.url' });
    return null;
  }
  return out as NatsOptions;
}

/** Client options for `o` (files read here, so a missing one fails at start-up). */
export function clientOptions(o: NatsOptions, name: string): NodeConnectionOptions {
  const urls = o.url.split(',').map((u) => u.trim()).filter(Boolean);
  const requireTls = urls.some((u) => u.startsWith('tls://')) || !!o.tlsCa || !!o.tlsCert;
  const servers = urls.map((u) => u.replace(/^tls:\/\//, 'nats://'));
  const opts: NodeConnectionOptions = {
    servers,
    name: `${name}@${hostname()}`,
    maxReconnectAttempts: -1, // forever: a broker restart is survived
    reconnectTimeWait: 250,
    pingInterval: 5_000,
    maxPingOut: 2,
    waitOnFirstConnect: false,
  };
  if (requireTls) {
    opts.tls = {
      ...(o.tlsCa ? { caFile: o.tlsCa } : {}),
      ...(o.tlsCert ? { certFile: o.tlsCert } : {}),
      ...(o.tlsKey ? { keyFile: o.tlsKey } : {}),
    };
  }
  if (o.creds) opts.authenticator = credsAuthenticator(readFileSync(o.creds));
  else if (o.nkey) {
    const seed = o.nkey.startsWith('SU') ? o.nkey : readFileSync(o.nkey, 'utf8').trim();
    opts.authenticator = nkeyAuthenticator(new TextEncoder().encode(seed));
  }
  if (o.user) {
    opts.user = o.user;
    if (o.password) opts.pass = o.password;
  }
  if (o.token) opts.token = o.token;
  return opts;
}

/** Connects (the first connection must succeed: bad credentials and unreachable brokers fail here). */
export async function connectNats(o: NatsOptions, name: string): Promise<NatsConnection> {
  return connect(clientOptions(o, name));
}
