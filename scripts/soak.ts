/**
 * `npm run soak [-- --short]`: a bounded soak of a real server on loopback,
 * printing one table (phase, what was measured, pass/fail); exit code 1 when a
 * phase fails. Phases:
 *
 *   load         N streaming clients for T s against /generate_stream: 0 errors
 *   overload     K concurrent /generate at once: only 200 or 503 + Retry-After,
 *                healthy and serving afterwards
 *   cancel       C streams cancelled after their first event: KV blocks in use
 *                back to the count before, nothing in flight
 *   fuzz         malformed requests over every POST/PUT route of the OpenAPI
 *                documents (inference, management): no 5xx but 503, no stack
 *   crash        documents: SIGKILL the document server (test/documents/
 *                child_server.ts, PGlite on disk) mid-ingest, restart, every
 *                accepted document ready, none completed twice
 *
 * The server runs in this process (readers in worker threads) with the
 * configured model (WEFT_MODEL / config.yaml; WEFT_BACKEND picks the GPU
 * backend) on ephemeral ports of 127.0.0.1. `--short` (CI) finishes in under
 * two minutes on a small CPU machine; the full run takes a few minutes.
 * Server logs go to stderr.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadConfig } from '../server/config.ts';
import { start, type Running } from '../server/main.ts';

const { values: args } = parseArgs({ options: { short: { type: 'boolean' }, 'no-crash': { type: 'boolean' } } });
const P = args.short
  ? { clients: 4, seconds: 10, overload: 48, cancel: 24, fuzz: 400, docs: 24, kills: 1 }
  : { clients: 32, seconds: 30, overload: 256, cancel: 480, fuzz: 4000, docs: 200, kills: 3 };

interface Row { phase: string; measured: string; pass: boolean }
const rows: Row[] = [];
const record = (phase: string, measured: string, pass: boolean): void => void rows.push({ phase, measured, pass });
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const until = async (cond: () => Promise<boolean> | boolean, ms: number): Promise<boolean> => {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) return false;
    await sleep(50);
  }
  return true;
};
const pct = (xs: number[], p: number): number => (xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]! : 0);
const post = (body: unknown, signal?: AbortSignal): RequestInit => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), ...(signal ? { signal } : {}) });
const PROMPT = 'Once upon a time there was a little';

/** One /generate_stream call read to its end: ok when it ends with a final event and holds no error event. */
async function stream(base: string, maxNew: number): Promise<{ ok: boolean; ms: number; ttftMs: number }> {
  const t0 = performance.now();
  try {
    const r = await fetch(`${base}/generate_stream`, post({ text: PROMPT, max_new_tokens: maxNew, sampling_temperature: 0.8, seed: Math.floor(Math.random() * 1e6) }));
    if (r.status !== 200 || !r.body) return { ok: false, ms: performance.now() - t0, ttftMs: 0 };
    let text = '';
    let ttft = 0;
    const dec = new TextDecoder();
    const reader = r.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!ttft) ttft = performance.now() - t0;
      text += dec.decode(value, { stream: true });
    }
    return { ok: !/event: ?error/.test(text) && /finish_reason|"done"|event: ?(end|done)/.test(text), ms: performance.now() - t0, ttftMs: ttft };
  } catch {
    return { ok: false, ms: performance.now() - t0, ttftMs: 0 };
  }
}

async function loadPhase(base: string): Promise<void> {
  const end = Date.now() + P.seconds * 1000;
  const ttft: number[] = [];
  let n = 0;
  let errors = 0;
  await Promise.all(
    Array.from({ length: P.clients }, async () => {
      while (Date.now() < end) {
        const r = await stream(base, 8);
        n++;
        if (!r.ok) errors++;
        else ttft.push(r.ttftMs);
      }
    }),
  );
  record('load', `${P.clients} clients × ${P.seconds} s: ${n} streams, ${errors} errors, TTFT p50 ${pct(ttft, 50).toFixed(0)} ms p99 ${pct(ttft, 99).toFixed(0)} ms`, errors === 0 && n > 0);
}

