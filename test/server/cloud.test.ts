/**
 * The SageMaker-style and Vertex AI-style apps with the bundled model in a
 * real worker reader: /ping and /invocations (JSON and both ways of asking
 * for a stream), Vertex health and predict on custom AIP_* routes taken from
 * the environment, auth, readiness before any reader is up, and the same
 * routes over real loopback listeners started by `start()`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApps, type Apps } from '../../server/apps/index.ts';
import { vertexPort, vertexRoutes } from '../../server/apps/vertex.ts';
import { loadConfig } from '../../server/config.ts';
import { start, type Running } from '../../server/main.ts';
import { Service } from '../../server/service.ts';
import { parseSse, post } from './helpers.ts';

const KEY = 'cloud-key';
const AIP = { AIP_HEALTH_ROUTE: '/v1/endpoints/e1/health', AIP_PREDICT_ROUTE: '/v1/endpoints/e1/deployedModels/m1:predict', AIP_DEPLOYED_MODEL_ID: 'm1' };
const saved: Record<string, string | undefined> = {};
let run: Running;
let apps: Apps;
const base = (name: string): string => `http://127.0.0.1:${run.servers.find((s) => s.name === name)!.port}`;
const auth = { authorization: `Bearer ${KEY}` };

beforeAll(async () => {
  for (const [k, v] of Object.entries(AIP)) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
  const config = loadConfig({
    env: {},
    overrides: { embeddingModel: '', host: '127.0.0.1', port: 0, managementPort: 0, openaiPort: 0, sagemakerPort: 0, vertexPort: 0, apiKeys: [KEY], backend: process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles', logDisableTimestamps: true },
  });
  run = await start(config, { ephemeral: true });
  await run.service.readers.waitSettled(60_000);
  for (const r of run.service.readers.all()) if (!r.ready) throw new Error(`reader ${r.readerId} did not load: ${JSON.stringify(r.error)}`);
  apps = buildApps(run.service);
});
afterAll(async () => {
  await run?.close();
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

type Gen = { text: string | string[]; finish_reason: string | string[]; usage: unknown };
const sm = (path: string, init?: RequestInit): Promise<Response> => Promise.resolve(apps.sagemaker.request(path, init));
const vx = (path: string, init?: RequestInit): Promise<Response> => Promise.resolve(apps.vertex.request(path, init));

describe('SageMaker-style app', () => {
  it('pings 200 when ready (no key needed) and 503 while no reader is ready', async () => {
    const ok = await sm('/ping');
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ status: 'ok' });
    const idle = buildApps(new Service(loadConfig({ env: {}, overrides: { model: '' } })));
    const loading = await idle.sagemaker.request('/ping');
    expect(loading.status).toBe(503);
    expect(await loading.json()).toEqual({ status: 'loading' });
    expect((await idle.vertex.request(AIP.AIP_HEALTH_ROUTE)).status).toBe(503);
  });

  it('answers /invocations like /generate, for one prompt or a list', async () => {
    const req = { text: 'Once upon a time', max_new_tokens: 40, stop: ['Lily'] };
    const res = await sm('/invocations', post(req, auth));
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBeTruthy();
    const body = (await res.json()) as Gen;
    expect(body).toMatchObject({ text: ', there was a little girl named ', finish_reason: 'stop', usage: { prompt_tokens: 5 } });
    const ref = (await (await apps.inference.request('/generate', post(req, auth))).json()) as Gen;
    expect(body.text).toBe(ref.text);
    const list = (await (await sm('/invocations', post({ text: ['Once upon a time', 'Tim'], max_new_tokens: 4 }, auth))).json()) as Gen;
    expect(list.text).toHaveLength(2);
    expect(list.finish_reason).toEqual(['length', 'length']);
  });

  it('streams /invocations like /generate_stream for Accept: text/event-stream and ?stream=true', async () => {
    const req = { text: 'Once upon a time', max_new_tokens: 6 };
    const ref = (await (await sm('/invocations', post(req, auth))).json()) as Gen;
    for (const [path, headers] of [['/invocations', { ...auth, accept: 'text/event-stream' }], ['/invocations?stream=true', auth]] as const) {
      const res = await sm(path, post(req, headers));
      expect(res.headers.get('content-type')).toContain('text/event-stream');
      const events = parseSse(await res.text());
      const tokens = events.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as { text: string; token_id: number });
      expect(tokens).toHaveLength(6);
      expect(tokens.map((t) => t.text).join('')).toBe(ref.text);
      expect(events.at(-1)!.event).toBe('done');
      expect(JSON.parse(events.at(-1)!.data)).toMatchObject({ finish_reason: 'length', usage: { completion_tokens: 6 } });
    }
  });

  it('takes Hugging Face TGI\'s body {inputs, parameters} and answers in TGI\'s shape', async () => {
    type Tgi = { generated_text: string; details?: { finish_reason: string; generated_tokens: number; prompt_tokens: number; seed: number | null } }[];
    const ref = (await (await sm('/invocations', post({ text: 'Once upon a time', max_new_tokens: 40, stop: ['Lily'] }, auth))).json()) as Gen;
    const res = await sm('/invocations', post({ inputs: 'Once upon a time', parameters: { max_new_tokens: 40, stop: ['Lily'], details: true } }, auth));
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBeTruthy();
    // Greedy by default (do_sample false), so the same text as the native body; TGI's finish reason name.
    expect(await res.json()).toEqual([{ generated_text: ref.text, details: { finish_reason: 'stop_sequence', generated_tokens: expect.any(Number), prompt_tokens: 5, seed: null, tokens_per_second: expect.any(Number) } }]);
    const full = (await (await sm('/invocations', post({ inputs: ['Once upon a time', 'Tim'], parameters: { max_new_tokens: 4, return_full_text: true } }, auth))).json()) as Tgi;
    expect(full).toHaveLength(2);
    expect(full[0]!.generated_text.startsWith('Once upon a time')).toBe(true);
    expect(full[1]!.generated_text.startsWith('Tim')).toBe(true);
    expect(full[0]!.details).toBeUndefined();
    // Sampling is on when TGI would sample: the same seed twice gives the same text, two seeds (almost surely) differ.
    const sampled = async (seed: number): Promise<string> =>
      ((await (await sm('/invocations', post({ inputs: 'Once upon a time', parameters: { max_new_tokens: 24, temperature: 1.5, seed } }, auth))).json()) as Tgi)[0]!.generated_text;
    const a = await sampled(7);
    expect(await sampled(7)).toBe(a);
    const texts = new Set([a, await sampled(8), await sampled(9)]);
    expect(texts.size).toBeGreaterThan(1);
    // grammar -> the native constraints.
    const re = ((await (await sm('/invocations', post({ inputs: 'Phone:', parameters: { max_new_tokens: 12, grammar: { type: 'regex', value: '[0-9]{3}-[0-9]{4}' } } }, auth))).json()) as Tgi)[0]!;
    expect(re.generated_text).toMatch(/^[0-9]{3}-[0-9]{4}$/);
    const js = ((await (await sm('/invocations', post({ inputs: 'Data:', parameters: { max_new_tokens: 40, grammar: { type: 'json', value: { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'], additionalProperties: false } } } }, auth))).json()) as Tgi)[0]!;
    expect(Object.keys(JSON.parse(js.generated_text) as object)).toEqual(['a']);
  });

  it('streams a TGI body with stream: true in TGI\'s framing, the whole text on the last event', async () => {
    const ref = (await (await sm('/invocations', post({ text: 'Once upon a time', max_new_tokens: 6 }, auth))).json()) as Gen;
    const res = await sm('/invocations', post({ inputs: 'Once upon a time', stream: true, parameters: { max_new_tokens: 6, details: true, return_full_text: true } }, auth));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    type Ev = { index: number; token: { id: number; text: string; special: boolean }; generated_text: string | null; details: { finish_reason: string; generated_tokens: number } | null };
    const events = parseSse(await res.text()).map((e) => JSON.parse(e.data) as Ev);
    expect(events.map((e) => e.index)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(events.map((e) => e.token.text).join('')).toBe(ref.text);
    expect(events.slice(0, -1).every((e) => e.generated_text === null && e.details === null)).toBe(true);
    expect(events.at(-1)!.generated_text).toBe(`Once upon a time${ref.text as string}`);
    expect(events.at(-1)!.details).toMatchObject({ finish_reason: 'length', generated_tokens: 6 });
  });

  it.each([
    ['no key', '/invocations', { text: 'a' }, {}, 401, 'unauthorized'],
    ['bad body', '/invocations', {}, auth, 400, 'invalid_request'],
    ['another API\'s field name', '/invocations', { prompt: 'a' }, auth, 400, 'unknown_field'],
    ['malformed JSON', '/invocations', '{"text":', auth, 400, 'invalid_json'],
    ['stream of a list', '/invocations?stream=true', { text: ['a', 'b'] }, auth, 400, 'invalid_request'],
    ['TGI stream of a list', '/invocations', { inputs: ['a', 'b'], stream: true }, auth, 400, 'invalid_request'],
    ['a TGI parameter Weft does not serve', '/invocations', { inputs: 'a', parameters: { best_of: 2 } }, auth, 400, 'unknown_field'],
    ['native fields in a TGI body', '/invocations', { inputs: 'a', max_new_tokens: 3 }, auth, 400, 'unknown_field'],
    ['a bad TGI grammar', '/invocations', { inputs: 'a', parameters: { grammar: { type: 'xml', value: 'a' } } }, auth, 400, 'invalid_request'],
    ['unknown group', '/invocations', { text: 'a', consumer_group: 'nope' }, auth, 404, 'consumer_group_not_found'],
  ])('rejects %s with a typed JSON error', async (_n, path, body, headers, status, code) => {
    const res = await sm(path as string, post(body, headers as Record<string, string>));
    expect(res.status).toBe(status);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe(code);
  });

  it('serves its OpenAPI docs', async () => {
    const spec = (await (await sm('/openapi.json')).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(spec.paths).sort()).toEqual(['/invocations', '/ping']);
    expect(await (await sm('/docs')).text()).toContain('swagger-ui-bundle.js');
  });
});

describe('Vertex-style app', () => {
  it('takes routes from AIP_* (else the settings) and the port from AIP_HTTP_PORT', () => {
    const cfg = loadConfig({ env: {} });
    expect(vertexRoutes(cfg, {})).toEqual({ health: '/health', predict: '/predict' });
    expect(vertexRoutes(cfg, { AIP_HEALTH_ROUTE: 'hc', AIP_PREDICT_ROUTE: '/p' })).toEqual({ health: '/hc', predict: '/p' });
    expect(vertexPort(cfg, {})).toBe(3002);
    expect(vertexPort(cfg, { AIP_HTTP_PORT: '8085' })).toBe(8085);
    expect(() => vertexPort(cfg, { AIP_HTTP_PORT: 'eighty' })).toThrow(/AIP_HTTP_PORT/);
  });

  it('serves health on the custom route without a key, and nothing on the defaults', async () => {
    const h = await vx(AIP.AIP_HEALTH_ROUTE);
    expect(h.status).toBe(200);
    expect(await h.json()).toEqual({ status: 'ok' });
    expect((await vx('/predict', post({ instances: ['a'] }, auth))).status).toBe(404);
  });

  it('predicts each instance, instance fields overriding parameters', async () => {
    const res = await vx(AIP.AIP_PREDICT_ROUTE, post({ instances: [{ text: 'Once upon a time', stop: ['Lily'] }, 'Once upon a time'], parameters: { max_new_tokens: 40, stop: ['girl'] } }, auth));
    expect(res.status).toBe(200);
    const body = (await res.json()) as { predictions: { text: string; finish_reason: string; usage: { prompt_tokens: number } }[]; deployedModelId: string };
    expect(body.deployedModelId).toBe('m1');
    expect(body.predictions.map((p) => [p.text, p.finish_reason])).toEqual([
      [', there was a little girl named ', 'stop'],
      [', there was a little ', 'stop'],
    ]);
    expect(body.predictions[0]!.usage.prompt_tokens).toBe(5);
  });

  it.each([
    ['no key', { instances: ['a'] }, {}, 401, 'unauthorized'],
    ['no instances', { instances: [] }, auth, 400, 'invalid_request'],
    ['bad parameter', { instances: ['a'], parameters: { max_new_tokens: 0 } }, auth, 400, 'invalid_request'],
    ['unknown instance field', { instances: ['a', { text: 'b', temperature: 0.5 }] }, auth, 400, 'unknown_field'],
    ['unknown parameter', { instances: ['a'], parameters: { max_tokens: 3 } }, auth, 400, 'unknown_field'],
  ])('rejects %s with a typed JSON error', async (_n, body, headers, status, code) => {
    const res = await vx(AIP.AIP_PREDICT_ROUTE, post(body, headers as Record<string, string>));
    expect(res.status).toBe(status);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe(code);
  });

  it('documents the custom routes', async () => {
    const spec = (await (await vx('/openapi.json')).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(spec.paths).sort()).toEqual([AIP.AIP_PREDICT_ROUTE, AIP.AIP_HEALTH_ROUTE].sort());
  });
});

describe('cloud apps over HTTP', () => {
  it('serve ping, streaming invocations, health and predict on their own listeners', async () => {
    expect((await fetch(`${base('sagemaker')}/ping`)).status).toBe(200);
    const res = await fetch(`${base('sagemaker')}/invocations`, post({ text: 'Once upon a time', max_new_tokens: 5 }, { ...auth, accept: 'text/event-stream' }));
    const raw = await res.text();
    expect(raw).toMatch(/^data: \{"text":/);
    expect(raw).toMatch(/event: done\ndata: \{"finish_reason":"length"/);
    expect((await fetch(`${base('vertex')}${AIP.AIP_HEALTH_ROUTE}`)).status).toBe(200);
    const p = await fetch(`${base('vertex')}${AIP.AIP_PREDICT_ROUTE}`, post({ instances: [{ text: 'Tim' }], parameters: { max_new_tokens: 3 } }, auth));
    expect(((await p.json()) as { predictions: { usage: { completion_tokens: number } }[] }).predictions[0]!.usage.completion_tokens).toBe(3);
  });
});
