/**
 * The example app's Web Worker: the engine's worker side. Everything the
 * model does (loading, GPU work, sampling) happens here, off the page's thread.
 */
import { serveEngine } from '../../core/api/worker.ts';

serveEngine();
