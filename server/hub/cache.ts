/**
 * The Hugging Face cache layout on disk, as huggingface_hub writes it, so
 * models pulled here and by Python tools are shared:
 *
 *   $HF_HOME/hub/models--{org}--{name}/
 *     blobs/{etag}                 file bytes, named by sha256 (LFS) or git blob sha1
 *     blobs/{etag}.incomplete      a download in progress (resumed with Range)
 *     snapshots/{commit}/{path}    symlinks to ../../blobs/{etag}
 *     refs/{revision}              the commit a revision (e.g. main) resolved to
 *
 * HF_HOME defaults to $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface;
 * HF_HUB_CACHE overrides the hub folder itself.
 */
import { homedir } from 'node:os';
import { join } from 'node:path';
import { InvalidRequestError } from '../../core/errors.ts';

/** `org/name` or `org/name:file.gguf`; null when `s` is not a Hub id (paths, URLs). */
export function parseHubId(s: string): { repo: string; file?: string } | null {
  const m = /^([A-Za-z0-9][\w.-]*)\/([\w.-]+)(?::(.+))?$/.exec(s);
  if (!m || s.startsWith('.') || m[2] === '..' || m[1] === '..') return null;
  const file = m[3];
  if (file !== undefined && (file.startsWith('/') || file.split('/').includes('..'))) {
    throw new InvalidRequestError('invalid_model', `invalid file in Hub id ${s}`, { field: 'model' });
  }
  return { repo: `${m[1]}/${m[2]}`, ...(file ? { file } : {}) };
}

export function hubCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.HF_HUB_CACHE) return env.HF_HUB_CACHE;
  const home = env.HF_HOME ?? join(env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'huggingface');
  return join(home, 'hub');
}

export function repoDir(repo: string, env: NodeJS.ProcessEnv = process.env): string {
  return join(hubCacheDir(env), `models--${repo.replace('/', '--')}`);
}
