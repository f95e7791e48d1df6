/**
 * Body limits are counted as bytes arrive: a 300 MB chunked upload to
 * /generate (streamed from a generator, never allocated whole) is refused with
 * 413 `body_too_large` while the server's resident memory grows by less than
 * 10 MB. The server runs in a child process (test/server/body_child.ts) so its
 * RSS is its own; it is sampled from /proc every 10 ms during the upload.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const CHILD = fileURLToPath(new URL('./body_child.ts', import.meta.url));
const TSX = fileURLToPath(new URL('../../node_modules/.bin/tsx', import.meta.url));

const rssBytes = (pid: number): number => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;

/** POSTs `total` bytes in 64 KiB chunks (Transfer-Encoding: chunked), stopping as soon as an answer arrives. */
function streamUpload(port: number, path: string, total: number): Promise<{ status: number; body: string; sent: number }> {
  return new Promise((resolve, reject) => {
    const chunk = Buffer.alloc(65536, 0x20);
    let sent = 0;
    let answered = false;
    const req = request({ host: '127.0.0.1', port, path, method: 'POST', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } }, (res) => {
      answered = true;
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode ?? 0, body, sent });
      });
    });
    req.on('error', (e) => (answered ? undefined : reject(e)));
    req.write('{"text":"');
    const pump = (): void => {
      while (!answered && sent < total) {
        sent += chunk.length;
        if (!req.write(chunk)) {
          req.once('drain', pump);
          return;
        }
      }
      if (!answered) req.end('"}');
    };
    pump();
  });
}

describe('streamed body limits', () => {
  let child: ChildProcess;
  let port = 0;

  beforeAll(async () => {
    child = spawn(TSX, [CHILD], { stdio: ['ignore', 'pipe', 'inherit'] });
    port = await new Promise<number>((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /PORT (\d+)/.exec(out);
        if (m) resolve(Number(m[1]));
      });
      child.once('exit', (code) => reject(new Error(`server exited ${code}`)));
    });
  }, 60_000);
  afterAll(() => {
    child?.kill('SIGTERM');
  });

  it('refuses a 300 MB chunked /generate body with 413 and under 10 MB of RSS growth', async () => {
    const pid = child.pid!;
    await new Promise((r) => setTimeout(r, 500)); // settle start-up allocations
    const before = rssBytes(pid);
    let peak = before;
    const timer = setInterval(() => (peak = Math.max(peak, rssBytes(pid))), 10);
    const r = await streamUpload(port, '/generate', 300 * 1024 * 1024);
    clearInterval(timer);
    peak = Math.max(peak, rssBytes(pid));
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body)).toMatchObject({ error: { code: 'body_too_large' } });
    expect(r.sent).toBeLessThan(64 * 1024 * 1024);
    expect(peak - before).toBeLessThan(10 * 1024 * 1024);
    // The server keeps answering.
    const again = await streamUpload(port, '/v1/completions', 4 * 1024 * 1024);
    expect(again.status).toBe(413);
  }, 120_000);
});
