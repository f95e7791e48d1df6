/**
 * Optional bearer-token auth: with keys configured, requests need
 * `Authorization: Bearer <key>` (or `x-api-key`). Health, docs and metrics
 * stay open so probes and scrapers work without secrets.
 *
 * Keys in `api_key_owners` are bound to the document owners they may act as:
 * such a key is accepted like one of `api_keys`, and `keyOwners(request)`
 * gives its owners to the document routes (server/apps/documents.ts), where the
 * owner header may narrow them but never widen them. Bound keys never open the
 * management app (`required` keeps it closed when only bound keys exist).
 */
import { timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { AuthError } from '../../core/errors.ts';

const OPEN = /^\/(healthz|ping|health|metrics|docs|openapi\.json)(\/|$)/;

function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The owners the request's API key is bound to (absent: the key is not bound, or auth is off). */
const bound = new WeakMap<Request, readonly string[]>();
export const keyOwners = (req: Request): readonly string[] | undefined => bound.get(req);

/**
 * `keys`: unbound keys; `owners`: bound keys -> their owners. With neither, the
 * app is open unless `required` (then every request without a valid key is 401).
 */
export function bearerAuth(keys: readonly string[], owners: Readonly<Record<string, readonly string[]>> = {}, required = false): MiddlewareHandler {
  const boundKeys = Object.entries(owners);
  return async (c, next) => {
    if ((keys.length === 0 && boundKeys.length === 0 && !required) || OPEN.test(c.req.path)) return next();
    const h = c.req.header('authorization') ?? '';
    const token = h.startsWith('Bearer ') ? h.slice(7) : (c.req.header('x-api-key') ?? '');
    if (token && keys.some((k) => same(k, token))) return next();
    const hit = token ? boundKeys.find(([k]) => same(k, token)) : undefined;
    if (!hit) throw new AuthError('unauthorized', 'missing or invalid API key');
    bound.set(c.req.raw, hit[1]);
    return next();
  };
}
