/**
 * The encoder routes of the inference app: POST /embed, /classify and /rerank,
 * served by encoder readers (embedding models, classifiers, cross-encoders;
 * see server/readers/open_encoder.ts). Each request runs as one call on the
 * least-loaded reader of its group of the right type (Service.runEncoder);
 * the reader's dynamic batcher merges concurrent requests into common GPU
 * batches. A group of another type is 400 `wrong_reader_type`.
 *
 * Every text (each pair member, the query, each document) is bounded by
 * max_prompt_string_bytes (413 prompt_too_large); responses carry
 * x-request-id, usable with POST /cancel/{request_id}.
 */
import type { Hono } from 'hono';
import { PayloadTooLargeError } from '../../core/errors.ts';
import { type ApiSpec, parseBody } from '../http/api_spec.ts';
import * as E from '../http/encoder_schemas.ts';
import type { Service } from '../service.ts';

/** Refuses any text over max_prompt_string_bytes. */
export function checkTextBytes(svc: Service, texts: readonly string[], field: string): void {
  const limit = svc.config.maxPromptStringBytes;
  for (const [i, t] of texts.entries()) {
    // UTF-8 is at most 3 bytes per UTF-16 unit: only long texts need counting.
    if (t.length * 3 <= limit) continue;
    const bytes = Buffer.byteLength(t);
    if (bytes > limit) {
      throw new PayloadTooLargeError('prompt_too_large', `${field} ${i} is ${bytes} bytes; the limit is ${limit} (WEFT_MAX_PROMPT_STRING_BYTES)`, { limit, bytes, field, index: i });
    }
  }
}

export function encoderRoutes(app: Hono, spec: ApiSpec, svc: Service, maxBody: number): void {
  spec.add({ method: 'post', path: '/embed', summary: 'Embed a text or a list of texts (embedding readers)', body: E.EmbedBody, response: E.EmbedResponse });
  app.post('/embed', async (c) => {
    const body = await parseBody(c, E.EmbedBody, maxBody);
    const texts = typeof body.text === 'string' ? [body.text] : body.text;
    checkTextBytes(svc, texts, 'text');
    const id = svc.newRequestId();
    c.header('x-request-id', id);
    const opts = body.normalize !== undefined ? { normalize: body.normalize } : {};
    const r = await svc.runEncoder(body.consumer_group, { types: ['embed'], what: '/embed' }, texts, c.req.raw.signal, (api, signal) => api.embed(texts, { ...opts, signal }), id);
    const usage = { prompt_tokens: r.tokens.reduce((a, b) => a + b, 0) };
    if (typeof body.text === 'string') return c.json({ result: r.vectors[0]!, dims: r.dims, truncated: r.truncated[0]!, usage });
    return c.json({ result: r.vectors, dims: r.dims, truncated: r.truncated, usage });
  });

  spec.add({ method: 'post', path: '/classify', summary: 'Classify texts or [text, text] pairs (classifier / cross-encoder readers)', body: E.ClassifyBody, response: E.ClassifyResponse });
  app.post('/classify', async (c) => {
    const body = await parseBody(c, E.ClassifyBody, maxBody);
    const inputs = typeof body.text === 'string' ? [body.text] : body.text;
    const texts = inputs.flat();
    checkTextBytes(svc, texts, 'text');
    const id = svc.newRequestId();
    c.header('x-request-id', id);
    const result = await svc.runEncoder(body.consumer_group, { types: ['classify'], what: '/classify' }, texts, c.req.raw.signal, (api, signal) => api.classify(inputs, { signal }), id);
    return c.json({ result });
  });

  spec.add({
    method: 'post',
    path: '/rerank',
    summary: 'Rank documents by relevance to a query (cross-encoder: sigmoid of its one logit; embedding reader: cosine similarity)',
    body: E.RerankBody,
    response: E.RerankResponse,
  });
  app.post('/rerank', async (c) => {
    const body = await parseBody(c, E.RerankBody, maxBody);
    checkTextBytes(svc, [body.query], 'query');
    checkTextBytes(svc, body.documents, 'documents');
    const id = svc.newRequestId();
    c.header('x-request-id', id);
    const r = await svc.runEncoder(body.consumer_group, { types: ['classify', 'embed'], what: '/rerank' }, [body.query, ...body.documents], c.req.raw.signal, (api, signal) => api.rerank(body.query, body.documents, { signal }), id);
    const results = r.ranking.slice(0, body.top_n ?? r.ranking.length).map((x) => (body.return_documents ? { ...x, document: body.documents[x.index]! } : x));
    return c.json({ results, scores: r.scores });
  });
}
