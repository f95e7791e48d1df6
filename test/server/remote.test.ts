/**
 * Readers on another machine, as a real second process: `weft reader
 * --listen 127.0.0.1:0` attached to a service by a `remote:` reader entry,
 * over real loopback TCP and HTTP. It generates the same tokens as a local
 * reader; a wrong token is refused; killing it mid-request fails that request
 * with 503 `reader_disconnected` while other groups keep serving; restarted
 * on its port, it is reattached. Also: one group of two readers on two
 * backends, SwiftShader in a reader process and OpenGL ES in a worker thread
 * (the multi-device layout on one machine).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from './helpers.ts';
import { json, kill, listenApps, startReaderProcess, streamTokens, until, type Http, type ReaderProcess } from './remote_helpers.ts';

const TOKEN = 'test-token-7f3a';
let remote: ReaderProcess;
let t: TestService;
let http: Http;
let extra: ReaderProcess | undefined;

beforeAll(async () => {
  remote = await startReaderProcess(['--token', TOKEN, '--backend', 'opengles']);
  t = await startTestService({
    readers: [
      { consumer_group: 'far', reader_id: 'far-0', remote: `127.0.0.1:${remote.port}`, token: TOKEN },
      { consumer_group: 'multi', reader_id: 'multi-opengles', backend: 'opengles', max_batch_size: 2 },
    ],
  });
  http = await listenApps(t.apps);
}, 180_000);

afterAll(async () => {
  // The reader processes are killed whatever happens to the service's close (a slow or
  // failing close under load must not leave orphans listening after the run).
  try {
    await http?.close();
    await t?.svc.close();
  } finally {
    if (remote) await kill(remote.child);
    if (extra) await kill(extra.child);
  }
}, 60_000);

const groups = async (): Promise<Record<string, { reader_id: string; ready: boolean; state: string; remote: string | null; error: { code: string } | null; model: string }[]>> =>
  (await (await fetch(`${http.management}/reader_groups`)).json()) as never;

describe('a remote reader', () => {
  it('is listed with its address and the model the remote process loaded', async () => {
    const far = (await groups()).far!;
    expect(far).toHaveLength(1);
    expect(far[0]).toMatchObject({ reader_id: 'far-0', ready: true, state: 'ready', remote: `127.0.0.1:${remote.port}` });
    expect(far[0]!.model).toBe(remote.info.model);
  });

  it('generates the same tokens as a local reader, greedy and seeded', async () => {
    const greedy = { text: 'Once upon a time', max_new_tokens: 24 };
    const local = await streamTokens(http.inference, { ...greedy, consumer_group: 'primary' });
    const far = await streamTokens(http.inference, { ...greedy, consumer_group: 'far' });
    expect(local.ids).toHaveLength(24);
    expect(far.ids).toEqual(local.ids);
    expect(far.text).toBe(local.text);
    expect(far.events.at(-1)).toBe('done');
    const sampled = { text: 'The cat', max_new_tokens: 20, sampling_temperature: 0.9, seed: 11 };
    const ls = await streamTokens(http.inference, { ...sampled, consumer_group: 'primary' });
    const fs = await streamTokens(http.inference, { ...sampled, consumer_group: 'far' });
    expect(fs.ids).toEqual(ls.ids);
    // Non-streaming and the tokenizer through the remote reader too.
    const res = await fetch(`${http.inference}/generate`, json({ text: 'Once upon a time', max_new_tokens: 24, consumer_group: 'far' }));
    expect(res.status).toBe(200);
    expect(((await res.json()) as { text: string }).text).toBe(local.text);
    const tok = (await (await fetch(`${http.inference}/tokenize/far-0`, json({ text: 'Once upon a time' }))).json()) as { tokens: number[] };
    const tokLocal = (await (await fetch(`${http.inference}/tokenize/primary-0`, json({ text: 'Once upon a time' }))).json()) as { tokens: number[] };
    expect(tok.tokens).toEqual(tokLocal.tokens);
  });

  it('refuses a wrong token: the reader fails with remote_auth_failed and is not retried', async () => {
    const put = await fetch(`${http.management}/models`, json({ consumer_group: 'bad', reader_id: 'bad-0', remote: `127.0.0.1:${remote.port}`, token: 'wrong' }, 'PUT'));
    expect(put.status).toBe(201);
    const bad = await until('bad reader to fail', async () => (await groups()).bad?.find((r) => r.state === 'failed'));
    expect(bad.error?.code).toBe('remote_auth_failed');
    const gen = await fetch(`${http.inference}/generate`, json({ text: 'a', max_new_tokens: 1, consumer_group: 'bad' }));
    expect(gen.status).toBe(503);
    expect((await fetch(`${http.management}/reader/bad-0`, { method: 'DELETE' })).status).toBe(200);
  });

  it('rejects a malformed remote address with 400', async () => {
    const put = await fetch(`${http.management}/models`, json({ consumer_group: 'x', remote: 'no-port' }, 'PUT'));
    expect(put.status).toBe(400);
    expect(((await put.json()) as { error: { code: string; details: { field: string } } }).error).toMatchObject({ code: 'invalid_reader_config', details: { field: 'remote' } });
  });

  it('killed mid-request: that request fails with 503 reader_disconnected, other groups serve, and it reattaches when restarted', async () => {
    const port = remote.port;
    const long = fetch(`${http.inference}/generate`, json({ text: 'Once upon a time', max_new_tokens: 400, min_new_tokens: 400, consumer_group: 'far' }));
    await until('the long request to be in flight', async () => (await groups()).far![0] && t.svc.readers.get('far-0').inFlight > 0, 10_000, 10);
    await new Promise((r) => setTimeout(r, 150));
    const killedAt = Date.now();
    await kill(remote.child);
    const res = await long;
    expect(Date.now() - killedAt).toBeLessThan(5_000); // failed promptly, not hanging
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBeTruthy();
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('reader_disconnected');

    // The rest of the server is unaffected.
    const ok = await fetch(`${http.inference}/generate`, json({ text: 'Once upon a time', max_new_tokens: 3 }));
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { text: string }).text).toBe(', there was');
    // The remote group answers 503 while it is gone, never hangs.
    const gone = await fetch(`${http.inference}/generate`, json({ text: 'a', max_new_tokens: 1, consumer_group: 'far' }));
    expect(gone.status).toBe(503);
    const far = (await groups()).far![0]!;
    expect(far.ready).toBe(false);
    expect(far.error?.code).toBe('reader_disconnected');

    // Restarted on the same port, the reader is reattached by the reconnect loop.
    remote = await startReaderProcess(['--token', TOKEN, '--backend', 'opengles'], port);
    await until('reattach', async () => (await groups()).far![0]!.ready, 30_000, 200);
    const again = await fetch(`${http.inference}/generate`, json({ text: 'Once upon a time', max_new_tokens: 3, consumer_group: 'far' }));
    expect(again.status).toBe(200);
    expect(((await again.json()) as { text: string }).text).toBe(', there was');
    expect(t.svc.readers.get('far-0').restarts).toBeGreaterThanOrEqual(1);
  }, 120_000);
});

describe('several devices in one group', () => {
  it('balances one group over readers on two backends (SwiftShader and OpenGL ES) with the same greedy tokens', async () => {
    // The SwiftShader reader runs in its own `weft reader` process (the per-device layout of docs/scaling.md):
    // (The OpenGL ES reader of the group started with the service, in a worker thread.)
    extra = await startReaderProcess(['--backend', 'swiftshader', '--max-batch-size', '2']);
    expect((await fetch(`${http.management}/models`, json({ consumer_group: 'multi', reader_id: 'multi-swiftshader', remote: `127.0.0.1:${extra.port}` }, 'PUT'))).status).toBe(201);
    const list = await until('both readers ready', async () => {
      const m = (await groups()).multi;
      return m && m.length === 2 && m.every((r) => r.ready) ? m : null;
    });
    const summaries = list as unknown as { reader_id: string; backend: string }[];
    expect(summaries.map((r) => r.backend).sort()).toEqual(['opengles', 'swiftshader']);
    // Concurrent requests spread over both readers (least in flight first) and agree.
    const members = t.svc.readers.all().filter((r) => r.spec.consumerGroup === 'multi');
    const busy = new Set<string>();
    let done = false;
    const runs = Promise.all(Array.from({ length: 4 }, () => streamTokens(http.inference, { text: 'Once upon a time', max_new_tokens: 16, consumer_group: 'multi' }).then((o) => o.ids)));
    void runs.finally(() => (done = true));
    while (!done) {
      for (const r of members) if (r.inFlight > 0) busy.add(r.readerId);
      await new Promise((r) => setTimeout(r, 2));
    }
    const outs = await runs;
    expect([...busy].sort()).toEqual(['multi-opengles', 'multi-swiftshader']);
    for (const ids of outs) expect(ids).toEqual(outs[0]);
    const local = await streamTokens(http.inference, { text: 'Once upon a time', max_new_tokens: 16, consumer_group: 'primary' });
    expect(outs[0]).toEqual(local.ids);
  }, 120_000);
});
