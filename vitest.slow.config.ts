import { defineConfig } from 'vitest/config';
import { MAX_WORKERS, SLOW_GROUP } from './vitest.groups.ts';

// The slow group: real-shape checkpoints against PyTorch goldens (minutes on CPU emulation) and
// the cross-runtime tests (headless Chromium, Deno).
export default defineConfig({
  test: {
    include: SLOW_GROUP,
    pool: 'forks',
    // Names the file a test process died in, when one does (see the file).
    setupFiles: ['test/setup/process_log.ts'],
    maxWorkers: MAX_WORKERS,
    testTimeout: 1_800_000,
    hookTimeout: 1_800_000,
  },
});
