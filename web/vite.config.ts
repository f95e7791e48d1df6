/**
 * Vite build of the Weft web app (playground, management console, metrics,
 * browser mode). `base: './'` makes every asset URL relative, so the built
 * app works under any sub-path (frontend_base_path, a reverse proxy). The
 * browser-mode worker bundles core/; core reaches the Node-only `webgpu`
 * package only through a variable dynamic import marked @vite-ignore, which
 * the bundler leaves alone (test/browser/web.test.ts checks the output).
 * Output: web/dist (npm run build:web).
 */
import { fileURLToPath } from 'node:url';
import { defineConfig, type Plugin } from 'vite';

const here = fileURLToPath(new URL('.', import.meta.url));

/**
 * `npm run dev:web` only: point the page at a local `npm start` (the APIs'
 * same-host CORS answers the dev server's origin). In production the Weft
 * server writes these tags itself (server/apps/frontend.ts).
 */
const devApiBases = (): Plugin => ({
  name: 'weft-dev-api-bases',
  apply: 'serve',
  transformIndexHtml: (html) =>
    html.replace(
      '<head>',
      `<head>\n    <meta name="weft-inference-base" content=":${process.env.WEFT_PORT ?? 3000}">` +
        `<meta name="weft-management-base" content=":${process.env.WEFT_MANAGEMENT_PORT ?? 3001}">`,
    ),
});

export default defineConfig({
  root: here,
  base: './',
  publicDir: false,
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: true,
    chunkSizeWarningLimit: 2048,
  },
  plugins: [devApiBases()],
  worker: { format: 'es' },
  // `npm run dev:web`: core/ lives outside web/, and the APIs on :3000/:3001
  // answer this origin through their same-host CORS (server/apps/frontend.ts).
  server: { fs: { allow: [fileURLToPath(new URL('..', import.meta.url))] } },
});
