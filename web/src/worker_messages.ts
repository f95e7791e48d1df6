/**
 * Messages between the page and the browser-mode worker besides the reader
 * protocol itself (core/engine/protocol.ts): the one `init` that hands the
 * worker its model files, and `progress` reports while it loads them.
 */
import type { Msg } from '../../core/engine/protocol.ts';

export interface WorkerInit {
  kind: 'init';
  /** Model name shown in the reader's info (directory or file name). */
  name: string;
  /** Model-relative paths and their bytes (Blobs transfer without copying). */
  files: { path: string; blob: Blob }[];
  /** Context limit and batch size for the in-tab engine. */
  maxContext?: number;
  maxSeqs?: number;
}

export interface WorkerProgress {
  kind: 'progress';
  stage: 'device' | 'weights' | 'ready';
  /** Bytes of weights read so far, and in all. */
  loaded: number;
  total: number;
  /** Adapter name once the device is open. */
  adapter?: string;
}

export type FromWorker = Msg | WorkerProgress;

export const isProgress = (m: FromWorker): m is WorkerProgress => m.kind === 'progress';
