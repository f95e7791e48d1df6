import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Dawn's native addon is happiest with one device per process.
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
