import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { databaseAnswers } from '../db/connect.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { createMetrics } from '../ops/metrics.ts';
import { operatorOverview } from '../ops/overview-store.ts';
import { workspaceOf, type ApiDeps } from './context.ts';
import { ERRORS, json, refusal, type RouteSchema } from './contract.ts';
import { HealthSchema, OverviewSchema, ReadySchema } from './schemas.ts';
import { readiness } from '../ops/readiness.ts';

const HEALTH_SCHEMA: RouteSchema = {
  summary: 'Liveness and database readiness',
  security: [],
  response: {
    200: json('ok', HealthSchema),
    503: json('The database does not answer', HealthSchema),
  },
};
const READY_SCHEMA: RouteSchema = {
  summary:
    'P2: readiness: the database answers, every migration of this release is applied, and the blob store takes a write',
  security: [],
  response: {
    200: json('ready', ReadySchema),
    503: json('Not ready: each failing check is named', ReadySchema),
  },
};
const METRICS_SCHEMA: RouteSchema = {
  summary:
    'S9: Prometheus metrics (installation-wide; no workspace ids), with `Authorization: Bearer <VERBATIM_METRICS_TOKEN>`',
  security: [{ metricsToken: [] }],
  response: {
    200: { description: 'text', content: { 'text/plain': { schema: { type: 'string' } } } },
    401: refusal('Missing or wrong metrics token'),
    404: refusal('VERBATIM_METRICS_TOKEN is not set: metrics are off'),
  },
};
const OVERVIEW_SCHEMA: RouteSchema = {
  summary:
    'X1 for the web app: queues (pending, due, running, oldest due age), health figures, dead letters with their attempt histories, minutes outages in progress, cleanup backlog; job lists are the caller’s workspace only',
  response: {
    200: json(
      '{queues, health (installation-wide), workspace (this workspace’s failed, quarantined and outage counts), deadLetters, outages, storedBytes}',
      OverviewSchema,
    ),
    ...ERRORS,
  },
};

export function registerOpsRoutes(app: FastifyInstance, api: ApiDeps): void {
  const { registry, refresh } = createMetrics(api.deps.db);

  app.get('/healthz', { schema: HEALTH_SCHEMA }, async (_req, reply) => {
    if (await databaseAnswers(api.deps.db)) return { status: 'ok', database: 'ok' };
    return reply.status(503).send({ status: 'unavailable', database: 'unreachable' });
  });

  app.get('/readyz', { schema: READY_SCHEMA }, async (_req, reply) => {
    const { ready, ...checks } = await readiness(api.deps.db, api.deps.blobs, api.log);
    return reply.status(ready ? 200 : 503).send({ status: ready ? 'ready' : 'unavailable', ...checks });
  });

  // S9: closed unless the operator set a token; the token is compared in constant time.
  app.get('/metrics', { schema: METRICS_SCHEMA }, async (req, reply) => {
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
  app.get('/v1/operator/overview', { schema: OVERVIEW_SCHEMA }, (req) =>
    operatorOverview(api.deps.db, workspaceOf(req)),
  );

  // The document the routes' schemas make (src/api/contract.ts).
  app.get('/openapi.json', () => app.swagger());
}

/** Compares SHA-256 digests, so neither the length nor a common prefix of the token leaks by timing. */
function bearerMatches(header: string | undefined, token: string): boolean {
  const presented = /^Bearer\s+(\S+)$/i.exec(header ?? '')?.[1] ?? '';
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(presented), digest(token));
}
