/**
 * Health that tells the truth: a reader whose thread is held by one long
 * piece of work (here a large /tokenize, allowed by a raised
 * `max_tokenize_bytes`, on the reader's own thread: `tokenize_worker: false`) while other work waits on it is reported unhealthy by
 * /healthz once `reader_stall_millis` passes, and /status and /metrics answer
 * promptly from what is known (the reader marked unresponsive) instead of
 * waiting on it. Once the work finishes the reader is healthy again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveLoopback, startTestService, type TestService } from './helpers.ts';

let t: TestService;
let http: { base: string; close: () => Promise<void> };
beforeAll(async () => {
  t = await startTestService({ readerStallMillis: 1000, maxTokenizeBytes: 8 * 1024 * 1024, tokenizeWorker: false });
  http = await serveLoopback(t.apps.inference);
});
afterAll(async () => {
  await http?.close();
  await t?.svc.close();
});

async function timed(path: string): Promise<{ status: number; ms: number; body: string }> {
  const t0 = performance.now();
  const r = await fetch(`${http.base}${path}`);
  const body = await r.text();
  return { status: r.status, ms: performance.now() - t0, body };
}

describe('reader health', () => {
  it('a reader held by long work is unhealthy; status and metrics do not wait on it', async () => {
    expect((await timed('/healthz')).status).toBe(200);
    const readerId = t.svc.readers.all().find((r) => r.info?.type === 'generate')!.readerId;
    const text = 'Once upon a time there was a cat who liked to sleep. '.repeat(28_000); // ~1.5 MB: several seconds of tokenizing even on a fast host
    const t0 = performance.now();
    const tokenize = fetch(`${http.base}/tokenize/${readerId}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text }) });
    // A generation queued behind the held thread: work that waits.
    const waiting = fetch(`${http.base}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: 'Hi', max_new_tokens: 4 }) });

    // A 503 from /healthz, then /status, both while the tokenize still holds the reader (a
    // snapshot taken after it let go proves nothing, so that case loops again).
    let unhealthy: { status: number; ms: number; body: string } | null = null;
    let status: { status: number; ms: number; body: string } | null = null;
    let metrics: { status: number; ms: number; body: string } | null = null;
    let tokenizeDone = false;
    void tokenize.then(() => (tokenizeDone = true));
    while (!tokenizeDone && performance.now() - t0 < 150_000) {
      const h = await timed('/healthz');
      expect(h.ms).toBeLessThan(3000); // never waits on the busy reader
      if (h.status === 503) {
        const [s, m] = await Promise.all([timed('/status'), timed('/metrics')]);
        if (!tokenizeDone) {
          unhealthy = h;
          status = s;
          metrics = m;
          break;
        }
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(unhealthy, 'healthz never reported the held reader').not.toBeNull();
    const hb = JSON.parse(unhealthy!.body) as { status: string; readers: Array<{ reader_id: string; stalled_ms?: number }> };
    expect(hb.status).toBe('unhealthy');
    expect(hb.readers.find((r) => r.reader_id === readerId)?.stalled_ms).toBeGreaterThan(1000);

    expect(status!.status).toBe(200);
    expect(status!.ms).toBeLessThan(3000);
    const reader = Object.values((JSON.parse(status!.body) as { groups: Record<string, Array<{ reader_id: string; responsive?: boolean; healthy?: boolean }>> }).groups)
      .flat()
      .find((r) => r.reader_id === readerId);
    expect(reader).toMatchObject({ responsive: false, healthy: false });
    expect(metrics!.status).toBe(200);
    expect(metrics!.ms).toBeLessThan(3000);
    const stalled = new RegExp(`weft_reader_stalled_seconds\\{[^}]*reader_id="${readerId}"[^}]*\\} ([0-9.]+)`).exec(metrics!.body);
    expect(Number(stalled?.[1])).toBeGreaterThan(1);

    expect((await tokenize).status).toBe(200);
    expect((await waiting).status).toBe(200);
    let after = await timed('/healthz');
    for (let i = 0; i < 20 && after.status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 100));
      after = await timed('/healthz');
    }
    expect(after.status).toBe(200);
  }, 240_000);
});
