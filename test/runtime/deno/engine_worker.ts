/** The engine's worker side in a Deno Web Worker, for test/runtime/deno/engine.ts. */
import { serveEngine } from '../../../core/api/worker.ts';

serveEngine();
