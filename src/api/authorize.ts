import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { Action, decide } from '../domain/roles.ts';
import type { Viewer } from '../db/tenant.ts';
import { recordingOwnerOf } from '../bots/bot-recording-store.ts';
import { batchOwnerOf } from '../meetings/batch-store.ts';
import { csrfTokenOf, sessionPrincipal, type Principal } from '../workspaces/sign-in.ts';
import type { ApiDeps } from './context.ts';

/**
 * U1/U3/U6: who a request acts as and whether it may. A request carries a bearer API key
 * (machines) or the session cookie (the web app); a cookie-authenticated write must also carry the
 * session's CSRF token in `x-csrf-token`. Every /v1 route names the action it performs in
 * ROUTE_ACTIONS, and one hook asks the role table (src/domain/roles.ts); a route missing from it
 * fails the server's start, so no route decides for itself.
 */

export const SESSION_COOKIE = 'verbatim_session';
export const CSRF_HEADER = 'x-csrf-token';

const A = Action;
/** The action of each /v1 route (method and path as registered). The auth routes need none. */
export const ROUTE_ACTIONS: Readonly<Record<string, Action>> = {
  'POST /v1/meetings': A.createMeetings,
  'GET /v1/meetings': A.readMeetings,
  'DELETE /v1/meetings/:id': A.manageOwnMeetings,
  'GET /v1/meetings/:id': A.readMeetings,
  'PUT /v1/meetings/:id/recording': A.createMeetings,
  'PUT /v1/meetings/:id/chunks/:seq': A.createMeetings,
  'POST /v1/meetings/:id/end': A.createMeetings,
  'GET /v1/meetings/:id/transcript': A.readMeetings,
  'GET /v1/search': A.readMeetings,
  'POST /v1/ask': A.readMeetings,
  'GET /v1/meetings/:id/events': A.readMeetings,
  'POST /v1/meetings/:id/minutes': A.manageOwnMeetings,
  'POST /v1/meetings/:id/resubmit': A.manageOwnMeetings,
  'POST /v1/batches': A.createMeetings,
  'GET /v1/batches/:id': A.readMeetings,
  // U4: the batch's owner (who made it) or an admin; it cancels every meeting in the batch.
  'POST /v1/batches/:id/cancel': A.manageOwnMeetings,
  'POST /v1/webhooks': A.manageWorkspace,
  'GET /v1/webhooks': A.manageWorkspace,
  'DELETE /v1/webhooks/:id': A.manageWorkspace,
  'POST /v1/webhooks/:id/rotate-secret': A.manageWorkspace,
  'GET /v1/webhooks/:id/deliveries': A.manageWorkspace,
  'GET /v1/api-keys': A.manageOwnKeys,
  'POST /v1/api-keys': A.manageOwnKeys,
  'DELETE /v1/api-keys/:id': A.manageOwnKeys,
  'POST /v1/api-keys/:id/revoke': A.manageOwnKeys,
  'GET /v1/operator/overview': A.readOperations,
  'POST /v1/calendar-events': A.createMeetings,
  'POST /v1/calendar-feeds': A.manageWorkspace,
  'GET /v1/calendar-feeds': A.manageWorkspace,
  'DELETE /v1/calendar-feeds/:id': A.manageWorkspace,
  'GET /v1/bot-recordings': A.readMeetings,
  'GET /v1/bot-recordings/:id': A.readMeetings,
  // U4: a bot recording's owner (who asked for it) or an admin may stop or cancel it.
  'POST /v1/bot-recordings/:id/cancel': A.manageOwnMeetings,
  'POST /v1/bot-recordings/:id/stop': A.manageOwnMeetings,
  'GET /v1/bot-settings': A.manageWorkspace,
  'PUT /v1/bot-settings': A.manageWorkspace,
  'GET /v1/meetings/:id/speakers': A.readMeetings,
  'PATCH /v1/meetings/:id/speakers/:speakerId': A.manageOwnMeetings,
  'PATCH /v1/meetings/:id': A.manageOwnMeetings,
  'POST /v1/meetings/:id/corrections': A.manageOwnMeetings,
  'DELETE /v1/meetings/:id/corrections/:correctionId': A.manageOwnMeetings,
  'POST /v1/meetings/:id/speakers/:speakerId/merge': A.manageOwnMeetings,
  'GET /v1/vocabulary': A.readMeetings,
  'GET /v1/meetings/:id/audio': A.readMeetings,
  'GET /v1/playback-settings': A.readMeetings,
  'PUT /v1/playback-settings': A.manageWorkspace,
  'PUT /v1/vocabulary': A.manageWorkspace,
  'GET /v1/members': A.readMeetings,
  'PATCH /v1/members/:userId': A.manageMembers,
  'DELETE /v1/members/:userId': A.manageMembers,
  'POST /v1/invites': A.manageMembers,
  'GET /v1/meetings/:id/access': A.readMeetings,
  'PUT /v1/meetings/:id/access': A.manageOwnMeetings,
  'POST /v1/meetings/:id/share-links': A.manageOwnMeetings,
  'GET /v1/meetings/:id/share-links': A.manageOwnMeetings,
  'DELETE /v1/meetings/:id/share-links/:linkId': A.manageOwnMeetings,
  'GET /v1/audit': A.readAudit,
};

