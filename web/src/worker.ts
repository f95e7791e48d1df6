/**
 * Browser mode's worker: the engine library's Web Worker side
 * (core/api/worker.ts), started by browser_mode.ts through
 * createWorkerEngine. It loads the model files the page sends, on
 * navigator.gpu, and serves generation requests until unloaded.
 */
import { serveEngine } from '../../core/api/worker.ts';

serveEngine();
