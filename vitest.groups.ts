/**
 * The two test groups. `npm test` (vitest.config.ts) runs everything except the slow group;
 * `npm run test:slow` (vitest.slow.config.ts) runs the slow group: the real-shape checkpoints
 * against PyTorch goldens, the cross-runtime tests (headless Chromium, Deno, ONNX Runtime Web
 * as a peer) and the exhaustive sweeps (every decode-megakernel configuration on both
 * adapters, the 8-bit KV cache through whole models, every keyword case token by token with
 * the 128k vocabulary). CI runs both; `npm test` keeps a test of each of those paths (the
 * megakernel runs every stories260K test on OpenGL ES; kv_texture and attention cover q8 KV;
 * keyword_fuzz and corpus cover the keywords).
 */
import { availableParallelism } from 'node:os';

export const SLOW_GROUP = [
  'test/slow/**/*.test.ts',
  'test/browser/**/*.test.ts',
  'test/runtime/**/*.test.ts',
  'test/models/onnx_encoder.test.ts',
  'test/numerics/decode_megakernel.test.ts',
  'test/models/kv8.test.ts',
  'test/structured/keyword_cases.test.ts',
];

/**
 * Test processes at once. Vitest's default is one less than the CPUs (a single worker on a
 * 2-CPU machine, which runs the suite serially); the suite's files spend much of their time
 * waiting on child processes, sockets and GPU readbacks, so every CPU gets a worker.
 */
export const MAX_WORKERS = Math.max(2, availableParallelism());
