/**
 * How the main thread runs a reader's worker, chosen by runtime: Node
 * worker_threads (worker_boot.mjs registers tsx, then worker_entry.ts) or a
 * module Web Worker (Deno, which has navigator.gpu inside workers:
 * web_worker_entry.ts). ManagedReader sees one handle either way: the
 * protocol endpoint (core/engine/protocol.ts), error and exit notifications,
 * and terminate.
 */
import { Worker as NodeWorker } from 'node:worker_threads';
import type { ErrorJSON } from '../../core/errors.ts';
import type { Endpoint, Msg } from '../../core/engine/protocol.ts';
import type { ReaderInit } from './open_reader.ts';
import { SHUTDOWN, SHUTDOWN_GRACE_MS } from './shutdown.ts';

export type { ReaderInit };

export interface WorkerHandle extends Endpoint {
  onError(cb: (e: Error) => void): void;
  /**
   * Called once when the worker is gone (exited, crashed or terminated);
   * `reason`, when given, is what requests in flight fail with (a remote
   * reader's dropped connection: 503 `reader_disconnected`).
   */
  onExit(cb: (reason?: ErrorJSON) => void): void;
  terminate(): Promise<void>;
}

export type WorkerTransport = (init: ReaderInit) => WorkerHandle;

/**
 * Running from the TypeScript sources (a checkout, tsx or Deno) rather than the
 * built package (dist/*.js): worker entries are then the .ts files (through the
 * tsx bootstrap on Node), else their compiled .js siblings.
 */
const FROM_SOURCE = import.meta.url.endsWith('.ts');

/**
 * Reader threads end one at a time, process-wide. Two threads tearing down their GPU devices at
 * once crash the process (SIGSEGV or SIGABRT inside Dawn / Mesa's OpenGL ES driver, whose EGL
 * display is shared by every thread): a server stopping two OpenGL ES readers together did so
 * in 6 of 8 runs, and in none of 8 with the stops in sequence.
 */
let teardowns: Promise<unknown> = Promise.resolve();
function oneAtATime<T>(f: () => Promise<T>): Promise<T> {
  const run = teardowns.then(f);
  teardowns = run.catch(() => undefined);
  return run;
}

/** A worker thread; the init travels as workerData. */
export const nodeTransport: WorkerTransport = (init) => {
  const worker = new NodeWorker(new URL(FROM_SOURCE ? './worker_boot.mjs' : './worker_entry.js', import.meta.url), { workerData: init, stdout: false, stderr: false });
  let gone = false;
  worker.once('exit', () => (gone = true));
  return {
    post: (m) => worker.postMessage(m),
    onMessage: (cb) => worker.on('message', (m: Msg) => cb(m)),
    onError: (cb) => worker.on('error', cb),
    onExit: (cb) => worker.on('exit', () => cb()),
    terminate: () =>
      oneAtATime(async () => {
        // Ask the worker to release its device and exit; terminate only if it does not in time.
        if (gone) return;
        const exited = new Promise<boolean>((resolve) => worker.once('exit', () => resolve(true)));
        worker.postMessage(SHUTDOWN);
        let timer: ReturnType<typeof setTimeout> | undefined;
        const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), SHUTDOWN_GRACE_MS)));
        const clean = await Promise.race([exited, late]);
        clearTimeout(timer);
        if (!clean) await worker.terminate();
      }),
  };
};

/**
 * A module Web Worker; the init is its first message. Web Workers have no
 * exit event: an uncaught error is the worker's death (it is terminated and
 * reported as an exit, so the manager restarts it), and `terminate` reports
 * the exit itself.
 */
export const webTransport: WorkerTransport = (init) => {
  const worker = new Worker(new URL(FROM_SOURCE ? './web_worker_entry.ts' : './web_worker_entry.js', import.meta.url), { type: 'module', name: `weft-reader-${init.readerId}` });
  const errorCbs: ((e: Error) => void)[] = [];
  const exitCbs: (() => void)[] = [];
  let exited = false;
  const exit = (): void => {
    if (exited) return;
    exited = true;
    worker.terminate();
    for (const cb of exitCbs) cb();
  };
  worker.addEventListener('error', (ev) => {
    ev.preventDefault(); // unhandled, a worker's error would take the whole process down (Deno)
    const err = new Error(ev.message || 'reader worker error');
    for (const cb of errorCbs) cb(err);
    exit();
  });
  worker.postMessage({ init });
  return {
    post: (m) => worker.postMessage(m),
    onMessage: (cb) => worker.addEventListener('message', (ev: MessageEvent<Msg>) => cb(ev.data)),
    onError: (cb) => errorCbs.push(cb),
    onExit: (cb) => exitCbs.push(cb),
    terminate: async () => exit(),
  };
};

/** Web Workers on Deno, worker threads on Node. */
export function defaultTransport(): WorkerTransport {
  return 'Deno' in globalThis ? webTransport : nodeTransport;
}

/** Lets a timer not keep the process alive (Node timers are objects, Deno's are ids). */
export function unrefTimer(t: ReturnType<typeof setTimeout>): void {
  if (typeof t === 'object' && t !== null && 'unref' in t) t.unref();
  else (globalThis as { Deno?: { unrefTimer(id: number): void } }).Deno?.unrefTimer(t as unknown as number);
}
