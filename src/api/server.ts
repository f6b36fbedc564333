import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import cookie from '@fastify/cookie';
import { AppError, ErrorKind, httpStatusFor, redactSecrets } from '../domain/errors.ts';
import { runAsTenant } from '../db/tenant.ts';
import { registerMeetingRoutes } from './meeting-routes.ts';
import { registerSpeakerRoutes, registerVocabularyRoutes } from './speaker-routes.ts';
import { registerPlaybackRoutes } from './playback-routes.ts';
import { registerOpsRoutes } from './ops-routes.ts';
import { registerBotRoutes } from './bot-routes.ts';
import { registerProviderRoutes } from './provider-routes.ts';
import { registerWebhookRoutes } from './webhook-routes.ts';
import { registerKeyRoutes } from './key-routes.ts';
import { registerStreamRoutes } from './stream-routes.ts';
import { registerSearchRoutes } from './search-routes.ts';
import {
  ApiRateLimits,
  WorkspaceRateLimits,
  registerRequestLimits,
  requestLimitError,
  serverLimitOptions,
} from './request-limits.ts';
import { DEFAULT_WEB_ROOT, registerWebRoutes } from './web-routes.ts';
import { principalOf, workspaceOf, type ApiDeps } from './context.ts';
import {
  authenticate,
  authorize,
  authorizeMeetingChange,
  isAuthRoute,
  meetingOwnerMatters,
  refuseUnauthenticated,
  routeAction,
  viewerOf,
} from './authorize.ts';
import { registerAuthRoutes, registerMemberRoutes } from './auth-routes.ts';
import { registerAccessRoutes } from './access-routes.ts';
import { registerShareRoutes } from './share-routes.ts';
import { auditRequest, registerAuditRoutes } from './audit-routes.ts';
import { apiRoutes, registerApiContract } from './contract.ts';

export type { ApiDeps } from './context.ts';

/** What the request log says of a request (fastify's fields), its URL without secrets. */
function requestForLog(req: {
  method?: string;
  url?: string;
  headers?: Record<string, unknown>;
  ip?: string;
  socket?: { remoteAddress?: string };
}) {
  return {
    method: req.method,
    url: redactUrl(req.url ?? ''),
    host: req.headers?.host,
    remoteAddress: req.ip ?? req.socket?.remoteAddress,
  };
}

/** S3/U5: a URL fit for a log: share-link tokens and sign-in codes, states and tokens are redacted. */
export function redactUrl(url: string): string {
  // (A share link opened in the web app keeps its token after #, which browsers never send.)
  return url
    .replace(/\/(v1\/shared|s)\/[^/?#]+/, '/$1/[redacted]')
    .replace(/([?&](?:code|state|token|key|session_state)=)[^&#]*/gi, '$1[redacted]');
}

/** The HTTP API: JSON over /v1, Bearer API keys, one error shape `{error: {kind, code, message}}`. */
export function buildApi(api: ApiDeps): FastifyInstance {
  const loggerInstance: FastifyBaseLogger = api.log.child({ component: 'api' });
  // Fastify merges an instance's `serializers` over its own: the request line keeps its shape, with
  // the secrets a URL may carry (a share link's token, a sign-in's code and state) taken out.
  Object.assign(loggerInstance, { serializers: { req: requestForLog } });
  const limits = api.deps.config.requestLimits;
  // S7: the small body limit and the timeouts for every route; uploads and chunks raise theirs.
  const app: FastifyInstance = Fastify({ loggerInstance, ...serverLimitOptions(limits) });
  app.decorateRequest('workspaceId', '');
  app.decorateRequest('principal', null);
  registerRequestLimits(app, limits);
  const rateLimits = new ApiRateLimits(limits);
  const workspaceLimits = new WorkspaceRateLimits(api.deps.db, limits);

  void app.register(cookie);

  // S1: decided on the matched route, not the raw URL, so an encoded path cannot skip the check.
  // U1/U3/U6: a bearer key or the session cookie (with its CSRF token on writes) makes the
  // request's principal; the sign-in routes under /v1/auth/ authenticate themselves.
  app.addHook('onRequest', async (req) => {
    const route = req.routeOptions.url;
    if (route === undefined || !route.startsWith('/v1/')) return;
    // The sign-in routes have no credentials yet: their budget is the caller's address.
    if (isAuthRoute(route)) return rateLimits.check(`address:${req.ip}`, req);
    const principal = await authenticate(api, req);
    if (!principal) throw refuseUnauthenticated();
    req.principal = principal;
    req.workspaceId = principal.workspaceId;
    rateLimits.check(principal.keyId ?? principal.sessionId ?? '', req);
    await workspaceLimits.check(principal.workspaceId, req);
  });

  // U1: every /v1 route names its action (src/api/authorize.ts), asked of the role table before the
  // handler. S10: an authenticated request runs as its workspace's tenant from its handler on: every
  // database checkout it makes sees only that workspace's rows (src/db/tenant.ts). Added before the
  // routes, so it wraps each of them.
  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith('/v1/') || isAuthRoute(route.url)) return;
    const methods = (Array.isArray(route.method) ? route.method : [route.method]).map((m) =>
      m === 'HEAD' ? 'GET' : m,
    );
    const actions = methods.map((m) => routeAction(m, route.url));
    const action = actions[0];
    if (action === undefined || actions.some((a) => a !== action)) {
      throw new Error(
        `route ${methods.join(',')} ${route.url} has no action in ROUTE_ACTIONS (src/api/authorize.ts)`,
      );
    }
    const handler = route.handler;
    const ownMeeting = meetingOwnerMatters(route.url, action);
    route.handler = async function (this: FastifyInstance, req, reply) {
      const principal = principalOf(req);
      authorize(principal, action);
      return runAsTenant(
        workspaceOf(req),
        async () => {
          // U4: a meeting's own changes are its owner's, or an admin's.
          if (ownMeeting)
            await authorizeMeetingChange(api, principal, (req.params as { id: string }).id, ownMeeting);
          return handler.call(this, req, reply);
        },
        viewerOf(principal),
      );
    };
  });

  // U8: what a successful request of an audited route did, in the workspace's audit trail.
  app.addHook('onResponse', async (req, reply) => auditRequest(api, req, reply));

  app.setErrorHandler((err, req, reply) => {
    const e = requestLimitError(err, req) ?? toHttpError(err);
    // A refusal that clears by itself says when to try again (chunk.too_far_ahead).
    if (err instanceof AppError && err.retryAfterSeconds !== undefined)
      void reply.header('retry-after', String(Math.ceil(err.retryAfterSeconds)));
    // P4: an outage (storage or database down) says when to try again; nothing was kept of the request.
    else if (e.status === 503) void reply.header('retry-after', String(OUTAGE_RETRY_AFTER_S));
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
      registerPlaybackRoutes(routes, api);
      registerVocabularyRoutes(routes, api);
      registerOpsRoutes(routes, api);
      registerWebhookRoutes(routes, api);
      registerProviderRoutes(routes, api);
      registerBotRoutes(routes, api);
      registerKeyRoutes(routes, api);
      registerAuthRoutes(routes, api);
      registerMemberRoutes(routes, api);
      registerAccessRoutes(routes, api);
      registerShareRoutes(routes, api);
      registerAuditRoutes(routes, api);
      registerStreamRoutes(routes, api);
      registerSearchRoutes(routes, api);
      registerWebRoutes(routes, api.webRoot ?? DEFAULT_WEB_ROOT);
    }),
  );
  return app;
}

/** P4: what a 503 for an outage tells the client to wait before it tries again. */
const OUTAGE_RETRY_AFTER_S = 5;

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
