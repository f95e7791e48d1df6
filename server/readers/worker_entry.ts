/**
 * A reader's worker thread: owns one GPU device and one loaded model, and
 * serves ReaderApi to the main thread over the worker port. Loading or a crash
 * here never blocks the HTTP thread; the manager restarts a dead worker.
 * (Runtimes with Web Workers, i.e. Deno, use web_worker_entry.ts instead.)
 */
import { parentPort, workerData } from 'node:worker_threads';
import { errorToJSON } from '../../core/errors.ts';
import { serveReader, type Endpoint, type Msg } from '../../core/engine/protocol.ts';
import type { GpuContext } from '../../core/gpu/context.ts';
import { openReader, type ReaderInit } from './open_reader.ts';
import { SHUTDOWN } from './shutdown.ts';

const port = parentPort!;
const endpoint: Endpoint = {
  post: (m: Msg) => port.postMessage(m),
  onMessage: (cb) => port.on('message', (m: Msg) => cb(m)),
};

let ctx: GpuContext | undefined;

// Graceful stop (transport.ts SHUTDOWN): release the GPU device on this thread, then end the
// thread. A worker terminated with a live device leaves Dawn / Mesa to tear it down from
// another thread at exit, which has crashed processes holding OpenGL ES (llvmpipe) devices.
port.on('message', (m: { kind?: string }) => {
  if (m.kind !== SHUTDOWN.kind) return;
  try {
    ctx?.destroy();
  } catch {
    // already lost
  }
  process.exit(0); // in a worker thread: ends this thread only
});

async function main(): Promise<void> {
  try {
    serveReader(await openReader(workerData as ReaderInit, undefined, { onContext: (c) => (ctx = c) }), endpoint);
  } catch (e) {
    port.postMessage({ kind: 'failed', uuid: '', content: errorToJSON(e) } satisfies Msg);
  }
}

void main();