/**
 * Routes anyone may call, by their exact registered path (a new route is never exempt by its
 * prefix): they authenticate themselves (sign-in, links, the session routes), or make a session,
 * or (U5) are a share link's read of one meeting, whose token is the whole grant.
 */
const OPEN_ROUTES: ReadonlySet<string> = new Set([
  '/v1/auth/sign-in',
  '/v1/auth/links/redeem',
  '/v1/auth/session',
  '/v1/auth/workspace',
  '/v1/auth/sign-out',
  '/v1/auth/sign-out-everywhere',
  '/v1/auth/methods',
  '/v1/auth/oidc/start',
  '/v1/auth/oidc/callback',
  '/v1/shared/:token',
]);
export const isAuthRoute = (url: string) => OPEN_ROUTES.has(url);

export function routeAction(method: string, url: string): Action | undefined {
  return ROUTE_ACTIONS[`${method.toUpperCase()} ${url}`];
}

function bearerOf(req: FastifyRequest): string | null {
  const match = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '');
  return match?.[1] ?? null;
}

export function sessionSecretOf(req: FastifyRequest): string | null {
  const value = req.cookies[SESSION_COOKIE];
  return typeof value === 'string' && value !== '' ? value : null;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The principal of a request's credentials, or null. A bearer key wins over a cookie (a machine
 * never sends one); with the cookie, a write must carry the CSRF token (403 otherwise).
 */
export async function authenticate(api: ApiDeps, req: FastifyRequest): Promise<Principal | null> {
  const token = bearerOf(req);
  if (token) {
    const key = await api.workspaces.authenticate(token);
    if (!key) return null;
    return { ...key, via: 'key', sessionId: null };
  }
  const secret = sessionSecretOf(req);
  if (!secret) return null;
  const principal = await sessionPrincipal(api.people, secret);
  if (principal && !SAFE_METHODS.has(req.method)) requireCsrf(req, secret);
  return principal;
}

/** U3: a write made with the session cookie carries the session's CSRF token, or is refused. */
export function requireCsrf(req: FastifyRequest, secret: string): void {
  if (req.headers[CSRF_HEADER] !== csrfTokenOf(secret)) {
    throw new AppError(
      ErrorKind.forbidden,
      'auth.csrf',
      `a write with the session cookie must send its CSRF token in ${CSRF_HEADER} (GET /v1/auth/session)`,
    );
  }
}

