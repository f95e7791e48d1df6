/**
 * Hub ids through the management API, over real loopback listeners started by
 * `start()`, against the fake Hub (test/helpers/fake_hub.ts; HF_ENDPOINT at
 * it, HF_HOME a temp dir): `PUT /models` with `org/name` answers at once with
 * a reader `downloading`, whose `download` progress climbs to its total while
 * the server fetches the files, then the reader loads and serves /generate. A
 * gated repo without a token leaves the reader `failed` with
 * `hub_auth_required`, and /healthz stays 200. Deleting a reader mid-download
 * stops it for good; a malformed Hub id is a 400.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { start, type Running } from '../../server/main.ts';
import { startFakeHub, type FakeHub } from '../helpers/fake_hub.ts';

const STORIES = fileURLToPath(new URL('../../models/stories260K', import.meta.url));
const ENV = ['HF_HOME', 'HF_ENDPOINT', 'HF_TOKEN', 'HF_HUB_CACHE'] as const;

type Summary = { reader_id: string; model: string; state: string; ready: boolean; error: { code: string; message: string } | null; download: { loaded: number; total: number; file: string } | null };

let hub: FakeHub;
let home: string;
let run: Running;
const saved: Record<string, string | undefined> = {};
const url = (name: string, path: string): string => `http://127.0.0.1:${run.servers.find((s) => s.name === name)!.port}${path}`;
const put = (body: unknown): Promise<Response> => fetch(url('management', '/models'), { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
const reader = async (id: string): Promise<Summary> => (await (await fetch(url('management', `/reader/${id}`))).json()) as Summary;

beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), 'weft-hf-mgmt-'));
  // ~1 MB of weights in 32 KiB chunks 20 ms apart: half a second or more of visible progress.
  hub = await startFakeHub({ 'tiny/stories': { dir: STORIES, drip: { bytes: 32 << 10, ms: 20 } }, 'tiny/gated': { dir: STORIES, token: 'hf_secret' }, 'tiny/slow': { dir: STORIES, drip: { bytes: 8 << 10, ms: 100 } } });
  for (const k of ENV) saved[k] = process.env[k];
  delete process.env.HF_TOKEN;
  delete process.env.HF_HUB_CACHE;
  Object.assign(process.env, { HF_HOME: home, HF_ENDPOINT: hub.endpoint });
  const config = loadConfig({
    env: {},
    overrides: { embeddingModel: '', host: '127.0.0.1', port: 0, managementPort: 0, openaiPort: 0, sagemakerPort: 0, vertexPort: 0, backend: process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles', logDisableTimestamps: true },
  });
  run = await start(config, { ephemeral: true });
  await run.service.readers.waitSettled(60_000);
  for (const r of run.service.readers.all()) if (!r.ready) throw new Error(`reader ${r.readerId} did not load: ${JSON.stringify(r.error)}`);
}, 90_000);

afterAll(async () => {
  await run?.close();
  await hub?.close();
  for (const k of ENV) saved[k] === undefined ? delete process.env[k] : (process.env[k] = saved[k]);
  if (home) await rm(home, { recursive: true, force: true });
});

describe('PUT /models with a Hub id', () => {
  it('downloads in the server with progress on the summary, then loads and serves', async () => {
    const res = await put({ model: 'tiny/stories', consumer_group: 'hub', reader_id: 'hub-0' });
    expect(res.status).toBe(201);
    const first = (await res.json()) as Summary;
    expect(first).toMatchObject({ reader_id: 'hub-0', model: 'tiny/stories', state: 'downloading', ready: false });

    const seen: Summary[] = [];
    const deadline = Date.now() + 60_000;
    for (;;) {
      const s = await reader('hub-0');
      seen.push(s);
      if (s.state === 'ready' || s.state === 'failed' || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 15));
    }
    const last = seen.at(-1)!;
    expect(last.error).toBeNull();
    expect(last).toMatchObject({ state: 'ready', ready: true, model: 'tiny/stories' });

    const during = seen.filter((s) => s.state === 'downloading' && s.download && s.download.total > 0);
    const loaded = during.map((s) => s.download!.loaded);
    // Several distinct partial readings, never going back, all under the total.
    expect(new Set(loaded.filter((n) => n < during[0]!.download!.total)).size).toBeGreaterThan(2);
    for (let i = 1; i < loaded.length; i++) expect(loaded[i]!).toBeGreaterThanOrEqual(loaded[i - 1]!);
    expect(during.some((s) => s.download!.file === 'model.safetensors')).toBe(true);
    expect(last.download!.loaded).toBe(last.download!.total);
    expect(last.download!.total).toBeGreaterThan(1_000_000);
    // The order of states: downloading, then loading, then ready.
    const states = seen.map((s) => s.state).filter((s, i, a) => s !== a[i - 1]);
    expect(states[0]).toBe('downloading');
    expect(states.at(-1)).toBe('ready');
    expect(states.indexOf('downloading')).toBeLessThan(states.indexOf('ready'));

    const groups = (await (await fetch(url('management', '/reader_groups'))).json()) as Record<string, Summary[]>;
    expect(groups.hub![0]!.download).toEqual(last.download);

    const gen = await fetch(url('inference', '/generate'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: 'Once upon a time', max_new_tokens: 4, consumer_group: 'hub' }) });
    expect(gen.status).toBe(200);
    expect(((await gen.json()) as { text: string }).text.length).toBeGreaterThan(0);
  }, 90_000);

  it('a gated repo without a token: the reader fails with hub_auth_required and /healthz stays 200', async () => {
    const res = await put({ model: 'tiny/gated', consumer_group: 'gated', reader_id: 'gated-0' });
    expect(res.status).toBe(201);
    expect(((await res.json()) as Summary).state).toBe('downloading');
    await run.service.readers.get('gated-0').waitSettled(30_000);
    const s = await reader('gated-0');
    expect(s).toMatchObject({ state: 'failed', ready: false, error: { code: 'hub_auth_required', message: expect.stringMatching(/HF_TOKEN/) } });
    expect((await fetch(url('management', '/healthz'))).status).toBe(200);
    expect((await fetch(url('inference', '/healthz'))).status).toBe(200);
  }, 60_000);

  it('deleting a downloading reader stops the download and starts nothing', async () => {
    expect((await put({ model: 'tiny/slow', consumer_group: 'slow', reader_id: 'slow-0' })).status).toBe(201);
    const r = run.service.readers.get('slow-0');
    while ((r.download?.loaded ?? 0) === 0) await new Promise((ok) => setTimeout(ok, 20));
    const del = await fetch(url('management', '/reader/slow-0'), { method: 'DELETE' });
    expect(del.status).toBe(200);
    const at = r.download!.loaded;
    await new Promise((ok) => setTimeout(ok, 600));
    expect(r.state).toBe('stopped');
    expect(r.download!.loaded).toBeLessThan(r.download!.total);
    expect(r.download!.loaded - at).toBeLessThanOrEqual(8 << 10);
    expect((await fetch(url('management', '/reader/slow-0'))).status).toBe(404);
  }, 30_000);

  it('a malformed Hub id is 400 invalid_model', async () => {
    const res = await put({ model: 'org/name:../../etc/passwd', consumer_group: 'bad' });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('invalid_model');
    expect(run.service.readers.all().some((r) => r.spec.consumerGroup === 'bad')).toBe(false);
  });

  it('a path that exists is loaded as a path, not fetched', async () => {
    const before = hub.requests.length;
    const res = await put({ model: 'models/stories260K', consumer_group: 'local', reader_id: 'local-0' });
    expect(res.status).toBe(201);
    const s = (await res.json()) as Summary;
    expect(s.state).toBe('loading');
    expect(s.download).toBeNull();
    expect(hub.requests.length).toBe(before);
    await run.service.readers.delete('local-0');
  }, 30_000);
});