async function overloadPhase(base: string): Promise<void> {
  const statuses = new Map<string, number>();
  let bad = 0;
  await Promise.all(
    Array.from({ length: P.overload }, async () => {
      let key: string;
      try {
        const r = await fetch(`${base}/generate`, post({ text: PROMPT, max_new_tokens: 32 }));
        await r.arrayBuffer();
        key = String(r.status);
        if (!(r.status === 200 || (r.status === 503 && r.headers.get('retry-after')))) bad++;
      } catch {
        key = 'network error';
        bad++;
      }
      statuses.set(key, (statuses.get(key) ?? 0) + 1);
    }),
  );
  const healthy = await until(async () => (await fetch(`${base}/healthz`)).status === 200, 30_000);
  const after = await stream(base, 4);
  const seen = [...statuses].map(([k, v]) => `${k}×${v}`).join(' ');
  record('overload', `${P.overload} at once: ${seen}; healthy after: ${healthy}, serving: ${after.ok}`, bad === 0 && healthy && after.ok);
}

const kvUsed = async (base: string): Promise<number> => {
  const text = await (await fetch(`${base}/metrics`)).text();
  return [...text.matchAll(/^weft_kv_blocks_used\{[^}]*\} (\d+)/gm)].reduce((s, m) => s + Number(m[1]), 0);
};
const inFlight = async (svc: Running['service']): Promise<number> => svc.readers.all().reduce((s, r) => s + r.inFlight, 0);

async function cancelPhase(base: string, running: Running): Promise<void> {
  await until(async () => (await inFlight(running.service)) === 0, 30_000);
  const before = await kvUsed(base);
  let started = 0;
  const controllers: AbortController[] = [];
  // Every stream is opened and has its first event before any is cancelled, so the pool is in use when they go.
  await Promise.all(
    Array.from({ length: P.cancel }, async (_, i) => {
      const ac = new AbortController();
      controllers.push(ac);
      try {
        const r = await fetch(`${base}/generate_stream`, post({ text: `${PROMPT} ${i}`, max_new_tokens: 200 }, ac.signal));
        await r.body!.getReader().read();
        started++;
      } catch {
        // refused under load: nothing to cancel
      }
    }),
  );
  const during = await kvUsed(base);
  for (const ac of controllers) ac.abort();
  const drained = await until(async () => (await inFlight(running.service)) === 0 && (await kvUsed(base)) <= before, 60_000);
  const after = await kvUsed(base);
  record('cancel', `${P.cancel} streams (${started} started) cancelled: KV blocks in use ${before} → ${during} while open → ${after}, in flight ${await inFlight(running.service)}`, drained && during > before);
}

/** Malformed variants of a body with `props` (from the route's JSON schema). */
function variants(props: string[]): (string | Uint8Array)[] {
  const deep = (n: number): string => '['.repeat(n) + ']'.repeat(n);
  const out: (string | Uint8Array)[] = ['', '{', 'null', '[]', '"x"', '1e999', '{"a":1}{', deep(5000), `{"x":${deep(3000)}}`, '{"text":"\\u0000\\ud800"}', new Uint8Array([0xff, 0xfe, 0x00, 0x7b]), JSON.stringify({ ['k'.repeat(100_000)]: 1 })];
  const wrong: unknown[] = [null, true, -1, 1e308, -1e308, 0.5, '', '\u0000', 'x'.repeat(70_000), [], [[]], {}, { a: { b: {} } }, ['\u0000'], 2 ** 53 + 1];
  for (const p of props) for (const w of wrong) out.push(JSON.stringify({ [p]: w }));
  for (const p of props) out.push(JSON.stringify({ text: 'hi', [p]: { __proto__: 1, constructor: 'x' } }));
  const deepSchema = '{"type":"array","items":'.repeat(2000) + '{}' + '}'.repeat(2000);
  for (const p of props) out.push(`{"text":"hi",${JSON.stringify(p)}:${deepSchema}}`);
  return out;
}

