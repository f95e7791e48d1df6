/**
 * The inference app over real HTTP on loopback: SSE framing as a client sees
 * it, and a client that disconnects mid-stream cancels its request (its KV
 * blocks return to the pool).
 */
import { serve, type ServerType } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSse, startTestService, type TestService } from './helpers.ts';

let t: TestService;
let server: ServerType;
let base = '';

beforeAll(async () => {
  t = await startTestService();
  server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: t.apps.inference.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  const addr = server.address();
  base = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
});
afterAll(async () => {
  await new Promise<void>((r) => server?.close(() => r()));
  await t?.svc.close();
});

const json = (body: unknown): RequestInit => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

async function kvFree(): Promise<number> {
  const s = (await (await fetch(`${base}/status`)).json()) as { groups: { primary: { stats: { kvBlocksFree: number } }[] } };
  return s.groups.primary[0]!.stats.kvBlocksFree;
}

describe('inference over HTTP', () => {
  it('streams SSE frames as they are generated', async () => {
    // 64 tokens (greedy stories260K makes no EOS before them): with prefill in megakernel waves
    // 12 tokens took ~15 ms, short enough for the whole stream to land in one read now and then.
    const res = await fetch(`${base}/generate_stream`, json({ text: 'Once upon a time', max_new_tokens: 64 }));
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    expect(res.headers.get('x-request-id')).toBeTruthy();
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    let chunks = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks++;
      text += decoder.decode(value, { stream: true });
    }
    const events = parseSse(text);
    expect(events.filter((e) => e.event === 'message')).toHaveLength(64);
    expect(events.at(-1)!.event).toBe('done');
    expect(chunks).toBeGreaterThan(1); // delivered incrementally, not as one body
  });

  it('a client that disconnects cancels its request and frees its blocks', async () => {
    const free0 = await kvFree();
    const ac = new AbortController();
    const res = await fetch(`${base}/generate_stream`, { ...json({ text: 'Once upon a time', max_new_tokens: 450 }), signal: ac.signal });
    const reader = res.body!.getReader();
    await reader.read();
    await reader.read();
    ac.abort();
    // The engine notices at its next step; give it a moment, then check the pool and the registry.
    for (let i = 0; i < 50 && (t.svc.reservedBytes > 0 || (await kvFree()) !== free0); i++) await new Promise((r) => setTimeout(r, 100));
    expect(t.svc.reservedBytes).toBe(0);
    expect(await kvFree()).toBe(free0);
    const m = await (await fetch(`${base}/metrics`)).text();
    expect(m).toMatch(/weft_requests_total\{model="[^"]*",consumer_group="primary"\} \d+/);
  });

  it('a non-streaming client that disconnects cancels too', async () => {
    const ac = new AbortController();
    const p = fetch(`${base}/generate`, { ...json({ text: 'Once upon a time', max_new_tokens: 450 }), signal: ac.signal }).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 300));
    ac.abort();
    await p;
    for (let i = 0; i < 50 && t.svc.reservedBytes > 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(t.svc.reservedBytes).toBe(0);
  });
});
