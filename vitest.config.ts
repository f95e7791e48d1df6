import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // test/slow: the real-shape goldens, run by vitest.slow.config.ts.
    exclude: [...configDefaults.exclude, 'test/slow/**'],
    // Dawn's native addon is happiest with one device per process.
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
