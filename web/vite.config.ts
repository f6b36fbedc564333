import path from 'node:path';
import { defineConfig } from 'vite';

/** The web app (issue 6): built into dist/web, which the API process serves at `/`. */
export default defineConfig({
  root: import.meta.dirname,
  base: '/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  worker: { format: 'es' },
  build: {
    outDir: path.resolve(import.meta.dirname, '../dist/web'),
    emptyOutDir: true,
    target: 'es2022',
    // S9: the served bundle carries no source maps (they would publish the source).
    sourcemap: false,
  },
  server: { proxy: { '/v1': 'http://127.0.0.1:8080' } },
});
