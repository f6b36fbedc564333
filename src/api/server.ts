import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { AppError, ErrorKind, httpStatusFor, redactSecrets } from '../domain/errors.ts';
import { runAsTenant } from '../db/tenant.ts';
import { registerMeetingRoutes } from './meeting-routes.ts';
import { registerSpeakerRoutes, registerVocabularyRoutes } from './speaker-routes.ts';
import { registerOpsRoutes } from './ops-routes.ts';
import { registerBotRoutes } from './bot-routes.ts';
import { registerProviderRoutes } from './provider-routes.ts';
import { registerWebhookRoutes } from './webhook-routes.ts';
import { registerKeyRoutes } from './key-routes.ts';
import { registerStreamRoutes } from './stream-routes.ts';
import { registerSearchRoutes } from './search-routes.ts';
import {
  ApiRateLimits,
  registerRequestLimits,
  requestLimitError,
  serverLimitOptions,
} from './request-limits.ts';
import { DEFAULT_WEB_ROOT, registerWebRoutes } from './web-routes.ts';
import { workspaceOf, type ApiDeps } from './context.ts';
import { apiRoutes, registerApiContract } from './contract.ts';

export type { ApiDeps } from './context.ts';

/** The HTTP API: JSON over /v1, Bearer API keys, one error shape `{error: {kind, code, message}}`. */
export function buildApi(api: ApiDeps): FastifyInstance {
  const loggerInstance: FastifyBaseLogger = api.log.child({ component: 'api' });
  const limits = api.deps.config.requestLimits;
  // S7: the small body limit and the timeouts for every route; uploads and chunks raise theirs.
  const app: FastifyInstance = Fastify({ loggerInstance, ...serverLimitOptions(limits) });
  app.decorateRequest('workspaceId', '');
  registerRequestLimits(app, limits);
  const rateLimits = new ApiRateLimits(limits);

  // S1: decided on the matched route, not the raw URL, so an encoded path cannot skip the check.
  app.addHook('onRequest', async (req) => {
    const route = req.routeOptions.url;
    if (route === undefined || !route.startsWith('/v1/')) return;
    const header = req.headers.authorization ?? '';
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    const token = match?.[1];
    const workspaceId = token ? await api.workspaces.authenticate(token) : null;
    if (!token || !workspaceId) {
      throw new AppError(
        ErrorKind.unauthorized,
        'auth.invalid_key',
        'missing or invalid API key (Authorization: Bearer <key>)',
      );
    }
    req.workspaceId = workspaceId;
    rateLimits.check(token, req);
  });

  // S10: an authenticated request runs as its workspace's tenant from its handler on: every
  // database checkout it makes sees only that workspace's rows (src/db/tenant.ts). Added before the
  // routes, so it wraps each of them.
  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith('/v1/')) return;
    const handler = route.handler;
    route.handler = function (this: FastifyInstance, req, reply) {
      return runAsTenant(workspaceOf(req), () => handler.call(this, req, reply));
    };
  });

  app.setErrorHandler((err, req, reply) => {
    const e = requestLimitError(err, req) ?? toHttpError(err);
    // A refusal that clears by itself says when to try again (chunk.too_far_ahead).
    if (err instanceof AppError && err.retryAfterSeconds !== undefined)
      void reply.header('retry-after', String(Math.ceil(err.retryAfterSeconds)));
    if (e.status >= 500)
      req.log.error({ err: err instanceof Error ? err.stack : String(err) }, 'request failed');
    void reply.status(e.status).send({ error: { kind: e.kind, code: e.code, message: e.message } });
  });
  app.setNotFoundHandler((req, reply) => {
    void reply.status(404).send({
      error: {
        kind: ErrorKind.notFound,
        code: 'route.not_found',
        message: `no route ${req.method} ${req.url.split('?')[0]}`,
      },
    });
  });

  // The routes declare their schemas, and the OpenAPI document is made from them (contract.ts).
  registerApiContract(app);
  void app.register(
    apiRoutes((routes) => {
      registerMeetingRoutes(routes, api);
      registerSpeakerRoutes(routes, api);
      registerVocabularyRoutes(routes, api);
      registerOpsRoutes(routes, api);
      registerWebhookRoutes(routes, api);
      registerProviderRoutes(routes, api);
      registerBotRoutes(routes, api);
      registerKeyRoutes(routes, api);
      registerStreamRoutes(routes, api);
      registerSearchRoutes(routes, api);
      registerWebRoutes(routes, api.webRoot ?? DEFAULT_WEB_ROOT);
    }),
  );
  return app;
}

interface HttpError {
  status: number;
  kind: string;
  code: string;
  message: string;
}

function toHttpError(err: unknown): HttpError {
  if (err instanceof AppError) {
    return {
      status: httpStatusFor(err.kind),
      kind: err.kind,
      code: err.code,
      message: redactSecrets(err.message),
    };
  }
  const fastifyError = err as { statusCode?: number; code?: string; message?: string };
  if (fastifyError.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return {
      status: 413,
      kind: ErrorKind.tooLarge,
      code: 'request.too_large',
      message: 'request body is larger than allowed',
    };
  }
  if (fastifyError.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || err instanceof SyntaxError) {
    return {
      status: 400,
      kind: ErrorKind.invalidInput,
      code: 'request.malformed_json',
      message: 'the body is not valid JSON',
    };
  }
  if (fastifyError.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') {
    return {
      status: 400,
      kind: ErrorKind.invalidInput,
      code: 'request.empty_body',
      message: 'a JSON body is required',
    };
  }
  if (fastifyError.statusCode && fastifyError.statusCode >= 400 && fastifyError.statusCode < 500) {
    return {
      status: fastifyError.statusCode,
      kind: ErrorKind.invalidInput,
      code: `request.${(fastifyError.code ?? 'invalid').toLowerCase()}`,
      message: redactSecrets(fastifyError.message ?? 'bad request'),
    };
  }
  return { status: 500, kind: ErrorKind.unclassified, code: 'internal.error', message: 'internal error' };
}
