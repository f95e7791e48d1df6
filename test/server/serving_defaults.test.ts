/**
 * The serving defaults on a real service over loopback HTTP: speculative
 * decoding on by default (stories260K drafted by its Q4_0 GGUF copy, served
 * in another group of the same server, with no assistant configured), the
 * per-request opt-out, tokens/s per request in the response, and /metrics
 * labelled by model and consumer group, checked by a strict parser of the
 * text format (a model path holding a quote, a backslash and a newline must
 * come back escaped and round-trip).
 */
import { serve, type ServerType } from '@hono/node-server';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hfToGguf } from '../../core/formats/gguf_write.ts';
import { parseDecoderConfig } from '../../core/formats/hf_config.ts';
import { prepareGpuEnv } from '../../core/gpu/device.ts';
import { buildApps } from '../../server/apps/index.ts';
import { loadConfig } from '../../server/config.ts';
import { dirSource } from '../../server/fs_source.ts';
import { DEFAULT_MODEL_DIR } from '../../server/paths.ts';
import { Service } from '../../server/service.ts';
import { hfTensors } from '../helpers/tiny_decoder.ts';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/**
 * A strict reader of the Prometheus text format 0.0.4: every sample belongs to
 * a family declared by `# TYPE` before it (histograms: _bucket/_sum/_count),
 * label values are quoted and use only the escapes \\, \" and \n; anything
 * else throws.
 */
function parseStrict(text: string): { samples: Sample[]; types: Map<string, string> } {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  const lines = text.split('\n');
  expect(lines.at(-1)).toBe('');
  for (const line of lines.slice(0, -1)) {
    if (line.startsWith('# HELP ')) continue;
    const t = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (t) {
      if (types.has(t[1]!)) throw new Error(`TYPE given twice for ${t[1]}`);
      types.set(t[1]!, t[2]!);
      continue;
    }
    if (line.startsWith('#')) throw new Error(`bad comment line: ${line}`);
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
    if (!m) throw new Error(`bad sample line: ${JSON.stringify(line)}`);
    const name = m[1]!;
    let i = name.length;
    const labels: Record<string, string> = {};
    if (line[i] === '{') {
      i++;
      while (line[i] !== '}') {
        const k = /^([a-zA-Z_][a-zA-Z0-9_]*)="/.exec(line.slice(i));
        if (!k) throw new Error(`bad label at ${i} in ${JSON.stringify(line)}`);
        i += k[0].length;
        let v = '';
        for (;;) {
          const c = line[i++];
          if (c === undefined) throw new Error(`unterminated label value in ${JSON.stringify(line)}`);
          if (c === '"') break;
          if (c === '\\') {
            const e = line[i++];
            if (e === '\\') v += '\\';
            else if (e === '"') v += '"';
            else if (e === 'n') v += '\n';
            else throw new Error(`bad escape \\${e} in ${JSON.stringify(line)}`);
          } else v += c;
        }
        if (k[1]! in labels) throw new Error(`label ${k[1]} twice`);
        labels[k[1]!] = v;
        if (line[i] === ',') i++;
        else if (line[i] !== '}') throw new Error(`expected , or } at ${i} in ${JSON.stringify(line)}`);
      }
      i++;
    }
    const rest = /^ (\S+)$/.exec(line.slice(i));
    if (!rest) throw new Error(`bad value in ${JSON.stringify(line)}`);
    const raw = rest[1]!;
    const value = raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : raw === 'NaN' ? NaN : Number(raw);
    if (Number.isNaN(value) && raw !== 'NaN') throw new Error(`bad number ${raw}`);
    const family = types.has(name) ? name : name.replace(/_(bucket|sum|count)$/, '');
    const type = types.get(family);
    if (!type) throw new Error(`sample ${name} before its # TYPE`);
    if (family !== name && type !== 'histogram' && type !== 'summary') throw new Error(`${name}: suffix on a ${type}`);
    samples.push({ name, labels, value });
  }
  return { samples, types };
}

let svc: Service;
let server: ServerType;
let base = '';
/** The draft: stories260K as Q4_0 GGUF, in a directory whose name needs escaping as a label value. */
let draftPath = '';

