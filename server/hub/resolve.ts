/**
 * `--model` values that name a Hub model (`org/name`, `org/name:file.gguf`)
 * become the local snapshot path, pulled first unless already cached; local
 * paths (anything that exists on disk, or starts with `.` / `/`) and URLs pass
 * through. Pull progress goes to stderr: a bar on a terminal, else one JSON
 * line per file step (`{"event":"pull_progress",...}`).
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { parseHubId } from './cache.ts';
import { pullModel, type PullProgress } from './download.ts';

/** A progress reporter for stderr: a redrawn bar on a TTY, JSON lines (at most one per 10 % of a file) otherwise. */
export function stderrProgress(repo: string): (p: PullProgress) => void {
  const tty = !!process.stderr.isTTY;
  let lastFile = '';
  let lastTenth = -1;
  return (p) => {
    const frac = p.allTotal ? p.allLoaded / p.allTotal : 0;
    if (tty) {
      const w = 30;
      const bar = '█'.repeat(Math.round(frac * w)).padEnd(w, '░');
      process.stderr.write(`\r${repo} ${bar} ${(frac * 100).toFixed(0).padStart(3)}% ${(p.allLoaded / 2 ** 20).toFixed(1)}/${(p.allTotal / 2 ** 20).toFixed(1)} MiB ${p.file.slice(0, 30).padEnd(30)}`);
      if (p.allLoaded === p.allTotal) process.stderr.write('\n');
      return;
    }
    const tenth = p.total ? Math.floor((10 * p.loaded) / p.total) : 10;
    if (p.file === lastFile && tenth === lastTenth) return;
    lastFile = p.file;
    lastTenth = tenth;
    process.stderr.write(`${JSON.stringify({ event: 'pull_progress', repo, file: p.file, loaded: p.loaded, total: p.total, all_loaded: p.allLoaded, all_total: p.allTotal })}\n`);
  };
}

/** The local path for a `--model` value, pulling Hub ids that are not cached. */
export async function resolveModelArg(model: string, opts: { onProgress?: (p: PullProgress) => void } = {}): Promise<string> {
  if (await stat(model).then(() => true, () => false)) return model;
  const id = parseHubId(model);
  if (!id) return model;
  const snap = await pullModel(id.repo, { ...(id.file ? { file: id.file } : {}), onProgress: opts.onProgress ?? stderrProgress(id.repo) });
  return id.file ? join(snap, id.file) : snap;
}

/** Bytes of a pull so far (all files together) and the file in progress, as reader summaries show them. */
export interface FetchProgress {
  loaded: number;
  total: number;
  file: string;
}

/**
 * For a model value that is a Hub id and not an existing path: a function
 * that pulls it (HF_HOME, HF_ENDPOINT, HF_TOKEN from this process's
 * environment; abortable) and returns the local path; null otherwise (the
 * value is loaded as a path). Malformed ids with a file part throw
 * `invalid_model`.
 */
export async function hubModelFetch(model: string): Promise<((onProgress: (p: FetchProgress) => void, signal: AbortSignal) => Promise<string>) | null> {
  if (await stat(model).then(() => true, () => false)) return null;
  const id = parseHubId(model);
  if (!id) return null;
  return async (onProgress, signal) => {
    const snap = await pullModel(id.repo, {
      ...(id.file ? { file: id.file } : {}),
      fetch: (url, init) => fetch(url, { ...init, signal }),
      onProgress: (p) => onProgress({ loaded: p.allLoaded, total: p.allTotal, file: p.file }),
    });
    return id.file ? join(snap, id.file) : snap;
  };
}
