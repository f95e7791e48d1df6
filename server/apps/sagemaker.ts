/**
 * The SageMaker-style app (`sagemaker_port`, 8080): the two routes a
 * SageMaker inference container must serve. `GET /ping` is 200 once every
 * reader is ready (503 while loading, so SageMaker waits); `POST /invocations`
 * takes the /generate body and answers like /generate, or streams exactly
 * like /generate_stream when the request sends `Accept: text/event-stream`
 * or `?stream=true` (what SageMaker's InvokeEndpointWithResponseStream
 * forwards). A body with `inputs` is Hugging Face TGI's instead (tgi.ts),
 * answered in TGI's shapes, so clients of the HF LLM containers work as they
 * are. Errors are the service's typed JSON errors.
 */
import { Hono, type Context } from 'hono';
import { z } from 'zod';
import { InvalidRequestError } from '../../core/errors.ts';
import { ApiSpec, readJsonBody, validateBody } from '../http/api_spec.ts';
import { sseGeneration, TAKEOFF_FRAMING } from '../http/sse.ts';
import * as S from '../http/schemas.ts';
import type { Service } from '../service.ts';
import { answerGenerations, runGenerations, toGenerateRequest } from './generation.ts';
import { isTgiBody, TgiBody, tgiDetails, tgiFraming, TgiResponse, tgiToNative, type TgiBodyT } from './tgi.ts';

const Ping = z.object({ status: z.enum(['ok', 'loading']) });

/** True when the request asks for a stream: `Accept: text/event-stream` or `?stream=true|1`. */
export function wantsStream(c: Context): boolean {
  const q = c.req.query('stream');
  return (c.req.header('accept') ?? '').includes('text/event-stream') || q === 'true' || q === '1';
}

/** The /generate_stream framing: `data: {text, token_id}` per token, then `event: done` (or `event: error`). */
async function streamGeneration(c: Context, svc: Service, body: z.output<typeof S.GenerateBody>): Promise<Response> {
  if (typeof body.text !== 'string') throw new InvalidRequestError('invalid_request', 'text: a stream takes a single prompt string', { field: 'text' });
  const req = toGenerateRequest(body, body.text, svc.config.maxPromptStringBytes);
  return sseGeneration(c, svc, body.consumer_group, { ...req, id: svc.newRequestId() }, TAKEOFF_FRAMING);
}

/** A TGI-shaped invocation (server/apps/tgi.ts), served on the default consumer group. */
async function tgiInvocation(c: Context, svc: Service, body: TgiBodyT): Promise<Response> {
  const params = tgiToNative(body.parameters);
  const prefix = (prompt: string): string => (body.parameters?.return_full_text ? prompt : '');
  const details = body.parameters?.details === true;
  const seed = body.parameters?.seed;
  if (body.stream === true || wantsStream(c)) {
    if (typeof body.inputs !== 'string') throw new InvalidRequestError('invalid_request', 'inputs: a stream takes a single prompt string', { field: 'inputs' });
    const req = toGenerateRequest(params, body.inputs, svc.config.maxPromptStringBytes);
    return sseGeneration(c, svc, undefined, { ...req, id: svc.newRequestId() }, tgiFraming(prefix(body.inputs), seed, details));
  }
  const prompts = typeof body.inputs === 'string' ? [body.inputs] : body.inputs;
  const ds = await runGenerations(c, svc, undefined, prompts.map((t) => toGenerateRequest(params, t, svc.config.maxPromptStringBytes)));
  return c.json(ds.map((d, i) => ({ generated_text: prefix(prompts[i]!) + d.text, ...(details ? { details: tgiDetails(d, seed) } : {}) })));
}

export function sagemakerApp(svc: Service): { app: Hono; spec: ApiSpec } {
  const app = new Hono();
  const spec = new ApiSpec('Weft SageMaker-style API', 'The SageMaker inference-container contract: /ping and /invocations.', svc.version);
  const maxBody = Math.max(svc.config.maxPromptStringBytes * 64 + 65536, 1 << 20);

  spec.add({ method: 'get', path: '/ping', summary: '200 when every reader is ready, else 503 (SageMaker health check)', response: Ping });
  app.get('/ping', (c) => (svc.readers.allReady ? c.json({ status: 'ok' }, 200) : c.json({ status: 'loading' }, 503)));

  spec.add({
    method: 'post',
    path: '/invocations',
    summary:
      'The /generate body: JSON like /generate, or SSE like /generate_stream with Accept: text/event-stream or ?stream=true. ' +
      'Or Hugging Face TGI\'s body {inputs, parameters, stream}: [{generated_text, details?}], or TGI\'s token events with stream: true',
    body: z.union([S.GenerateBody, TgiBody]),
    response: z.union([S.GenerateResponse, TgiResponse]),
    query: { stream: 'true or 1: stream server-sent events (same as Accept: text/event-stream)' },
  });
  app.post('/invocations', async (c) => {
    const json = await readJsonBody(c, maxBody);
    if (isTgiBody(json)) return tgiInvocation(c, svc, validateBody(TgiBody, json));
    const body = validateBody(S.GenerateBody, json);
    if (wantsStream(c)) return streamGeneration(c, svc, body);
    const prompts = typeof body.text === 'string' ? [body.text] : body.text;
    return answerGenerations(c, svc, body.consumer_group, prompts.map((t) => toGenerateRequest(body, t, svc.config.maxPromptStringBytes)), typeof body.text === 'string');
  });

  spec.mountDocs(app);
  return { app, spec };
}
