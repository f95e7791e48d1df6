/**
 * Models by Hub id against a fake Hub on loopback (test/helpers/fake_hub.ts):
 * a model pulled into the HF cache layout, a download resumed with Range
 * after a dropped connection, a corrupted file refused by its sha256, a gated
 * model answered with typed auth errors, and a cached model found and loaded
 * with the network unreachable.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, readlink, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseHubId, repoDir } from '../../server/hub/cache.ts';
import { HubAuthError, HubChecksumError, pullModel, type PullProgress } from '../../server/hub/download.ts';
import { createEngine } from '../../server/library.ts';
import { REFERENCE_TEXT } from '../models/stories260k.fixture.ts';
import { startFakeHub, type FakeHub } from '../helpers/fake_hub.ts';

const STORIES = fileURLToPath(new URL('../../models/stories260K', import.meta.url));
const backend = process.env.WEFT_TEST_BACKENDS?.split(',')[0] ?? 'swiftshader';
const offline: typeof fetch = () => Promise.reject(new Error('network is off'));

describe('Hub downloads (fake Hub)', () => {
  let hub: FakeHub;
  let home: string;
  const env = (): NodeJS.ProcessEnv => ({ HF_HOME: home, HF_ENDPOINT: hub.endpoint });
  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), 'weft-hf-'));
    hub = await startFakeHub({
      'tiny/stories': { dir: STORIES },
      'tiny/flaky': { dir: STORIES, dropAfter: { file: 'model.safetensors', bytes: 300_000 } },
      'tiny/corrupt': { dir: STORIES, corrupt: 'model.safetensors' },
      'tiny/gated': { dir: STORIES, token: 'hf_secret' },
    });
  });
  afterAll(async () => {
    await hub.close();
    await rm(home, { recursive: true, force: true });
  });

  it('parses Hub ids and leaves paths and URLs alone', () => {
    expect(parseHubId('Qwen/Qwen2.5-0.5B-Instruct')).toEqual({ repo: 'Qwen/Qwen2.5-0.5B-Instruct' });
    expect(parseHubId('org/name:model-q4_0.gguf')).toEqual({ repo: 'org/name', file: 'model-q4_0.gguf' });
    for (const s of ['./models/x', '/abs/dir', 'models/stories260K/', 'https://host/a/b', 'model.gguf', '../a/b']) expect(parseHubId(s), s).toBeNull();
  });

  it('pulls a model into the HF cache layout with sha256-named blobs and progress; a cached model loads with the network off', async () => {
    const seen: PullProgress[] = [];
    const snap = await pullModel('tiny/stories', { env: env(), onProgress: (p) => seen.push(p) });
    const dir = repoDir('tiny/stories', env());
    const sha = (await readFile(join(dir, 'refs', 'main'), 'utf8')).trim();
    expect(snap).toBe(join(dir, 'snapshots', sha));
    const weights = await readFile(join(STORIES, 'model.safetensors'));
    const sum = createHash('sha256').update(weights).digest('hex');
    expect(await readlink(join(snap, 'model.safetensors'))).toBe(`../../blobs/${sum}`);
    expect((await readFile(join(snap, 'model.safetensors'))).equals(weights)).toBe(true);
    expect((await stat(join(snap, 'tokenizer.json'))).isFile()).toBe(true);
    await expect(stat(join(snap, 'README.md'))).rejects.toThrow(); // only model files
    expect(seen.at(-1)!.allLoaded).toBe(seen.at(-1)!.allTotal);

    const before = hub.requests.length;
    expect(await pullModel('tiny/stories', { env: env(), fetch: offline })).toBe(snap);
    expect(hub.requests.length).toBe(before);
    // By Hub id through the Node entry: found in the cache, the network never asked.
    const prev = { HF_HOME: process.env.HF_HOME, HF_ENDPOINT: process.env.HF_ENDPOINT };
    Object.assign(process.env, { HF_HOME: home, HF_ENDPOINT: 'http://127.0.0.1:9' });
    const engine = await createEngine({ model: 'tiny/stories', gpuBackend: backend, maxContext: 64 }).finally(() => {
      for (const [k, v] of Object.entries(prev)) v === undefined ? delete process.env[k] : (process.env[k] = v);
    });
    expect(engine.info().model).toBe('tiny/stories');
    const r = await engine.completions.create({ prompt: 'Once upon a time', max_tokens: 6, temperature: 0 });
    await engine.unload();
    expect(REFERENCE_TEXT.startsWith(r.choices[0]!.text)).toBe(true);
  });

  it('resumes a download with Range after the connection dropped', async () => {
    await expect(pullModel('tiny/flaky', { env: env() })).rejects.toMatchObject({ code: 'hub_download_interrupted' });
    const dir = repoDir('tiny/flaky', env());
    await expect(stat(join(dir, 'refs', 'main'))).rejects.toThrow();
    const snap = await pullModel('tiny/flaky', { env: env() });
    const ranges = hub.requests.filter((q) => q.path.startsWith('/tiny/flaky/resolve/') && q.range);
    expect(ranges.map((q) => q.range)).toEqual(['bytes=300000-']);
    expect((await readFile(join(snap, 'model.safetensors'))).equals(await readFile(join(STORIES, 'model.safetensors')))).toBe(true);
  });

  it('refuses a file whose bytes do not match the Hub sha256, keeping nothing', async () => {
    const err = await pullModel('tiny/corrupt', { env: env() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HubChecksumError);
    expect(err).toMatchObject({ code: 'hub_checksum_mismatch', details: { file: 'model.safetensors' } });
    const dir = repoDir('tiny/corrupt', env());
    await expect(stat(join(dir, 'refs', 'main'))).rejects.toThrow();
    const sum = createHash('sha256').update(await readFile(join(STORIES, 'model.safetensors'))).digest('hex');
    await expect(stat(join(dir, 'blobs', sum))).rejects.toThrow();
    await expect(stat(join(dir, 'blobs', `${sum}.incomplete`))).rejects.toThrow();
  });

  it('a gated model: 401 without a token and 403 with a wrong one are typed errors; HF_TOKEN gets it', async () => {
    const none = await pullModel('tiny/gated', { env: env() }).catch((e: unknown) => e);
    expect(none).toBeInstanceOf(HubAuthError);
    expect(none).toMatchObject({ code: 'hub_auth_required', message: expect.stringMatching(/HF_TOKEN/) });
    await expect(pullModel('tiny/gated', { env: { ...env(), HF_TOKEN: 'wrong' } })).rejects.toMatchObject({ code: 'hub_access_denied' });
    const snap = await pullModel('tiny/gated', { env: { ...env(), HF_TOKEN: 'hf_secret' } });
    expect((await stat(join(snap, 'config.json'))).isFile()).toBe(true);
    await expect(pullModel('nobody/nothing', { env: env() })).rejects.toMatchObject({ code: 'hub_model_not_found' });
  });
});
