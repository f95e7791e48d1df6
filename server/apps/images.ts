/**
 * Image-to-text routes of the inference app: POST /image_generate and
 * /image_generate_stream, the shapes of /generate and /generate_stream with
 * images inline in `text` as `<image:URL>` tags. The server resolves every tag
 * into bytes (server/http/image_urls.ts) and the reader decodes, preprocesses
 * and encodes them (core/engine/image_generation.ts); a text-only reader answers
 * 400 images_not_supported. /generate keeps treating tags as plain text.
 */
import type { Hono } from 'hono';
import type { GenerateRequest } from '../../core/engine/reader_api.ts';
import { type ApiSpec, parseBody } from '../http/api_spec.ts';
import { resolvePromptImages, type ImageFetchConfig } from '../http/image_urls.ts';
import * as S from '../http/schemas.ts';
import { sseGeneration, TAKEOFF_FRAMING } from '../http/sse.ts';
import type { Service } from '../service.ts';
import { answerGenerations, toGenerateRequest } from './generation.ts';

export function imageFetchConfig(svc: Service): ImageFetchConfig {
  const c = svc.config;
  return { maxBytes: c.imageMaxBytes, maxCount: c.imageMaxCount, timeoutMs: c.imageFetchTimeoutMs, fetch: c.imageFetch, allowPrivate: c.imageFetchAllowPrivate, allowAddresses: c.imageFetchAllowAddresses };
}

/** Largest body of an image request: the prompt limit plus the inline images as base64. */
export function imageBodyLimit(svc: Service, prompts: number): number {
  const c = svc.config;
  return prompts * (c.maxPromptStringBytes + Math.ceil((c.imageMaxBytes * c.imageMaxCount * 4) / 3) + 1024) + 65536;
}

/** A reader request for one prompt with images: tags resolved, prompt limit applied to the text without them. */
export async function imageRequest(svc: Service, p: S.GenerationParamsT, text: string): Promise<GenerateRequest> {
  const { prompt, images } = await resolvePromptImages(text, imageFetchConfig(svc));
  return { ...toGenerateRequest(p, prompt, svc.config.maxPromptStringBytes), images };
}

export function imageRoutes(app: Hono, spec: ApiSpec, svc: Service): void {
  spec.add({ method: 'post', path: '/image_generate', summary: 'Generate text from a prompt with inline <image:URL> images (or a list of such prompts)', body: S.ImageGenerateBody, response: S.GenerateResponse });
  app.post('/image_generate', async (c) => {
    const body = await parseBody(c, S.ImageGenerateBody, imageBodyLimit(svc, 64));
    const prompts = typeof body.text === 'string' ? [body.text] : body.text;
    const reqs = await Promise.all(prompts.map((t) => imageRequest(svc, body, t)));
    return answerGenerations(c, svc, body.consumer_group, reqs, typeof body.text === 'string');
  });

  spec.add({ method: 'post', path: '/image_generate_stream', summary: 'Stream text generated from a prompt with inline <image:URL> images, as server-sent events', body: S.ImageGenerateStreamBody, stream: true });
  app.post('/image_generate_stream', async (c) => {
    const body = await parseBody(c, S.ImageGenerateStreamBody, imageBodyLimit(svc, 1));
    const req = await imageRequest(svc, body, body.text);
    return sseGeneration(c, svc, body.consumer_group, { ...req, id: svc.newRequestId() }, TAKEOFF_FRAMING);
  });
}