/** The same credentials still act as the same principal (a stream's periodic check, S9/U3). */
export async function stillAuthenticated(
  api: ApiDeps,
  req: FastifyRequest,
  was: Principal,
): Promise<boolean> {
  const token = bearerOf(req);
  const now = token
    ? await api.workspaces.authenticate(token)
    : await (async () => {
        const secret = sessionSecretOf(req);
        return secret ? sessionPrincipal(api.people, secret) : null;
      })();
  return now !== null && now.workspaceId === was.workspaceId && now.role === was.role;
}

export function refuseUnauthenticated(): AppError {
  return new AppError(
    ErrorKind.unauthorized,
    'auth.invalid_key',
    'missing or invalid API key (Authorization: Bearer <key>) or session',
  );
}

/** U1/U6: the one check, before the handler. */
export function authorize(principal: Principal, action: Action): void {
  const decision = decide(principal, action);
  if (!decision.allowed) throw new AppError(ErrorKind.forbidden, 'auth.forbidden', decision.because);
}

/** U4: whose meetings a principal's connections may read (src/db/tenant.ts). */
export function viewerOf(principal: Principal): Viewer {
  return { userId: principal.userId, seeAll: decide(principal, Action.readAllMeetings).allowed };
}

/**
 * U4: routes that change one meeting or one bot recording (`:id`), which only its owner or an
 * admin may: which of the two, or null.
 */
export function meetingOwnerMatters(url: string, action: Action): OwnedThing | null {
  if (action !== Action.createMeetings && action !== Action.manageOwnMeetings) return null;
  if (url.startsWith('/v1/meetings/:id')) return 'meeting';
  if (url.startsWith('/v1/bot-recordings/:id')) return 'bot-recording';
  if (url.startsWith('/v1/batches/:id')) return 'batch';
  return null;
}

/** U4: what a route changes that has an owner. */
export type OwnedThing = 'meeting' | 'bot-recording' | 'batch';

const OWNER_ONLY: Record<OwnedThing, string> = {
  meeting: 'only the meeting’s owner, or an admin, may change it',
  'bot-recording': 'only the person who asked for this bot, or an admin, may stop or cancel it',
  batch: 'only the person who made this batch, or an admin, may cancel it',
};

/**
 * U4: the meeting's owner, or anyone whose role manages every meeting. A meeting the caller cannot
 * read, or that is not there, is left to the handler's 404.
 */
export async function authorizeMeetingChange(
  api: ApiDeps,
  principal: Principal,
  id: string,
  what: OwnedThing = 'meeting',
): Promise<void> {
  if (decide(principal, Action.manageAllMeetings).allowed) return;
  const owner =
    what === 'meeting'
      ? await api.deps.meetings.ownerOf(principal.workspaceId, id)
      : what === 'bot-recording'
        ? await recordingOwnerOf(api.deps.db, principal.workspaceId, id)
        : await batchOwnerOf(api.deps.db, principal.workspaceId, id);
  if (owner === undefined || owner === principal.userId) return;
  throw new AppError(ErrorKind.forbidden, 'auth.forbidden', OWNER_ONLY[what]);
}

/** U3: the cookie a sign-in sets: HttpOnly, SameSite=Lax, Secure when the request came over https. */
export function setSessionCookie(
  req: FastifyRequest,
  reply: FastifyReply,
  secret: string,
  expiresAt: Date,
): void {
  void reply.setCookie(SESSION_COOKIE, secret, {
    path: '/',
    httpOnly: true,
    sameSite: 'lax',
    secure: isHttps(req),
    expires: expiresAt,
  });
}

export function clearSessionCookie(req: FastifyRequest, reply: FastifyReply): void {
  void reply.clearCookie(SESSION_COOKIE, {
    path: '/',
    httpOnly: true,
    sameSite: 'lax',
    secure: isHttps(req),
  });
}

export function isHttps(req: FastifyRequest): boolean {
  return req.protocol === 'https' || req.headers['x-forwarded-proto'] === 'https';
}
