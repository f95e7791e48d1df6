/**
 * Optional bearer-token auth: with keys configured, requests need
 * `Authorization: Bearer <key>` (or `x-api-key`). Health, docs and metrics
 * stay open so probes and scrapers work without secrets.
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

export function bearerAuth(keys: readonly string[]): MiddlewareHandler {
  return async (c, next) => {
    if (keys.length === 0 || OPEN.test(c.req.path)) return next();
    const h = c.req.header('authorization') ?? '';
    const token = h.startsWith('Bearer ') ? h.slice(7) : (c.req.header('x-api-key') ?? '');
    if (!token || !keys.some((k) => same(k, token))) throw new AuthError('unauthorized', 'missing or invalid API key');
    return next();
  };
}
