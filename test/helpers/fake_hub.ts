/**
 * A stand-in Hugging Face Hub on loopback HTTP that speaks exactly the subset
 * server/hub/download.ts uses (docs/models.md): the model info with blob
 * metadata, and `resolve` downloads honouring `Range: bytes=N-` (206). Real
 * HTTP and real files: each repo is served from a local model directory, with
 * sha256 (LFS, for .safetensors / .gguf) and git blob sha1 ids computed from
 * its bytes. Knobs for failure paths: a repo that needs a token (gated), a
 * download that drops its connection part-way once, a file whose bytes are
 * changed after its metadata was listed, a download dripped in small chunks
 * (so progress can be watched). `requests` records every call.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

export interface FakeRepo {
  /** Local directory whose files the repo holds. */
  dir: string;
  /** Requests need `Authorization: Bearer {token}` (401 without, 403 with a wrong one). */
  token?: string;
  /** The first download of this file is cut after this many bytes (connection destroyed). */
  dropAfter?: { file: string; bytes: number };
  /** This file is served with one byte flipped (its listed hash stays the true one). */
  corrupt?: string;
  /** Downloads are sent `bytes` at a time with `ms` between chunks. */
  drip?: { bytes: number; ms: number };
}

export interface FakeHub {
  endpoint: string;
  requests: { method: string; path: string; range?: string }[];
  close(): Promise<void>;
}

const LFS = /\.(safetensors|gguf)$/;

function drip(res: ServerResponse, body: Buffer, d: { bytes: number; ms: number }, at = 0): void {
  if (res.destroyed) return;
  if (at + d.bytes >= body.length) return void res.end(body.subarray(at));
  res.write(body.subarray(at, at + d.bytes));
  setTimeout(() => drip(res, body, d, at + d.bytes), d.ms);
}

export async function startFakeHub(repos: Record<string, FakeRepo>): Promise<FakeHub> {
  const sha = createHash('sha1').update(JSON.stringify(Object.keys(repos))).digest('hex');
  const requests: FakeHub['requests'] = [];
  const dropped = new Set<string>();
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    requests.push({ method: req.method ?? 'GET', path: url.pathname, ...(req.headers.range ? { range: req.headers.range } : {}) });
    const m = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/([^/]+)$/.exec(url.pathname) ?? /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(url.pathname);
    const repo = m ? repos[m[1]!] : undefined;
    if (!m || !repo) return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"Repository not found"}');
    const auth = req.headers.authorization;
    if (repo.token && auth !== `Bearer ${repo.token}`) return void res.writeHead(auth ? 403 : 401, { 'content-type': 'application/json' }).end('{"error":"Access to model is restricted"}');
    const files = readdirSync(repo.dir).filter((f) => !f.startsWith('.'));
    if (url.pathname.startsWith('/api/')) {
      const siblings = files.map((f) => {
        const b = readFileSync(join(repo.dir, f));
        const blobId = createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex');
        return { rfilename: f, size: b.length, blobId, ...(LFS.test(f) ? { lfs: { sha256: createHash('sha256').update(b).digest('hex'), size: b.length } } : {}) };
      });
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: m[1], sha, siblings }));
    }
    const file = decodeURIComponent(m[3]!);
    if (m[2] !== sha || !files.includes(file)) return void res.writeHead(404).end('Entry not found');
    let body = readFileSync(join(repo.dir, file));
    if (repo.corrupt === file) (body = Buffer.from(body)), (body[body.length >> 1]! ^= 0xff);
    const start = Number(/^bytes=(\d+)-$/.exec(req.headers.range ?? '')?.[1] ?? 0);
    const part = body.subarray(start);
    res.writeHead(start ? 206 : 200, { 'content-length': part.length, ...(start ? { 'content-range': `bytes ${start}-${body.length - 1}/${body.length}` } : {}) });
    const key = `${m[1]}/${file}`;
    if (repo.dropAfter?.file === file && !dropped.has(key)) {
      dropped.add(key);
      res.write(part.subarray(0, repo.dropAfter.bytes), () => setTimeout(() => res.destroy(), 20));
      return;
    }
    if (repo.drip) return void drip(res, part, repo.drip);
    res.end(part);
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () => new Promise<void>((ok) => (server.closeAllConnections(), server.close(() => ok()))),
  };
}
