/**
 * The Deno entry end to end: spawns `deno run -A server/main_deno.ts` (Deno
 * from the npm package `deno`) with the bundled model, the inference app on
 * an ephemeral port and every other app disabled, then calls it over HTTP
 * like a client: /healthz, /generate (greedy text matches the reference that
 * the Node server also produces), /generate_stream (SSE with the same token
 * ids), and a streaming client that disconnects cancels its request. The
 * reader's GPU path (Deno's navigator.gpu, or Dawn as fallback) is whatever
 * the entry picked; /status reports it and the test prints it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSse } from '../server/helpers.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DENO = resolve(ROOT, 'node_modules/.bin/deno');

/** Greedy continuation of "Once upon a time" by stories260K (8 tokens). */
const REF_IDS = [432, 383, 286, 261, 376, 298, 315, 421];
const REF_TEXT = ', there was a little girl named Lily';

let child: ChildProcess | null = null;
let base = '';
let log = '';

const json = (body: unknown): RequestInit => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

function startDeno(): Promise<{ app: string; port: number }[]> {
  if (!existsSync(DENO)) throw new Error(`deno not found at ${DENO}: run \`npm ci\` (the npm package "deno" provides it)`);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NO_COLOR: '1',
    WEFT_HOST: '127.0.0.1',
    WEFT_PORT: '0',
    WEFT_MANAGEMENT_PORT: '0',
    WEFT_OPENAI_PORT: '0',
    WEFT_SAGEMAKER_PORT: '0',
    WEFT_VERTEX_PORT: '0',
  };
  // The entry picks its own GPU path; Node-side choices must not leak in.
  for (const k of ['WEFT_GPU_BACKEND', 'WEFT_BACKEND', 'WEFT_CONFIG', 'WEFT_MODEL', 'AIP_HTTP_PORT', 'VK_ICD_FILENAMES']) delete env[k];
  const proc = spawn(DENO, ['run', '-A', 'server/main_deno.ts'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  child = proc;
  return new Promise((done, fail) => {
    let out = '';
    const timer = setTimeout(() => fail(new Error(`no listening line within 30 s:\n${log}`)), 30_000);
    proc.stderr!.on('data', (d: Buffer) => (log += d.toString()));
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.startsWith('{"listening"'));
      if (!line) return;
      clearTimeout(timer);
      done((JSON.parse(line) as { listening: { app: string; port: number }[] }).listening);
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      fail(new Error(`deno exited (${code}) before listening:\n${log}`));
    });
  });
}

beforeAll(async () => {
  const listening = await startDeno();
  expect(listening.map((l) => l.app)).toEqual(['inference']); // the other apps' port 0 disables them
  base = `http://127.0.0.1:${listening[0]!.port}`;
  const res = await fetch(`${base}/healthz?wait=60`);
  expect(res.status, log).toBe(200);
}, 75_000);

afterAll(async () => {
  const proc = child;
  if (!proc || proc.exitCode !== null) return;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => proc.once('exit', (code, signal) => r({ code, signal })));
  const sentAt = performance.now();
  proc.kill('SIGTERM');
  let killed = false;
  const t = setTimeout(() => {
    killed = true;
    proc.kill('SIGKILL');
  }, 15_000);
  const { code, signal } = await exited;
  clearTimeout(t);
  const how = killed ? 'still running 15 s after SIGTERM (killed)' : `exit code ${code}, signal ${signal}, ${Math.round(performance.now() - sentAt)} ms after SIGTERM`;
  expect(code, `deno did not shut down cleanly on SIGTERM: ${how}\n${log}`).toBe(0);
});

describe('Deno entry (server/main_deno.ts)', () => {
  it('serves /generate with the reference greedy continuation', async () => {
    const status = (await (await fetch(`${base}/status`)).json()) as { groups: { primary: { backend: string; device: string }[] } };
    const reader = status.groups.primary[0]!;
    console.info(`Deno reader GPU: ${reader.backend} (${reader.device})`);
    expect(['navigator', 'native', 'swiftshader', 'opengles']).toContain(reader.backend);

    const res = await fetch(`${base}/generate`, json({ text: 'Once upon a time', max_new_tokens: 8 }));
    expect(res.status, log).toBe(200);
    const body = (await res.json()) as { text: string; finish_reason: string; usage: { completion_tokens: number } };
    expect(body.finish_reason).toBe('length');
    expect(body.usage.completion_tokens).toBe(8);
    expect(body.text).toBe(', there was a little girl');
    expect(REF_TEXT.startsWith(body.text)).toBe(true);
  });

  it('streams the same tokens over SSE', async () => {
    const res = await fetch(`${base}/generate_stream`, json({ text: 'Once upon a time', max_new_tokens: 8 }));
    expect(res.status, log).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const events = parseSse(await res.text());
    const tokens = events.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as { text: string; token_id: number });
    expect(tokens.map((t) => t.token_id)).toEqual(REF_IDS);
    expect(REF_TEXT.startsWith(tokens.map((t) => t.text).join(''))).toBe(true);
    expect(events.at(-1)!.event).toBe('done');
  });

  it('a streaming client that disconnects cancels its request', async () => {
    type Status = { requests_in_flight: number; reserved_bytes: number; groups: { primary: { stats: { computedTokens: number } }[] } };
    const status = async (): Promise<Status> => (await (await fetch(`${base}/status`)).json()) as Status;
    const before = (await status()).groups.primary[0]!.stats.computedTokens;
    const ac = new AbortController();
    // Uncancelled, greedy decoding runs all 450 tokens (no EOS before).
    const res = await fetch(`${base}/generate_stream`, { ...json({ text: 'Once upon a time', max_new_tokens: 450 }), signal: ac.signal });
    const reader = res.body!.getReader();
    await reader.read();
    ac.abort();
    let s = await status();
    for (let i = 0; i < 50 && (s.requests_in_flight > 0 || s.reserved_bytes > 0); i++) {
      await new Promise((r) => setTimeout(r, 100));
      s = await status();
    }
    expect(s).toMatchObject({ requests_in_flight: 0, reserved_bytes: 0 });
    expect(s.groups.primary[0]!.stats.computedTokens - before).toBeLessThan(200);
  });
});
