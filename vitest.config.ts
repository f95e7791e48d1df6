import { configDefaults, defineConfig } from 'vitest/config';
import { MAX_WORKERS, SLOW_GROUP } from './vitest.groups.ts';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The slow group (real-shape goldens, browser and Deno) runs by vitest.slow.config.ts.
    exclude: [...configDefaults.exclude, ...SLOW_GROUP],
    // Dawn's native addon is happiest with one device per process.
    pool: 'forks',
    // Names the file a test process died in, when one does (see the file).
    setupFiles: ['test/setup/process_log.ts'],
    maxWorkers: MAX_WORKERS,
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