beforeAll(async () => {
  prepareGpuEnv();
  const dir = join(mkdtempSync(join(tmpdir(), 'weft-defaults-')), 'q"uote\\back\nline');
  mkdirSync(dir);
  draftPath = join(dir, 'stories260K-q4_0.gguf');
  const ms = dirSource(DEFAULT_MODEL_DIR);
  const config = parseDecoderConfig(await ms.readText('config.json'));
  const tokenizerConfig = JSON.parse(await ms.readText('tokenizer_config.json')) as Record<string, unknown>;
  writeFileSync(draftPath, hfToGguf({ config, tensors: await hfTensors(ms), tokenizer: await ms.readText('tokenizer.json'), tokenizerConfig, type: 'Q4_0', name: 'stories260K' }));
  svc = new Service(
    loadConfig({
      env: {},
      overrides: {
        embeddingModel: '',
        backend: process.env.WEFT_TEST_SERVER_BACKEND ?? 'opengles',
        logDisableTimestamps: true,
        readers: [{ model: draftPath, consumer_group: 'small', reader_id: 'small-0' }],
      },
    }),
  );
  svc.startConfiguredReaders();
  await svc.readers.waitSettled(180_000);
  for (const r of svc.readers.all()) if (!r.ready) throw new Error(`reader ${r.readerId} did not load: ${JSON.stringify(r.error)}`);
  const apps = buildApps(svc);
  server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: apps.inference.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  const addr = server.address();
  base = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
}, 300_000);
afterAll(async () => {
  await new Promise<void>((r) => server?.close(() => r()));
  await svc?.close();
});

const post = (body: unknown): RequestInit => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
const metrics = async (): Promise<Sample[]> => parseStrict(await (await fetch(`${base}/metrics`)).text()).samples;
const one = (s: Sample[], name: string, labels: Record<string, string>): number | undefined =>
  s.find((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v))?.value;

describe('serving defaults', () => {
  it('the larger reader drafts with the smaller model of the same vocabulary without being told to', async () => {
    const st = (await (await fetch(`${base}/status`)).json()) as { groups: Record<string, { stats: { draftTokensProposed?: number } }[]> };
    expect(st.groups.primary![0]!.stats.draftTokensProposed).toBe(0);
    expect(st.groups.small![0]!.stats.draftTokensProposed).toBeUndefined();
  });

  it('greedy output equals the opted-out run; the acceptance counters move; tokens/s is in the response', async () => {
    const run = async (extra: object): Promise<{ res: Response; body: { text: string; usage: { completion_tokens: number; tokens_per_second: number } } }> => {
      const res = await fetch(`${base}/generate`, post({ text: 'Once upon a time', max_new_tokens: 40, ...extra }));
      expect(res.status).toBe(200);
      return { res, body: (await res.json()) as never };
    };
    const before = await metrics();
    const plain = await run({ speculative: false });
    const mid = await metrics();
    const lbl = { reader_id: 'primary-0' };
    expect(one(mid, 'weft_speculative_draft_tokens_total', lbl)).toBe(one(before, 'weft_speculative_draft_tokens_total', lbl));
    const spec = await run({});
    expect(spec.body.text).toBe(plain.body.text);
    expect(spec.body.usage.completion_tokens).toBe(40);
    const after = await metrics();
    const proposed = one(after, 'weft_speculative_draft_tokens_total', lbl)!;
    const accepted = one(after, 'weft_speculative_accepted_tokens_total', lbl)!;
    expect(proposed).toBeGreaterThan(0);
    expect(accepted).toBeGreaterThan(0);
    expect(one(after, 'weft_speculative_acceptance_rate', lbl)).toBeCloseTo(accepted / proposed, 9);
    // Tokens/s: the header and the usage field carry the same per-request figure.
    for (const r of [plain, spec]) {
      expect(r.body.usage.tokens_per_second).toBeGreaterThan(0);
      expect(Number(r.res.headers.get('x-weft-tokens-per-second'))).toBe(r.body.usage.tokens_per_second);
    }
  }, 180_000);

  it('labels request, token and latency series by model and consumer group, escaped and round-tripping', async () => {
    expect((await fetch(`${base}/generate`, post({ text: 'Tim', max_new_tokens: 3, consumer_group: 'small' }))).status).toBe(200);
    const s = await metrics();
    const small = { model: draftPath, consumer_group: 'small' };
    const primary = { model: DEFAULT_MODEL_DIR, consumer_group: 'primary' };
    expect(one(s, 'weft_requests_total', small)).toBe(1);
    expect(one(s, 'weft_generated_tokens_total', small)).toBe(3);
    expect(one(s, 'weft_requests_total', primary)).toBe(2);
    expect(one(s, 'weft_generated_tokens_total', primary)).toBe(80);
    expect(one(s, 'weft_request_duration_seconds_count', small)).toBe(1);
    expect(one(s, 'weft_time_to_first_token_seconds_bucket', { ...small, le: '+Inf' })).toBe(1);
    const text = await (await fetch(`${base}/metrics`)).text();
    expect(text).toContain('model="' + draftPath.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n') + '"');
    // The standard process series.
    expect(one(s, 'process_cpu_seconds_total', {})).toBeGreaterThan(0);
    expect(one(s, 'process_resident_memory_bytes', {})).toBeGreaterThan(1e6);
    expect(Math.abs(one(s, 'process_start_time_seconds', {})! - (Date.now() / 1000 - process.uptime()))).toBeLessThan(5);
    expect(one(s, 'process_open_fds', {})).toBeGreaterThan(2);
  });
});
