import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { createMetrics } from '../ops/metrics.ts';
import { operatorOverview } from '../ops/overview.ts';
import { openApiDocument } from './openapi.ts';
import { workspaceOf, type ApiDeps } from './server.ts';

export function registerOpsRoutes(app: FastifyInstance, api: ApiDeps): void {
  const { registry, refresh } = createMetrics(api.deps.db);

  app.get('/healthz', async (_req, reply) => {
    try {
      await sql`select 1`.execute(api.deps.db);
      return { status: 'ok', database: 'ok' };
    } catch {
      return reply.status(503).send({ status: 'unavailable', database: 'unreachable' });
    }
  });

  app.get('/metrics', async (_req, reply) => {
    await refresh();
    const text = await registry.metrics();
    return reply.type(registry.contentType).send(text);
  });

  // X1: the operator page's figures (queues, dead letters with attempts, outages, cleanup backlog).
  app.get('/v1/operator/overview', (req) => operatorOverview(api.deps.db, workspaceOf(req)));

  app.get('/openapi.json', () => openApiDocument(api.deps.config.maxUploadBytes));
}
