/**
 * Image-to-text over real HTTP on loopback: the service runs the tiny LLaVA
 * fixture (group `primary`, reader in a worker thread) and stories260K (group
 * `text`, text-only). A second loopback server serves the fixture images, a 404,
 * an oversize body, a redirect and a request that never answers, for the URL
 * fetcher (image_fetch_allow_private on, as loopback needs).
 *
 * Checked: POST /image_generate with two inline data-URL images gives the golden
 * greedy text of scripts/golden/make_llava.py (41 prompt tokens); an http URL in
 * place of a data URL gives the same; /image_generate_stream streams the same
 * tokens as SSE frames; a list of prompts; OpenAI chat with image_url parts; bad
 * input gets 400 with stable codes (invalid_image, invalid_image_url,
 * image_fetch_failed for a 404, a timeout and an oversized answer, image_too_large (inline), too_many_images,
 * image_count_mismatch does not arise through HTTP, images_not_supported on the
 * text group, image_url_forbidden without the private flag); /generate treats
 * tags as plain text; the OpenAPI document lists both routes.
 */
import { createServer, type Server } from 'node:http';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { serve, type ServerType } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolvePromptImages } from '../../server/http/image_urls.ts';
import { loadTokenizerFromSource } from '../../core/tokenizer/tokenizer.ts';
import { dirSource } from '../../server/fs_source.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { parseSse, startTestService, type TestService } from './helpers.ts';

const DIR = fileURLToPath(new URL('../fixtures/decoders/llava_tiny', import.meta.url));
const golden = JSON.parse(readFileSync(`${DIR}/golden.json`, 'utf8')) as { prompt_text: string; greedy: number[]; expanded_ids: number[]; images: string[] };
const bytes = (n: string): Buffer => readFileSync(`${DIR}/${n}`);
const dataUrl = (n: string): string => `data:image/png;base64,${bytes(n).toString('base64')}`;
const promptWith = (urls: string[]): string => {
  let k = 0;
  return golden.prompt_text.replace(/<image>/g, () => `<image:${urls[k++]}>`);
};
const GREEDY = { max_new_tokens: 8, sampling_temperature: 0 };

let t: TestService;
let server: ServerType;
let images: Server;
let base = '';
let img = '';
let expected = '';
const sockets = new Set<import('node:net').Socket>();

beforeAll(async () => {
  images = createServer((req, res) => {
    if (req.url === '/b.png') return void res.writeHead(200, { 'content-type': 'image/png' }).end(bytes('image_b.png'));
    if (req.url === '/moved') return void res.writeHead(302, { location: '/b.png' }).end();
    if (req.url === '/huge') {
      res.writeHead(200, { 'content-type': 'image/png' }); // no content-length: the limit applies while streaming
      res.write(Buffer.alloc(150_000));
      res.end(Buffer.alloc(150_000));
      return;
    }
    if (req.url === '/hang') return; // never answers
    res.writeHead(404).end('no');
  });
  images.on('connection', (s) => (sockets.add(s), s.on('close', () => sockets.delete(s))));
  await new Promise<void>((r) => images.listen(0, '127.0.0.1', r));
  const ia = images.address();
  img = `http://127.0.0.1:${typeof ia === 'object' && ia ? ia.port : 0}`;
  t = await startTestService({
    model: DIR,
    readers: [{ model: DEFAULT_MODEL_DIR, consumer_group: 'text', reader_id: 'text-0' }],
    imageFetchAllowPrivate: true,
    imageMaxBytes: 200_000,
    imageMaxCount: 3,
    imageFetchTimeoutMs: 1500,
  });
  server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: t.apps.inference.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  const addr = server.address();
  base = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  const tok = await loadTokenizerFromSource(dirSource(DIR));
  expected = tok.decode(golden.greedy, { skipSpecialTokens: true });
}, 180_000);

afterAll(async () => {
  await new Promise<void>((r) => server?.close(() => r()));
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => images?.close(() => r()));
  await t?.svc.close();
});

const post = (path: string, body: unknown): Promise<Response> => fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

async function errorOf(res: Response): Promise<{ status: number; code: string; message: string }> {
  const b = (await res.json()) as { error: { code: string; message: string } };
  return { status: res.status, code: b.error.code, message: b.error.message };
}

