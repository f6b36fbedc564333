import fs from 'node:fs';
import path from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';

/** Where `npm run build` puts the web app (vite build), for both src/api and dist/api. */
export const DEFAULT_WEB_ROOT = path.resolve(import.meta.dirname, '../../dist/web');

/**
 * The web app from the same process as the API, at `/`. The app routes with the URL
 * hash, so only real files are served here and every other path stays a JSON 404.
 */
export function registerWebRoutes(app: FastifyInstance, webRoot: string): void {
  if (!fs.existsSync(path.join(webRoot, 'index.html'))) {
    app.get('/', (_req, reply) =>
      reply
        .status(503)
        .type('text/plain; charset=utf-8')
        .send('The web app is not built: run `npm run build`. The API is at /v1.\n'),
    );
    return;
  }
  void app.register(fastifyStatic, {
    root: webRoot,
    prefix: '/',
    index: 'index.html',
    // S9: a source map is never served, even one left in the folder by an older build.
    allowedPath: (pathname) => !isSourceMap(pathname),
    // The headers below decide caching; @fastify/send's own max-age=0 would override them.
    cacheControl: false,
    setHeaders: (res, filePath) => {
      // Vite names assets by content hash; index.html must be fetched fresh so a deploy takes effect.
      if (filePath.includes(`${path.sep}assets${path.sep}`)) {
        res.setHeader('cache-control', 'public, max-age=31536000, immutable');
      } else {
        res.setHeader('cache-control', 'no-cache');
      }
      if (filePath.endsWith('.html')) {
        res.setHeader(
          'content-security-policy',
          "default-src 'self'; connect-src 'self'; img-src 'self' data:; media-src 'self' blob:; style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
        );
        res.setHeader('x-content-type-options', 'nosniff');
        res.setHeader('referrer-policy', 'no-referrer');
      }
    },
  });
}

/** `pathname` as @fastify/static has it; @fastify/send decodes it once more, so this does too. */
export function isSourceMap(pathname: string): boolean {
  let name = pathname;
  for (let i = 0; i < 4; i++) {
    try {
      const decoded = decodeURIComponent(name);
      if (decoded === name) break;
      name = decoded;
    } catch {
      return true;
    }
  }
  return /\.map[/\\\s]*$/i.test(name);
}
