/**
 * Vite build of the engine example app (examples/web): the page and its
 * module worker, as an app would bundle the library. Output: examples/web/dist.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  publicDir: false,
  build: { outDir: 'dist', emptyOutDir: true, target: 'es2022', chunkSizeWarningLimit: 4096 },
  worker: { format: 'es' },
});
