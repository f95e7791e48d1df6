import { defineConfig } from 'vitest/config';

// The slow group: real-shape checkpoints against PyTorch goldens (test/slow/). Minutes on CPU emulation.
export default defineConfig({
  test: {
    include: ['test/slow/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 1_800_000,
    hookTimeout: 1_800_000,
  },
});