describe('image-to-text over HTTP', () => {
  it('/image_generate with two inline data-URL images gives the golden greedy text', async () => {
    const res = await post('/image_generate', { text: promptWith(golden.images.map(dataUrl)), ...GREEDY });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBeTruthy();
    const b = (await res.json()) as { text: string; usage: { prompt_tokens: number; completion_tokens: number } };
    expect(b.text).toBe(expected);
    expect(b.usage).toMatchObject({ prompt_tokens: golden.expanded_ids.length, completion_tokens: 8 });
  }, 60_000);

  it('an http(s) URL (fetched, through a redirect) gives the same text; a list of prompts too', async () => {
    const res = await post('/image_generate', { text: [promptWith([dataUrl('image_a.png'), `${img}/moved`]), promptWith([dataUrl('image_a.png'), `${img}/b.png`])], ...GREEDY });
    expect(res.status).toBe(200);
    const b = (await res.json()) as { text: string[] };
    expect(b.text).toEqual([expected, expected]);
  }, 60_000);

  it('/image_generate_stream streams the tokens as SSE', async () => {
    const res = await post('/image_generate_stream', { text: promptWith(golden.images.map(dataUrl)), ...GREEDY });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const events = parseSse(await res.text()).filter((e) => e.event === 'message');
    expect(events).toHaveLength(8);
    const frames = events.map((e) => JSON.parse(e.data) as { text: string; token_id: number });
    expect(frames.map((f) => f.token_id)).toEqual(golden.greedy);
    expect(frames.map((f) => f.text).join('')).toBe(expected);
  }, 60_000);

  it('OpenAI chat completions accept image_url content parts', async () => {
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'primary',
        max_tokens: 4,
        temperature: 0,
        messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in ' }, { type: 'image_url', image_url: { url: dataUrl('image_a.png') } }, { type: 'text', text: ' and ' }, { type: 'image_url', image_url: { url: `${img}/b.png` } }] }],
      }),
    });
    expect(res.status).toBe(200);
    const b = (await res.json()) as { choices: { message: { content: string } }[]; usage: { prompt_tokens: number; completion_tokens: number } };
    expect(b.usage.completion_tokens).toBeGreaterThan(0);
    expect(b.usage.prompt_tokens).toBeGreaterThan(32); // two images of 16 placeholders each
    const bad = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'primary', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] }),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string; param: string } }).error).toMatchObject({ code: 'invalid_image_url', param: 'messages.0.content.0' });
  }, 60_000);

  it('bad images and URLs are 400 with stable codes, and the server keeps serving', async () => {
    const cases: [string, string][] = [
      ['<image:data:image/png;base64,aGVsbG8gd29ybGQ=> hi', 'invalid_image'],
      ['<image:data:image/png;base64,@@@> hi', 'invalid_image_url'],
      ['<image:ftp://example.com/x.png> hi', 'invalid_image_url'],
      [`<image:${img}/missing.png> hi`, 'image_fetch_failed'],
      [`<image:${img}/huge> hi`, 'image_fetch_failed'],
      [`<image:${img}/hang> hi`, 'image_fetch_failed'],
      [`<image:data:image/png;base64,${Buffer.alloc(210_000).toString('base64')}> hi`, 'image_too_large'],
      [promptWith([dataUrl('image_a.png'), dataUrl('image_b.png')]) + ' <image:#0> <image:#1>', 'too_many_images'],
      [`${golden.prompt_text.replace(/<image>/, `<image:${dataUrl('image_a.png')}>`)}`, 'image_token_in_text'],
    ];
    for (const [text, code] of cases) {
      const e = await errorOf(await post('/image_generate', { text, max_new_tokens: 2 }));
      expect({ text: text.slice(0, 40), ...e, message: '' }).toEqual({ text: text.slice(0, 40), status: 400, code, message: '' });
    }
    const s = await errorOf(await post('/image_generate_stream', { text: '<image:data:image/jpeg;base64,/9j/4AAQ> hi', max_new_tokens: 2 }));
    expect(s).toMatchObject({ status: 400, code: 'invalid_image' });
    const res = await post('/image_generate', { text: promptWith(golden.images.map(dataUrl)), ...GREEDY });
    expect(((await res.json()) as { text: string }).text).toBe(expected);
  }, 60_000);

  it('a text-only group answers images_not_supported; /generate keeps tags as text', async () => {
    const e = await errorOf(await post('/image_generate', { text: `look: <image:${dataUrl('image_a.png')}>`, consumer_group: 'text', max_new_tokens: 2 }));
    expect(e).toMatchObject({ status: 400, code: 'images_not_supported' });
    const g = await post('/generate', { text: 'Once upon a <image:x> time', consumer_group: 'text', max_new_tokens: 2 });
    expect(g.status).toBe(200);
  }, 60_000);

  it('refuses loopback URLs unless allowed, and documents both routes', async () => {
    const cfg = { maxBytes: 1e6, maxCount: 4, timeoutMs: 1000, fetch: true, allowPrivate: false };
    await expect(resolvePromptImages(`a <image:${img}/b.png>`, cfg)).rejects.toMatchObject({ code: 'image_url_forbidden' });
    await expect(resolvePromptImages(`a <image:http://[::1]:9/x.png>`, cfg)).rejects.toMatchObject({ code: 'image_url_forbidden' });
    await expect(resolvePromptImages(`a <image:${img}/b.png>`, { ...cfg, fetch: false })).rejects.toMatchObject({ code: 'image_fetch_disabled' });
    const ok = await resolvePromptImages(`a <image:${img}/b.png> b <image:${dataUrl('image_a.png')}>`, { ...cfg, allowPrivate: true });
    expect(ok.prompt).toBe('a <image:#0> b <image:#1>');
    expect(Buffer.from(ok.images[0]!).equals(bytes('image_b.png'))).toBe(true);
    const doc = (await (await fetch(`${base}/openapi.json`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/image_generate', '/image_generate_stream']));
  });
});
