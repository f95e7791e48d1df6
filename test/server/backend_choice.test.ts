/**
 * `auto` for decoder readers on a CPU-only host (server/readers/backend_choice.ts): OpenGL ES
 * for models within llvmpipe's limits, Dawn's own order otherwise; encoders keep Dawn's order.
 * This machine has no hardware GPU, so `auto` is decided by the model's size here.
 */
import { mkdtempSync, rmSync, truncateSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dirSource } from '../../server/fs_source.ts';
import { AUTO_OPENGLES_MAX_WEIGHT_BYTES, decoderBackend, weightBytes } from '../../server/readers/backend_choice.ts';
import { glSlotHolder } from '../../server/readers/gl_slot.ts';
import { post, startTestService, type TestService } from './helpers.ts';

const MODEL = join(__dirname, '../../models/stories260K');

describe('auto backend of decoder readers', () => {
  let big: string;
  beforeAll(() => {
    // A model directory whose (sparse) weight file is one byte over the bound: real files, no data.
    big = mkdtempSync(join(tmpdir(), 'weft-big-'));
    copyFileSync(join(MODEL, 'config.json'), join(big, 'config.json'));
    writeFileSync(join(big, 'model.safetensors'), '');
    truncateSync(join(big, 'model.safetensors'), AUTO_OPENGLES_MAX_WEIGHT_BYTES + 1);
  });
  afterAll(() => rmSync(big, { recursive: true, force: true }));

  it('sums the weight files', async () => {
    expect(await weightBytes(dirSource(MODEL))).toBeGreaterThan(900_000);
    expect(await weightBytes(dirSource(MODEL))).toBeLessThan(1_200_000);
    expect(await weightBytes(dirSource(big))).toBe(AUTO_OPENGLES_MAX_WEIGHT_BYTES + 1);
  });

  it('takes OpenGL ES for a small model on a CPU-only host, and leaves other requests alone', async () => {
    // (The hardware probe is passed in: a Dawn instance probed on this test's main thread would
    // outlive the server's reader threads; the server's own probes run in its reader workers.)
    const cpuOnly = async (): Promise<boolean> => false;
    const small = dirSource(MODEL);
    expect(await decoderBackend(undefined, small, {}, cpuOnly)).toBe('opengles');
    expect(await decoderBackend('auto', small, {}, cpuOnly)).toBe('opengles');
    expect(await decoderBackend('auto', small, { WEFT_GPU_BACKEND: 'auto' }, cpuOnly)).toBe('opengles');
    // A hardware GPU: Dawn's order (it comes first there).
    expect(await decoderBackend('auto', small, {}, async () => true)).toBeUndefined();
    // A named backend, or one forced process-wide, wins.
    expect(await decoderBackend('swiftshader', small, {}, cpuOnly)).toBe('swiftshader');
    expect(await decoderBackend(undefined, small, { WEFT_GPU_BACKEND: 'swiftshader' }, cpuOnly)).toBeUndefined();
    // Past the bound (llvmpipe binds at most 128 MiB per buffer): Dawn's order, i.e. SwiftShader.
    expect(await decoderBackend('auto', dirSource(big), {}, cpuOnly)).toBeUndefined();
    // A source that cannot list its files: Dawn's order.
    const { list: _drop, ...unlisted } = small;
    expect(await decoderBackend('auto', unlisted, {}, cpuOnly)).toBeUndefined();
  });
});

describe('a server on auto', () => {
  let t: TestService;
  beforeAll(async () => {
    t = await startTestService({ backend: 'auto', embeddingModel: 'use-lite' });
  }, 120_000);
  afterAll(async () => {
    await t?.svc.close();
  });

  it('runs the bundled decoder on OpenGL ES and the embedder on SwiftShader', async () => {
    const groups = (await (await t.apps.management.request('/reader_groups')).json()) as Record<string, { backend: string; ready: boolean }[]>;
    expect(groups.primary![0]).toMatchObject({ backend: 'opengles', ready: true });
    expect(groups.embed![0]).toMatchObject({ backend: 'swiftshader', ready: true });
    const res = (await (await t.apps.inference.request('/generate', post({ text: 'Once upon a time', max_new_tokens: 12 }))).json()) as { text: string };
    expect(res.text).toBe(', there was a little girl named Lily. She');
  });

  it('gives OpenGL ES to one auto reader of the process at a time', async () => {
    const mgmt = (path: string, init?: RequestInit): Promise<Response> => Promise.resolve(t.apps.management.request(path, init));
    const put = (id: string): Promise<Response> => mgmt('/models', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ consumer_group: id, reader_id: id }) });
    const backendOf = async (id: string): Promise<string> => {
      await t.svc.readers.get(id).waitSettled(60_000);
      return ((await (await mgmt(`/reader/${id}`)).json()) as { backend: string }).backend;
    };
    expect(glSlotHolder()).toBe('primary-0');
    // While the default decoder holds it, a second small decoder on auto takes SwiftShader ...
    expect((await put('second')).status).toBe(201);
    expect(await backendOf('second')).toBe('swiftshader');
    // ... and once it is deleted, the next one gets OpenGL ES.
    expect((await mgmt('/reader/primary-0', { method: 'DELETE' })).status).toBe(200);
    expect(glSlotHolder()).toBeNull();
    expect((await put('third')).status).toBe(201);
    expect(await backendOf('third')).toBe('opengles');
    expect(glSlotHolder()).toBe('third');
    const res = (await (await t.apps.inference.request('/generate', post({ text: 'Once upon a time', max_new_tokens: 12, consumer_group: 'third' }))).json()) as { text: string };
    expect(res.text).toBe(', there was a little girl named Lily. She');
  }, 120_000);
});