async function fuzzPhase(bases: { base: string; skip: RegExp }[]): Promise<void> {
  const targets: { url: string; method: string; bodies: (string | Uint8Array)[] }[] = [];
  for (const { base, skip } of bases) {
    const doc = (await (await fetch(`${base}/openapi.json`)).json()) as { paths: Record<string, Record<string, { requestBody?: { content: { 'application/json': { schema: { properties?: Record<string, unknown> } } } } }>> };
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        if (method === 'get' || method === 'delete' || skip.test(`${method} ${path}`)) continue;
        const props = Object.keys(op.requestBody?.content['application/json'].schema.properties ?? { text: 1 });
        targets.push({ url: base + path.replace(/\{reader_id\}/g, 'primary-0').replace(/\{[^}]+\}/g, 'x%00y'), method: method.toUpperCase(), bodies: variants(props) });
      }
    }
  }
  let sent = 0;
  let fiveHundreds = 0;
  let leaks = 0;
  const examples: string[] = [];
  const one = async (k: number): Promise<void> => {
    const t = targets[k % targets.length]!;
    const body = t.bodies[Math.floor(k / targets.length) % t.bodies.length]!;
    const ct = k % 7 === 0 ? 'text/plain' : 'application/json';
    try {
      const r = await fetch(t.url, { method: t.method, headers: { 'content-type': ct }, body: body as BodyInit });
      const text = await r.text();
      sent++;
      const bad500 = r.status >= 500 && r.status !== 503;
      const leak = /\n\s+at |node_modules|\.ts:\d+:\d+/.test(text);
      if (bad500) fiveHundreds++;
      if (leak) leaks++;
      if ((bad500 || leak) && examples.length < 3) examples.push(`${t.method} ${t.url.replace(/^http:\/\/[^/]+/, '')} → ${r.status}`);
    } catch {
      sent++;
      fiveHundreds++;
    }
  };
  for (let k = 0; k < P.fuzz; k += 8) await Promise.all(Array.from({ length: Math.min(8, P.fuzz - k) }, (_, j) => one(k + j)));
  record('fuzz', `${sent} malformed requests over ${targets.length} routes: ${fiveHundreds} 5xx (503 allowed), ${leaks} stacks${examples.length ? ` (${examples.join('; ')})` : ''}`, fiveHundreds === 0 && leaks === 0);
}

interface Child { proc: ChildProcess; port: number; ready: string[]; exited: Promise<void> }
const CHILD = fileURLToPath(new URL('../test/documents/child_server.ts', import.meta.url));

function startChild(dataDir: string, template: string): Promise<Child> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ['--import', 'tsx', CHILD, dataDir, template], { stdio: ['ignore', 'pipe', 'ignore'] });
    const ready: string[] = [];
    const exited = new Promise<void>((r) => proc.once('exit', () => r()));
    let buf = '';
    proc.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.startsWith('PORT ')) resolve({ proc, port: Number(line.slice(5)), ready, exited });
        else if (line.startsWith('READY ')) ready.push(line.slice(6));
      }
    });
    proc.once('exit', (code) => reject(new Error(`document server exited (${code}) before listening`)));
  });
}

