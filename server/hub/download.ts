/**
 * Pulls a model from a Hugging Face Hub (HF_ENDPOINT, default
 * https://huggingface.co) into the HF cache layout (cache.ts) and returns its
 * snapshot directory. The Hub calls used, and nothing else (docs/models.md):
 *
 *   GET {endpoint}/api/models/{repo}/revision/{rev}?blobs=true
 *       → {sha, siblings: [{rfilename, size?, blobId?, lfs?: {sha256, size}}]}
 *   GET {endpoint}/{repo}/resolve/{sha}/{path}   (Range: bytes=N- to resume)
 *
 * With HF_TOKEN, both carry `Authorization: Bearer …`. 401 / 403 become
 * HubAuthError (`hub_auth_required` / `hub_access_denied`), 404
 * `hub_model_not_found`. LFS files are checked against the sha256 the Hub
 * lists; others against their git blob sha1; a mismatch deletes the download
 * and fails with `hub_checksum_mismatch`. `refs/{rev}` is written only after
 * every file is in place, so a model whose ref exists is complete and is
 * returned without any network call.
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readFile, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { AuthError, NotFoundError, UnavailableError, WeftError } from '../../core/errors.ts';
import { repoDir } from './cache.ts';

export class HubAuthError extends AuthError {}
export class HubChecksumError extends WeftError {}

export interface PullProgress {
  file: string;
  /** Bytes of this file on disk, and its size (0 when the Hub gave none). */
  loaded: number;
  total: number;
  /** Bytes of all files to fetch, done and in all. */
  allLoaded: number;
  allTotal: number;
}

export interface PullOptions {
  /** Only this file (e.g. one .gguf); default: the model's config, tokenizer and safetensors files. */
  file?: string;
  revision?: string;
  env?: NodeJS.ProcessEnv;
  fetch?: typeof fetch;
  onProgress?: (p: PullProgress) => void;
}

interface Sibling {
  rfilename: string;
  size?: number;
  blobId?: string;
  lfs?: { sha256: string; size: number };
}

/** Files a safetensors model needs; weights in other formats are skipped. */
const WANTED = /(^|\/)([^/]+\.json|[^/]+\.safetensors|tokenizer\.model|[^/]+\.txt|[^/]+\.jinja)$/;

const endpointOf = (env: NodeJS.ProcessEnv): string => (env.HF_ENDPOINT ?? 'https://huggingface.co').replace(/\/+$/, '');

function httpError(res: Response, repo: string, what: string, hasToken: boolean): WeftError {
  if (res.status === 401 || res.status === 403) {
    const code = res.status === 401 ? 'hub_auth_required' : 'hub_access_denied';
    const hint = hasToken ? 'the token in HF_TOKEN has no access to it (accept its licence on the Hub?)' : 'it is gated or private: set HF_TOKEN to a token with access';
    return new HubAuthError(code, `${repo}: the Hub answered ${res.status} for ${what}; ${hint}`, { repo, status: res.status });
  }
  if (res.status === 404) return new NotFoundError('hub_model_not_found', `${repo}: ${what} is not on the Hub (404)`, { repo });
  return new UnavailableError('hub_unavailable', `${repo}: the Hub answered ${res.status} for ${what}`, 5, { repo, status: res.status });
}

/** The snapshot directory of a completely pulled model, or null (no network). */
export async function cachedSnapshot(repo: string, opts: { revision?: string; file?: string; env?: NodeJS.ProcessEnv } = {}): Promise<string | null> {
  const dir = repoDir(repo, opts.env);
  const sha = await readFile(join(dir, 'refs', opts.revision ?? 'main'), 'utf8').catch(() => null);
  if (!sha) return null;
  const snap = join(dir, 'snapshots', sha.trim());
  const probe = opts.file ?? 'config.json';
  return (await stat(join(snap, probe)).catch(() => null))?.isFile() ? snap : null;
}

async function hashFile(path: string, h: Hash): Promise<void> {
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
}

