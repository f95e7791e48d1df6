/**
 * Speculative decoding through the service: WEFT_ASSISTANT_NAME (and
 * WEFT_SPECULATIVE_TOKENS) give the default reader a draft; generation over
 * real HTTP on loopback gives the plain greedy output; /metrics and /status
 * report proposed / accepted draft tokens; PUT /models takes
 * `assistant_model`; bad values are clear errors.
 */
import { serve, type ServerType } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApps, type Apps } from '../../server/apps/index.ts';
import { loadConfig } from '../../server/config.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { parseReaderSpec } from '../../server/readers/spec.ts';
import { Service } from '../../server/service.ts';
import { prepareGpuEnv } from '../../core/gpu/device.ts';
import { REFERENCE_IDS } from '../models/stories260k.fixture.ts';
import { fixtureDir } from '../helpers/tiny_decoder.ts';

let svc: Service;
let apps: Apps;
let server: ServerType;
let base = '';

beforeAll(async () => {
  prepareGpuEnv();
  const env = { WEFT_ASSISTANT_NAME: DEFAULT_MODEL_DIR, WEFT_SPECULATIVE_TOKENS: '3' };
  svc = new Service(loadConfig({ env, overrides: { embeddingModel: '', backend: process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles', logDisableTimestamps: true } }));
  svc.startConfiguredReaders();
  await svc.readers.waitSettled(120_000);
  for (const r of svc.readers.all()) if (!r.ready) throw new Error(`reader ${r.readerId} did not load: ${JSON.stringify(r.error)}`);
  apps = buildApps(svc);
  server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: apps.inference.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  const addr = server.address();
  base = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
}, 180_000);
afterAll(async () => {
  await new Promise<void>((r) => server?.close(() => r()));
  await svc?.close();
});

const json = (body: unknown, method = 'POST'): RequestInit => ({ method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

interface Stats {
  draftTokensProposed?: number;
  draftTokensAccepted?: number;
  draftAcceptanceRate?: number | null;
  kvBlocksFree: number;
}

async function stats(group = 'primary'): Promise<Stats[]> {
  const s = (await (await fetch(`${base}/status`)).json()) as { groups: Record<string, { stats: Stats }[]> };
  return s.groups[group]!.map((r) => r.stats);
}

function metric(text: string, name: string, reader: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(`reader_id="${reader}"`));
  if (!line) throw new Error(`no ${name} for ${reader}`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('speculative decoding in the service', () => {
  it('WEFT_ASSISTANT_NAME: greedy output over HTTP is the plain reference; every self-draft token is accepted', async () => {
    const res = await fetch(`${base}/generate`, json({ text: 'Once upon a time', max_new_tokens: 64 }));
    expect(res.status).toBe(200);
    const body = (await res.json()) as { text: string; usage: { completion_tokens: number } };
    expect(body.usage.completion_tokens).toBe(64);
    const detok = (await (await fetch(`${base}/detokenize/primary-0`, json({ tokens: REFERENCE_IDS, skip_special_tokens: true }))).json()) as { text: string };
    expect(body.text).toBe(detok.text);

    const [s] = await stats();
    expect(s!.draftTokensProposed).toBeGreaterThan(30);
    expect(s!.draftTokensAccepted).toBe(s!.draftTokensProposed);
    expect(s!.draftAcceptanceRate).toBe(1);
    const m = await (await fetch(`${base}/metrics`)).text();
    expect(m).toContain('# TYPE weft_speculative_draft_tokens_total counter');
    expect(metric(m, 'weft_speculative_draft_tokens_total', 'primary-0')).toBe(s!.draftTokensProposed);
    expect(metric(m, 'weft_speculative_accepted_tokens_total', 'primary-0')).toBe(s!.draftTokensAccepted);
    expect(metric(m, 'weft_speculative_acceptance_rate', 'primary-0')).toBe(1);
  });

  it('stop strings cut exactly and the KV pool is whole afterwards', async () => {
    const free0 = (await stats())[0]!.kvBlocksFree;
    const res = await fetch(`${base}/generate`, json({ text: 'Once upon a time', max_new_tokens: 64, stop: ['Lily'] }));
    const body = (await res.json()) as { text: string; finish_reason: string };
    expect(body.finish_reason).toBe('stop');
    expect(body.text).toBe(', there was a little girl named ');
    expect((await stats())[0]!.kvBlocksFree).toBe(free0);
  });

  it('PUT /models with assistant_model (a random tiny Llama with the same vocabulary): drafts are rejected, output unchanged', async () => {
    const put = await Promise.resolve(apps.management.request('/models', json({ consumer_group: 'drafted', reader_id: 'drafted-0', assistant_model: fixtureDir('llama'), speculative_tokens: 2 }, 'PUT')));
    expect(put.status).toBe(201);
    await svc.readers.waitSettled(120_000);
    const req = { text: 'The little dog', max_new_tokens: 30 };
    const plain = (await (await fetch(`${base}/generate`, json(req))).json()) as { text: string };
    const drafted = (await (await fetch(`${base}/generate`, json({ ...req, consumer_group: 'drafted' }))).json()) as { text: string };
    expect(drafted.text).toBe(plain.text);
    const [s] = await stats('drafted');
    expect(s!.draftTokensProposed).toBeGreaterThan(0);
    expect(s!.draftTokensAccepted).toBeLessThan(s!.draftTokensProposed!);
  });

  it('bad settings are clear errors', async () => {
    const cfg = (env: Record<string, string>) => () => loadConfig({ env, overrides: { embeddingModel: '' } });
    expect(cfg({ WEFT_ASSISTANT_NAME: '/nonexistent/draft' })).toThrow(/assistant_name: \/nonexistent\/draft does not exist/);
    expect(cfg({ WEFT_ASSISTANT_NAME: DEFAULT_MODEL_DIR, WEFT_SPECULATIVE_TOKENS: '0' })).toThrow(/speculative_tokens: expected an integer in \[1, 16\]/);
    expect(cfg({ WEFT_ASSISTANT_NAME: DEFAULT_MODEL_DIR, WEFT_SPECULATIVE_TOKENS: 'four' })).toThrow(/speculative_tokens/);
    expect(() => parseReaderSpec({ speculative_tokens: 3 }, { model: DEFAULT_MODEL_DIR })).toThrow(/need assistant_model/);
    const bad = await Promise.resolve(apps.management.request('/models', json({ assistant_model: DEFAULT_MODEL_DIR, speculative_tokens: 99 }, 'PUT')));
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('invalid_reader_config');
  });
});
