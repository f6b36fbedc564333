import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { databaseAnswers } from '../db/connect.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { createMetrics } from '../ops/metrics.ts';
import { operatorOverview } from '../ops/overview-store.ts';
import { openApiDocument } from './openapi.ts';
import { workspaceOf, type ApiDeps } from './context.ts';

export function registerOpsRoutes(app: FastifyInstance, api: ApiDeps): void {
  const { registry, refresh } = createMetrics(api.deps.db);

  app.get('/healthz', async (_req, reply) => {
    if (await databaseAnswers(api.deps.db)) return { status: 'ok', database: 'ok' };
    return reply.status(503).send({ status: 'unavailable', database: 'unreachable' });
  });

  // S9: closed unless the operator set a token; the token is compared in constant time.
  app.get('/metrics', async (req, reply) => {
    const token = api.deps.config.metricsToken;
    if (token === null) {
      throw new AppError(
        ErrorKind.notFound,
        'metrics.disabled',
        '/metrics is off: set VERBATIM_METRICS_TOKEN and scrape with Authorization: Bearer <token>',
      );
    }
    if (!bearerMatches(req.headers.authorization, token)) {
      throw new AppError(
        ErrorKind.unauthorized,
        'metrics.invalid_token',
        'missing or wrong metrics token (Authorization: Bearer <VERBATIM_METRICS_TOKEN>)',
      );
    }
    await refresh();
    const text = await registry.metrics();
    return reply.type(registry.contentType).send(text);
  });

  // X1: the operator page's figures (queues, dead letters with attempts, outages, cleanup backlog).
  app.get('/v1/operator/overview', (req) => operatorOverview(api.deps.db, workspaceOf(req)));

  app.get('/openapi.json', () => openApiDocument(api.deps.config.maxUploadBytes));
}

/** Compares SHA-256 digests, so neither the length nor a common prefix of the token leaks by timing. */
function bearerMatches(header: string | undefined, token: string): boolean {
  const presented = /^Bearer\s+(\S+)$/i.exec(header ?? '')?.[1] ?? '';
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(presented), digest(token));
}