async function crashPhase(): Promise<void> {
  const { pgliteTemplate, TEMPLATE, b64 } = await import('../test/documents/helpers.ts');
  await pgliteTemplate();
  const dataDir = mkdtempSync(join(tmpdir(), 'weft-soak-docs-'));
  const runs: Child[] = [];
  let ids: string[] = [];
  try {
    let child = await startChild(dataDir, TEMPLATE);
    runs.push(child);
    const files = Array.from({ length: P.docs }, (_, d) => ({
      name: `doc${d}.txt`, doc_id: null, path: '', category: 'kb',
      bytes: b64(Array.from({ length: 6 }, (_, i) => `Document ${d} has sentence ${i} about crash safety.`).join(' ')),
    }));
    const r = await fetch(`http://127.0.0.1:${child.port}/api/v1/documents`, post({ files, chunk_units: 16, chunk_overlap: 2 }));
    ids = ((await r.json()) as { accepted: { doc_id: string }[] }).accepted.map((e) => e.doc_id);
    for (let k = 0; k < P.kills; k++) {
      const seen = runs.reduce((s, c) => s + c.ready.length, 0);
      await until(() => child.ready.length >= 2 || runs.reduce((s, c) => s + c.ready.length, 0) >= Math.min(ids.length, seen + 2), 60_000);
      child.proc.kill('SIGKILL');
      await child.exited;
      child = await startChild(dataDir, TEMPLATE);
      runs.push(child);
    }
    const done = await until(async () => {
      const states = await Promise.all(ids.map(async (id) => ((await (await fetch(`http://127.0.0.1:${child.port}/api/v1/document/${id}`)).json()) as { state: string }).state));
      return states.every((s) => s === 'ready');
    }, 120_000);
    const count = new Map<string, number>();
    for (const c of runs) for (const id of c.ready) count.set(id, (count.get(id) ?? 0) + 1);
    const twice = [...count.values()].filter((n) => n > 1).length;
    record('crash', `${P.kills} SIGKILL mid-ingest: ${ids.length} accepted, ${done ? ids.length : 'not all'} ready, ${twice} completed twice`, done && twice === 0 && ids.length === P.docs);
  } finally {
    for (const c of runs) c.proc.kill('SIGKILL');
    await Promise.all(runs.map((c) => c.exited));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main(): Promise<number> {
  const t0 = Date.now();
  const dataDir = mkdtempSync(join(tmpdir(), 'weft-soak-'));
  const config = loadConfig({ overrides: { host: '127.0.0.1', port: 0, embeddingModel: '', logDisableTimestamps: true, documents: { data_dir: join(dataDir, 'docs') } } });
  const running = await start(config, { ephemeral: true });
  const baseOf = (name: string): string => `http://127.0.0.1:${running.servers.find((s) => s.name === name)!.port}`;
  const base = baseOf('inference');
  try {
    await running.service.readers.waitSettled(300_000);
    if (!running.service.readers.allReady) throw new Error('the configured readers did not load');
    const phases: [string, () => Promise<void>][] = [
      ['load', () => loadPhase(base)],
      ['overload', () => overloadPhase(base)],
      ['cancel', () => cancelPhase(base, running)],
      ['fuzz', () => fuzzPhase([{ base, skip: /^$/ }, { base: baseOf('management'), skip: /\/models|\/reader_groups/ }])],
    ];
    if (!args['no-crash']) phases.push(['crash', crashPhase]);
    for (const [name, run] of phases) {
      const t = Date.now();
      try {
        await run();
      } catch (e) {
        record(name, `threw: ${(e as Error).message}`, false);
      }
      rows[rows.length - 1]!.measured += ` [${((Date.now() - t) / 1000).toFixed(1)} s]`;
    }
  } finally {
    await running.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
  const w = Math.max(...rows.map((r) => r.phase.length), 5);
  process.stdout.write(`\n${'phase'.padEnd(w)}  pass  measured\n${'-'.repeat(w)}  ----  --------\n`);
  for (const r of rows) process.stdout.write(`${r.phase.padEnd(w)}  ${r.pass ? 'yes ' : 'NO  '}  ${r.measured}\n`);
  process.stdout.write(`\n${args.short ? 'short' : 'full'} soak in ${((Date.now() - t0) / 1000).toFixed(0)} s: ${rows.every((r) => r.pass) ? 'all passed' : 'FAILED'}\n`);
  return rows.every((r) => r.pass) ? 0 : 1;
}

process.exitCode = await main();
process.exit();