/** Downloads one file into blobs/, resuming a `.incomplete` part, and checks its hash. */
async function fetchBlob(ctx: { f: typeof fetch; url: string; headers: Record<string, string>; repo: string; hasToken: boolean }, s: Sibling, blob: string, onBytes: (n: number) => void): Promise<void> {
  if ((await stat(blob).catch(() => null))?.isFile()) return onBytes((await stat(blob)).size);
  const part = `${blob}.incomplete`;
  const have = (await stat(part).catch(() => null))?.size ?? 0;
  const total = s.lfs?.size ?? s.size ?? 0;
  const res = await ctx.f(ctx.url, { headers: { ...ctx.headers, ...(have > 0 ? { range: `bytes=${have}-` } : {}) } }).catch((e: unknown) => {
    throw new UnavailableError('hub_unreachable', `${ctx.repo}: cannot reach the Hub: ${(e as Error).message}`, 5, { repo: ctx.repo });
  });
  if (!res.ok) throw httpError(res, ctx.repo, s.rfilename, ctx.hasToken);
  const resumed = have > 0 && res.status === 206;
  const h = s.lfs ? createHash('sha256') : createHash('sha1');
  if (!s.lfs) h.update(`blob ${total}\0`);
  if (resumed) await hashFile(part, h);
  let done = resumed ? have : 0;
  const out = createWriteStream(part, { flags: resumed ? 'a' : 'w' });
  const closed = new Promise<void>((ok, bad) => (out.on('close', ok), out.on('error', bad)));
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      h.update(chunk);
      if (!out.write(chunk)) await new Promise<void>((r) => out.once('drain', () => r()));
      done += chunk.byteLength;
      onBytes(done);
    }
  } catch (e) {
    out.end();
    await closed;
    // The part stays on disk; the next pull resumes it.
    throw new UnavailableError('hub_download_interrupted', `${ctx.repo}: the download of ${s.rfilename} broke off after ${done} bytes (${(e as Error).message}); run the pull again to resume`, 5, { repo: ctx.repo, file: s.rfilename, bytes: done });
  }
  out.end();
  await closed;
  // A git blob id covers `blob {size}\0` + bytes, so it is checkable only with the size.
  const want = s.lfs?.sha256 ?? (s.size !== undefined ? s.blobId : undefined);
  const got = h.digest('hex');
  if (want && got !== want) {
    await rm(part, { force: true });
    throw new HubChecksumError('hub_checksum_mismatch', `${ctx.repo}: ${s.rfilename} does not match the Hub's ${s.lfs ? 'sha256' : 'blob id'} (want ${want}, got ${got}); the download was deleted`, { repo: ctx.repo, file: s.rfilename, want, got });
  }
  await rename(part, blob);
}

/** Pulls `repo` (all model files, or `opts.file`) and returns the snapshot directory. */
export async function pullModel(repo: string, opts: PullOptions = {}): Promise<string> {
  const env = opts.env ?? process.env;
  const rev = opts.revision ?? 'main';
  const cached = await cachedSnapshot(repo, { revision: rev, env, ...(opts.file ? { file: opts.file } : {}) });
  if (cached) return cached;
  const f = opts.fetch ?? fetch;
  const token = env.HF_TOKEN;
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  const base = endpointOf(env);
  const infoUrl = `${base}/api/models/${repo}/revision/${encodeURIComponent(rev)}?blobs=true`;
  const res = await f(infoUrl, { headers }).catch((e: unknown) => {
    throw new UnavailableError('hub_unreachable', `${repo}: cannot reach the Hub at ${base}: ${(e as Error).message}`, 5, { repo });
  });
  if (!res.ok) throw httpError(res, repo, 'the model', !!token);
  const info = (await res.json()) as { sha?: string; siblings?: Sibling[] };
  const sha = info.sha;
  if (!sha || !/^[0-9a-f]{40}$/.test(sha) || !Array.isArray(info.siblings)) throw new UnavailableError('hub_bad_answer', `${repo}: the Hub's model info has no commit sha or file list`, 5, { repo });
  const files = info.siblings.filter((s) => (opts.file ? s.rfilename === opts.file : WANTED.test(s.rfilename)));
  if (opts.file && files.length === 0) throw new NotFoundError('hub_file_not_found', `${repo} has no file ${opts.file}`, { repo, file: opts.file });
  const dir = repoDir(repo, env);
  await mkdir(join(dir, 'blobs'), { recursive: true });
  const allTotal = files.reduce((a, s) => a + (s.lfs?.size ?? s.size ?? 0), 0);
  const done = new Map<string, number>();
  for (const s of files) {
    const etag = s.lfs?.sha256 ?? s.blobId ?? createHash('sha256').update(`${sha}/${s.rfilename}`).digest('hex');
    if (!/^[0-9a-f]{40,64}$/.test(etag)) throw new UnavailableError('hub_bad_answer', `${repo}: bad blob id for ${s.rfilename}`, 5, { repo });
    const blob = join(dir, 'blobs', etag);
    const url = `${base}/${repo}/resolve/${sha}/${s.rfilename.split('/').map(encodeURIComponent).join('/')}`;
    const total = s.lfs?.size ?? s.size ?? 0;
    await fetchBlob({ f, url, headers, repo, hasToken: !!token }, s, blob, (n) => {
      done.set(s.rfilename, n);
      opts.onProgress?.({ file: s.rfilename, loaded: n, total, allLoaded: [...done.values()].reduce((a, b) => a + b, 0), allTotal });
    });
    const link = join(dir, 'snapshots', sha, ...s.rfilename.split('/'));
    await mkdir(dirname(link), { recursive: true });
    await rm(link, { force: true });
    await symlink(relative(dirname(link), blob), link);
  }
  await mkdir(join(dir, 'refs'), { recursive: true });
  await writeFile(join(dir, 'refs', rev), sha);
  return join(dir, 'snapshots', sha);
}
