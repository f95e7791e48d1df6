/**
 * A reader's worker thread: owns one GPU device and one loaded model, and
 * serves ReaderApi to the main thread over the worker port. Loading or a crash
 * here never blocks the HTTP thread; the manager restarts a dead worker.
 * (Runtimes with Web Workers, i.e. Deno, use web_worker_entry.ts instead.)
 */
import { parentPort, workerData } from 'node:worker_threads';
import { errorToJSON } from '../../core/errors.ts';
import { serveReader, type Endpoint, type Msg } from '../../core/engine/protocol.ts';
import { openReader, type ReaderInit } from './open_reader.ts';

const port = parentPort!;
const endpoint: Endpoint = {
  post: (m: Msg) => port.postMessage(m),
  onMessage: (cb) => port.on('message', (m: Msg) => cb(m)),
};

async function main(): Promise<void> {
  try {
    serveReader(await openReader(workerData as ReaderInit), endpoint);
  } catch (e) {
    port.postMessage({ kind: 'failed', uuid: '', content: errorToJSON(e) } satisfies Msg);
  }
}

void main();
