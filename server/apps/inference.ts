/**
 * The inference app (port 3000): generate, generate_stream (SSE), tokenize,
 * detokenize, chat_template, cancel, status and healthz; embed, classify and
 * rerank for encoder readers (encoders.ts); image_generate and
 * image_generate_stream for image-to-text readers (images.ts).
 *
 * Every response carries `x-request-id`; `POST /cancel/{request_id}` stops
 * that request at the engine's next step, and so does a client that
 * disconnects. Streams start only after the reader accepted the request, so
 * validation errors are JSON errors with a status, never a broken stream.
 */
import { Hono } from 'hono';
import { PayloadTooLargeError } from '../../core/errors.ts';
import { ApiSpec, parseBody } from '../http/api_spec.ts';
import { sseGeneration, TAKEOFF_FRAMING } from '../http/sse.ts';
import * as S from '../http/schemas.ts';
import type { Service } from '../service.ts';
import { encoderRoutes } from './encoders.ts';
import { imageRoutes } from './images.ts';
import { answerGenerations, toGenerateRequest } from './generation.ts';
import { healthz } from './health.ts';

export function inferenceApp(svc: Service): { app: Hono; spec: ApiSpec } {
  const app = new Hono();
  const spec = new ApiSpec('Weft inference API', 'Text generation, embeddings, classification, reranking, tokenization and request control.', svc.version);
  const maxBody = Math.max(svc.config.maxPromptStringBytes * 64 + 65536, 1 << 20);

  spec.add({ method: 'post', path: '/generate', summary: 'Generate text for one prompt or a list of prompts', body: S.GenerateBody, response: S.GenerateResponse });
  app.post('/generate', async (c) => {
    const body = await parseBody(c, S.GenerateBody, maxBody);
    const prompts = typeof body.text === 'string' ? [body.text] : body.text;
    const reqs = prompts.map((t) => toGenerateRequest(body, t, svc.config.maxPromptStringBytes));
    return answerGenerations(c, svc, body.consumer_group, reqs, typeof body.text === 'string');
  });

  spec.add({ method: 'post', path: '/generate_stream', summary: 'Stream generated text as server-sent events', body: S.GenerateStreamBody, stream: true });
  app.post('/generate_stream', async (c) => {
    const body = await parseBody(c, S.GenerateStreamBody, maxBody);
    const req = toGenerateRequest(body, body.text, svc.config.maxPromptStringBytes);
    return sseGeneration(c, svc, body.consumer_group, { ...req, id: svc.newRequestId() }, TAKEOFF_FRAMING);
  });

  spec.add({ method: 'post', path: '/tokenize/{reader_id}', summary: 'Tokenize text with a live reader', body: S.TokenizeBody, response: S.TokenizeResponse });
  app.post('/tokenize/:reader_id', async (c) => {
    const body = await parseBody(c, S.TokenizeBody, maxBody);
    const bytes = Buffer.byteLength(body.text, 'utf8');
    if (bytes > svc.config.maxTokenizeBytes) {
      // Tokenizing runs on the reader's thread, between generation steps: a bounded input keeps the stall bounded.
      throw new PayloadTooLargeError('input_too_large', `the text is ${bytes} bytes; the limit is ${svc.config.maxTokenizeBytes} (WEFT_MAX_TOKENIZE_BYTES)`, { limit: svc.config.maxTokenizeBytes, bytes });
    }
    const r = await svc.readers.api(c.req.param('reader_id')).tokenize(body.text, { addSpecialTokens: body.add_special_tokens ?? true });
    return c.json({ tokens: r.ids, token_strings: r.tokens });
  });

  spec.add({ method: 'post', path: '/detokenize/{reader_id}', summary: 'Turn token ids back into text', body: S.DetokenizeBody, response: S.DetokenizeResponse });
  app.post('/detokenize/:reader_id', async (c) => {
    const body = await parseBody(c, S.DetokenizeBody, maxBody);
    const text = await svc.readers.api(c.req.param('reader_id')).detokenize(body.tokens, { skipSpecialTokens: body.skip_special_tokens ?? false });
    return c.json({ text });
  });

  spec.add({ method: 'post', path: '/chat_template/{reader_id}', summary: "Render chat messages with the reader's chat template", body: S.ChatTemplateBody, response: S.ChatTemplateResponse });
  app.post('/chat_template/:reader_id', async (c) => {
    const body = await parseBody(c, S.ChatTemplateBody, maxBody);
    const text = await svc.readers.api(c.req.param('reader_id')).chatTemplate(body.messages as never, {
      addGenerationPrompt: body.add_generation_prompt ?? true,
      ...(body.tools ? { tools: body.tools } : {}),
    });
    return c.json({ text });
  });

  encoderRoutes(app, spec, svc, maxBody);
  imageRoutes(app, spec, svc);

  spec.add({ method: 'post', path: '/cancel/{request_id}', summary: 'Cancel a request by the id from its x-request-id header', response: S.CancelResponse });
  app.post('/cancel/:request_id', async (c) => {
    const id = c.req.param('request_id');
    return c.json({ request_id: id, cancelled: await svc.cancel(id) });
  });

  spec.add({ method: 'get', path: '/status', summary: 'Readers, groups and engine statistics' });
  app.get('/status', async (c) => c.json(await svc.status()));

  spec.add({ method: 'get', path: '/healthz', summary: '200 when every reader is ready, else 503', query: { wait: 'seconds to wait for readiness (max health_wait_max)' } });
  app.get('/healthz', (c) => healthz(c, svc));

  spec.mountDocs(app);
  return { app, spec };
}
