/**
 * Document-loading routes on the inference app (service-interface §4.1):
 *
 *   POST   /api/v1/documents            load files → 202 (all accepted) / 207
 *   GET    /api/v1/document/{doc_id}    the record: state, error, counts, timestamps
 *   DELETE /api/v1/document/{doc_id}    remove a document and its chunks
 *   POST   /api/v1/documents/search     nearest chunks with their documents
 *   GET    /api/v1/documents/status     documents per state, pool totals
 *
 * Owners: the caller's identity is the `x-weft-owner` header. With API keys
 * configured (auth on), a caller sees documents without owners and those it
 * owns; without a header, only those without owners. With auth off, the
 * header (when sent) is applied the same way, and without it every document
 * is visible (single-user setups). Documents a caller may not see answer 404.
 * A key bound to owners (api_key_owners) acts as all of them; the header
 * narrows to one of them (another answers 403 owner_not_permitted), and such
 * a key stores only documents it can see.
 *
 * Mounted by `mountDocuments(app, svc, spec)` from server/apps/index.ts; auth
 * is the inference app's (applied around it by buildApps).
 */
import type { Context, Hono } from 'hono';
import { z } from 'zod';
import { isStorableText, parseOwners } from '../../core/documents/intake.ts';
import type { Viewer } from '../../core/documents/types.ts';
import { ForbiddenError, InvalidRequestError } from '../../core/errors.ts';
import { loadDocumentsConfig, type DocumentsConfigSources } from '../documents/config.ts';
import * as S from '../documents/schemas.ts';
import { DocumentService, hitJson, recordJson, type DocumentServiceOptions } from '../documents/service.ts';
import { parseBody, type ApiSpec } from '../http/api_spec.ts';
import { keyOwners } from '../http/auth.ts';
import type { Service } from '../service.ts';

export const OWNER_HEADER = 'x-weft-owner';

export interface MountOptions extends Partial<Omit<DocumentServiceOptions, 'config' | 'log'>> {
  /** Config overrides (tests); the rest comes from config.yaml `documents:` and WEFT_DOCUMENTS_* / WEFT_DATA_DIR. */
  config?: DocumentsConfigSources['overrides'];
  env?: Record<string, string | undefined>;
  /** Start the service now (default: only when an on-disk store exists; else at the first request). */
  eager?: boolean;
}

function viewerOf(c: Context, authOn: boolean): Viewer {
  const h = c.req.header(OWNER_HEADER);
  const owner = h?.trim() ? h.trim() : null;
  if (owner !== null && (owner.length > 256 || !isStorableText(owner))) throw new InvalidRequestError('invalid_owner', `${OWNER_HEADER}: at most 256 characters, no control characters`, { field: OWNER_HEADER });
  const allowed = keyOwners(c.req.raw);
  if (allowed) {
    if (owner === null) return { owners: allowed, enforce: true, bound: true };
    if (!allowed.includes(owner)) throw new ForbiddenError('owner_not_permitted', `this API key may not act as owner ${JSON.stringify(owner)}`, { field: OWNER_HEADER });
    return { owners: [owner], enforce: true, bound: true };
  }
  return { owners: owner === null ? [] : [owner], enforce: authOn || owner !== null };
}

function listOrNull(v: string | string[] | undefined, field: string): string[] | null {
  if (v === undefined) return null;
  const list = parseOwners(v);
  if (!list?.length) throw new InvalidRequestError('invalid_request', `${field}: expected a non-empty string or list of strings without control characters`, { field });
  return list;
}

/** Adds the document routes to `app` and returns the service behind them (closed with `svc.close()`). */
export function mountDocuments(app: Hono, svc: Service, spec?: ApiSpec, opts: MountOptions = {}): DocumentService {
  const { config: overrides, env, eager, ...rest } = opts;
  const fileSection = (svc.config as unknown as { documents?: unknown }).documents;
  const config = loadDocumentsConfig({ file: fileSection, ...(env ? { env } : {}), ...(overrides ? { overrides } : {}) });
  const docs = new DocumentService({ embeddingReaders: svc.embeddingReaders(), ...(svc.nats ? { nats: svc.nats.nc } : {}), ...rest, config, gpuBackend: svc.config.backend, log: (msg, fields) => svc.log(msg, fields) });
  const authOn = svc.config.apiKeys.length > 0 || Object.keys(svc.config.apiKeyOwners).length > 0;

  // Close with the service: stop the pool, close the store.
  const closeService = svc.close.bind(svc);
  svc.close = async () => {
    await docs.close();
    await closeService();
  };

  spec?.add({ method: 'post', path: '/api/v1/documents', summary: 'Load documents: read, chunk, embed and store them (202 all accepted, 207 some duplicate or invalid)', body: S.LoadBodyDoc, response: S.LoadResponse });
  app.post('/api/v1/documents', async (c) => {
    const body = await parseBody(c, z.unknown(), config.limits.maxRequestBytes);
    const r = await docs.load(body, c.req.raw.signal, viewerOf(c, authOn));
    return c.json(r.body, r.status);
  });

  spec?.add({ method: 'get', path: '/api/v1/document/{doc_id}', summary: 'A document record: state, error, counts, timestamps', response: S.DocumentRecordDoc });
  app.get('/api/v1/document/:doc_id', async (c) => c.json(recordJson(await docs.get(c.req.param('doc_id'), viewerOf(c, authOn)))));

  spec?.add({ method: 'delete', path: '/api/v1/document/{doc_id}', summary: 'Delete a document and its chunks', response: S.DocumentRecordDoc });
  app.delete('/api/v1/document/:doc_id', async (c) => c.json({ deleted: true, document: recordJson(await docs.delete(c.req.param('doc_id'), viewerOf(c, authOn))) }));

  spec?.add({ method: 'post', path: '/api/v1/documents/search', summary: 'Chunks nearest to a query, with scores and their documents', body: S.SearchBody, response: S.SearchResponse });
  app.post('/api/v1/documents/search', async (c) => {
    const b = await parseBody(c, S.SearchBody, 1 << 20);
    const hits = await docs.search({ query: b.query, topK: b.top_k ?? 5, categories: listOrNull(b.category, 'category'), owners: listOrNull(b.owners, 'owners') }, viewerOf(c, authOn));
    return c.json({ results: hits.map(hitJson) });
  });

  spec?.add({ method: 'get', path: '/api/v1/documents/status', summary: 'Documents per state and worker-pool totals' });
  app.get('/api/v1/documents/status', async (c) => c.json(await docs.status()));

  if (eager ?? docs.hasExistingStore()) void docs.ready().catch(() => undefined); // logged by ready()
  return docs;
}
