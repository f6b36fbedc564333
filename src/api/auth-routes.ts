import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { isRole, mayAssign, Role } from '../domain/roles.ts';
import {
  createInviteLink,
  csrfTokenOf,
  redeemLink,
  sessionPrincipal,
  signInWithPassword,
  type SignedIn,
} from '../workspaces/sign-in.ts';
import {
  clearSessionCookie,
  isHttps,
  requireCsrf,
  refuseUnauthenticated,
  sessionSecretOf,
  setSessionCookie,
} from './authorize.ts';
import { finishSso, SSO_FLOW_MS, startSso } from '../workspaces/sso.ts';
import { principalOf, workspaceOf, type ApiDeps } from './context.ts';
import { empty, ERRORS, json, jsonBody, refusal, type RouteSchema } from './contract.ts';
import { MemberListSchema, MemberSchema, InviteSchema, SessionSchema } from './schemas.ts';

const AUTH_ERRORS = {
  400: refusal('Invalid input'),
  401: refusal('Wrong email or password, or no session'),
  403: refusal('CSRF token missing, or not a member of that workspace'),
};
const SIGN_IN_SCHEMA: RouteSchema = {
  summary:
    'U2: sign in with an email and password; sets the session cookie (HttpOnly, SameSite=Lax) and answers with the CSRF token writes must send in x-csrf-token. Too many failures for one email: 429 auth.locked with Retry-After',
  body: jsonBody({
    type: 'object',
    required: ['email', 'password'],
    properties: {
      email: { type: 'string' },
      password: { type: 'string' },
      workspaceId: {
        type: 'string',
        format: 'uuid',
        description: 'which of your workspaces (default: the first)',
      },
    },
  }),
  response: { 200: json('Signed in', SessionSchema), ...AUTH_ERRORS, 429: refusal('Locked out for a while') },
};
const REDEEM_SCHEMA: RouteSchema = {
  summary:
    'U1/U2: redeem a setup or invite link: makes your account (or joins with the one your email has, given its password), adds you to the workspace with the link’s role and signs you in. A used or expired link: 404',
  body: jsonBody({
    type: 'object',
    required: ['token', 'email', 'password'],
    properties: {
      token: { type: 'string' },
      email: { type: 'string' },
      name: { type: 'string' },
      password: { type: 'string', minLength: 12 },
    },
  }),
  response: { 200: json('Signed in', SessionSchema), ...AUTH_ERRORS, 404: refusal('No such link') },
};
const SESSION_SCHEMA: RouteSchema = {
  summary: 'U3: the signed-in session: who, which workspace and role, your workspaces, and the CSRF token',
  response: { 200: json('The session', SessionSchema), ...AUTH_ERRORS },
};
const SWITCH_SCHEMA: RouteSchema = {
  summary: 'U1: move the session to another of your workspaces',
  body: jsonBody({
    type: 'object',
    required: ['workspaceId'],
    properties: { workspaceId: { type: 'string', format: 'uuid' } },
  }),
  response: { 200: json('The session', SessionSchema), ...AUTH_ERRORS },
};
const SIGN_OUT_SCHEMA: RouteSchema = {
  summary: 'U3: end this session (the cookie is cleared)',
  response: { 204: empty('Signed out'), ...AUTH_ERRORS },
};
const SIGN_OUT_ALL_SCHEMA: RouteSchema = {
  summary: 'U3: end every session of yours, in every workspace, this one included',
  response: { 204: empty('Signed out everywhere'), ...AUTH_ERRORS },
};

const METHODS_SCHEMA: RouteSchema = {
  summary: 'U2: how one may sign in here: a password always; single sign-on when a provider is configured',
  response: {
    200: json('Sign-in methods', {
      type: 'object',
      required: ['password', 'sso', 'emailInvites'],
      properties: {
        password: { type: 'boolean' },
        emailInvites: {
          type: 'boolean',
          description: 'U9: invites can be sent by email (an SMTP server is set)',
        },
        sso: {
          anyOf: [
            { type: 'null' },
            {
              type: 'object',
              required: ['label', 'start'],
              properties: { label: { type: 'string' }, start: { type: 'string' } },
            },
          ],
        },
      },
    }),
  },
};
const SSO_START_SCHEMA: RouteSchema = {
  summary:
    'U2: begin single sign-on: redirects the browser to the provider (authorization code with PKCE), and back to returnTo (a path of this site) once signed in',
  querystring: { type: 'object', properties: { returnTo: { type: 'string' } } },
  response: {
    302: empty('To the provider'),
    404: refusal('Single sign-on is not configured'),
    503: refusal('The provider cannot be reached'),
  },
};
const SSO_CALLBACK_SCHEMA: RouteSchema = {
  summary:
    'U2: where the provider sends the browser back: the code is exchanged, the ID token verified, the session cookie set, and the browser redirected to where it started. A state this browser did not start or already used: 400 auth.sso_state; a code the provider refuses (expired, used): 400 auth.sso_code; no account for this person: 403 auth.sso_no_account',
  querystring: {
    type: 'object',
    properties: {
      code: { type: 'string' },
      state: { type: 'string' },
      error: { type: 'string' },
      error_description: { type: 'string' },
    },
  },
  response: {
    302: empty('Signed in; to where the sign-in started'),
    400: refusal('A wrong or used state, or a refused code'),
    401: refusal('The provider refused, or its answer did not verify'),
    403: refusal('No account for this person, or it is disabled'),
    503: refusal('The provider cannot be reached'),
  },
};
const SSO_COOKIE = 'verbatim_sso';
const SSO_COOKIE_PATH = '/v1/auth/oidc/';

/** The callback URL the provider knows: the setting, or this server as the browser reached it. */
function callbackUrlOf(api: ApiDeps, req: FastifyRequest): string {
  const configured = api.people.sso.settings.redirectUrl;
  if (configured) return configured;
  const proto = isHttps(req) ? 'https' : 'http';
  return `${proto}://${req.headers.host ?? 'localhost'}/v1/auth/oidc/callback`;
}

function addressOf(req: FastifyRequest): string | null {
  return req.ip || null;
}

/** The session of the request's cookie, or 401. */
async function currentSession(api: ApiDeps, req: FastifyRequest) {
  const secret = sessionSecretOf(req);
  const principal = secret ? await sessionPrincipal(api.people, secret) : null;
  if (!secret || !principal || principal.userId === null) throw refuseUnauthenticated();
  return { secret, principal, userId: principal.userId };
}

async function describeSession(
  api: ApiDeps,
  secret: string,
  userId: string,
  workspaceId: string,
  role: Role,
  expiresAt: Date,
) {
  const user = await api.people.people.userById(userId);
  return {
    user: { id: userId, email: user?.email ?? '', name: user?.name ?? '' },
    workspaceId,
    role,
    workspaces: await api.people.people.workspacesOf(userId),
    csrfToken: csrfTokenOf(secret),
    expiresAt: expiresAt.toISOString(),
  };
}

async function answerSignedIn(api: ApiDeps, req: FastifyRequest, reply: FastifyReply, signed: SignedIn) {
  setSessionCookie(req, reply, signed.secret, signed.expiresAt);
  return describeSession(
    api,
    signed.secret,
    signed.user.id,
    signed.workspaceId,
    signed.role,
    signed.expiresAt,
  );
}

/** U2/U3: sign-in, links, the session, sign-out. No API key needed; a session where it says so. */
export function registerAuthRoutes(app: FastifyInstance, api: ApiDeps): void {
  app.post<{ Body: { email?: unknown; password?: unknown; workspaceId?: unknown } }>(
    '/v1/auth/sign-in',
    { schema: SIGN_IN_SCHEMA },
    async (req, reply) => {
      const body = req.body ?? {};
      const signed = await signInWithPassword(api.people, {
        email: body.email,
        password: body.password,
        ...(typeof body.workspaceId === 'string' ? { workspaceId: body.workspaceId } : {}),
        address: addressOf(req),
      });
      return answerSignedIn(api, req, reply, signed);
    },
  );

  app.get('/v1/auth/methods', { schema: METHODS_SCHEMA }, () => ({
    password: true,
    emailInvites: api.people.mailer.enabled,
    sso: api.people.sso.enabled
      ? { label: api.people.sso.settings.label, start: '/v1/auth/oidc/start' }
      : null,
  }));

  app.get<{ Querystring: { returnTo?: string } }>(
    '/v1/auth/oidc/start',
    { schema: SSO_START_SCHEMA },
    async (req, reply) => {
      const { redirectTo, state } = await startSso(api.people, {
        returnTo: req.query.returnTo,
        callbackUrl: callbackUrlOf(api, req),
      });
      void reply.setCookie(SSO_COOKIE, state, {
        path: SSO_COOKIE_PATH,
        httpOnly: true,
        sameSite: 'lax',
        secure: isHttps(req),
        maxAge: SSO_FLOW_MS / 1000,
      });
      return reply.redirect(redirectTo, 302);
    },
  );

  app.get('/v1/auth/oidc/callback', { schema: SSO_CALLBACK_SCHEMA }, async (req, reply) => {
    const cookieState = req.cookies[SSO_COOKIE] ?? null;
    // The flow's cookie is spent whatever happens next.
    void reply.clearCookie(SSO_COOKIE, { path: SSO_COOKIE_PATH });
    const { signed, returnTo } = await finishSso(api.people, {
      callbackUrl: callbackUrlOf(api, req),
      query: (req.query ?? {}) as Record<string, unknown>,
      cookieState,
      address: addressOf(req),
    });
    setSessionCookie(req, reply, signed.secret, signed.expiresAt);
    return reply.redirect(returnTo, 302);
  });

  app.post('/v1/auth/links/redeem', { schema: REDEEM_SCHEMA }, async (req, reply) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    const signed = await redeemLink(api.people, {
      token: body.token,
      email: body.email,
      name: body.name,
      password: body.password,
      address: addressOf(req),
    });
    return answerSignedIn(api, req, reply, signed);
  });

  app.get('/v1/auth/session', { schema: SESSION_SCHEMA }, async (req) => {
    const { secret, principal, userId } = await currentSession(api, req);
    return describeSession(api, secret, userId, principal.workspaceId, principal.role, principal.expiresAt!);
  });

  app.post('/v1/auth/workspace', { schema: SWITCH_SCHEMA }, async (req) => {
    const { secret, principal, userId } = await currentSession(api, req);
    requireCsrf(req, secret);
    const wanted = (req.body as { workspaceId?: unknown } | undefined)?.workspaceId;
    const role =
      typeof wanted === 'string' ? await api.people.people.roleOf(wanted, userId).catch(() => null) : null;
    if (typeof wanted !== 'string' || role === null) {
      throw new AppError(ErrorKind.forbidden, 'auth.no_workspace', 'you are not a member of that workspace');
    }
    await api.people.people.moveSession(principal.sessionId!, wanted);
    return describeSession(api, secret, userId, wanted, role, principal.expiresAt!);
  });

  app.post('/v1/auth/sign-out', { schema: SIGN_OUT_SCHEMA }, async (req, reply) => {
    const { secret, principal } = await currentSession(api, req);
    requireCsrf(req, secret);
    await api.people.people.revokeSession(principal.sessionId!);
    clearSessionCookie(req, reply);
    return reply.status(204).send();
  });

  app.post('/v1/auth/sign-out-everywhere', { schema: SIGN_OUT_ALL_SCHEMA }, async (req, reply) => {
    const { secret, userId, principal } = await currentSession(api, req);
    requireCsrf(req, secret);
    const ended = await api.people.people.revokeUserSessions(userId);
    await api.people.audit([
      {
        workspaceId: principal.workspaceId,
        action: 'auth.signed_out_everywhere',
        actor: { kind: 'person', userId },
        subject: { type: 'user', id: userId },
        address: addressOf(req),
        detail: { sessions: ended },
      },
    ]);
    api.log.info({ event: 'auth.signed_out_everywhere', userId, sessions: ended }, 'signed out everywhere');
    clearSessionCookie(req, reply);
    return reply.status(204).send();
  });
}

const MEMBER_PARAMS = {
  type: 'object',
  required: ['userId'],
  properties: { userId: { type: 'string', format: 'uuid' } },
};
const FORBIDDEN = refusal('Your role or key scope may not do this (auth.forbidden)');
const MEMBERS_SCHEMA: RouteSchema = {
  summary: 'U1: the workspace’s members and their roles',
  response: { 200: json('{members: [...]}', MemberListSchema), ...ERRORS, 403: FORBIDDEN },
};
const ROLE_SCHEMA: RouteSchema = {
  summary:
    'U1: change a member’s role. Admins manage members and viewers; only an owner makes, demotes or removes an admin or owner; the last owner stays (409 member.last_owner). Takes effect at their next request',
  params: MEMBER_PARAMS,
  body: jsonBody({
    type: 'object',
    required: ['role'],
    properties: { role: { type: 'string', enum: ['owner', 'admin', 'member', 'viewer'] } },
  }),
  response: {
    200: json('The member', MemberSchema),
    ...ERRORS,
    403: FORBIDDEN,
    409: refusal('The last owner'),
  },
};
const REMOVE_SCHEMA: RouteSchema = {
  summary:
    'U1/U3: remove a member: their sessions in this workspace end and their keys here are revoked at once',
  params: MEMBER_PARAMS,
  response: { 204: empty('Removed'), ...ERRORS, 403: FORBIDDEN, 409: refusal('The last owner') },
};
const INVITE_SCHEMA: RouteSchema = {
  summary:
    'U1/U9: an invite link to this workspace with a role, to copy to the person (valid VERBATIM_SETUP_LINK_HOURS, used once), and sent to `email` when an SMTP server is set. The token is shown this once',
  body: jsonBody({
    type: 'object',
    required: ['role'],
    properties: {
      role: { type: 'string', enum: ['owner', 'admin', 'member', 'viewer'] },
      email: { type: 'string', description: 'send the link to this address (needs VERBATIM_SMTP_URL)' },
    },
  }),
  response: { 201: json('The link', InviteSchema), ...ERRORS, 403: FORBIDDEN },
};

/** U9: the address an invite is to be emailed to, or null; 400 when it is malformed or mail is off. */
function inviteEmailOf(body: unknown, mailOn: boolean): string | null {
  const email = (body as { email?: unknown } | undefined)?.email;
  if (email === undefined || email === null || email === '') return null;
  if (
    typeof email !== 'string' ||
    email.length > 254 ||
    !/^[^\s@<>,;"]+@[^\s@<>,;"]+\.[^\s@<>,;"]+$/.test(email)
  ) {
    throw new AppError(ErrorKind.invalidInput, 'invite.email', 'email must be one email address');
  }
  if (!mailOn) {
    throw new AppError(
      ErrorKind.invalidInput,
      'invite.email_off',
      'invites cannot be emailed here (no VERBATIM_SMTP_URL is set): create the link without an email and send it yourself',
    );
  }
  return email;
}

function parseRole(body: unknown): Role {
  const role = (body as { role?: unknown } | undefined)?.role;
  if (!isRole(role)) {
    throw new AppError(
      ErrorKind.invalidInput,
      'member.role',
      'role must be one of owner, admin, member, viewer',
    );
  }
  return role;
}

/** U1: members, roles and invites of the request's workspace. */
export function registerMemberRoutes(app: FastifyInstance, api: ApiDeps): void {
  const people = api.people.people;

  app.get('/v1/members', { schema: MEMBERS_SCHEMA }, async (req) => ({
    members: await people.listMembers(workspaceOf(req)),
  }));

  /** Whether the caller may change a member from `from` to `to` (or remove them, `to` null). */
  const mayChange = (req: FastifyRequest, from: Role, to: Role | null) => {
    const grant = principalOf(req);
    if (!mayAssign(grant, from) || (to !== null && !mayAssign(grant, to))) {
      throw new AppError(
        ErrorKind.forbidden,
        'auth.forbidden',
        `the ${grant.role} role may not change an ${from}${to ? ` to ${to}` : ''}`,
      );
    }
  };

  const change = async (req: FastifyRequest, userId: string, to: Role | null) => {
    const workspaceId = workspaceOf(req);
    return people.transaction(async (trx) => {
      await people.lockWorkspace(trx, workspaceId);
      const from = await people.roleOf(workspaceId, userId, trx);
      if (from === null) {
        throw new AppError(ErrorKind.notFound, 'member.not_found', 'no such member of this workspace');
      }
      mayChange(req, from, to);
      if (
        from === Role.owner &&
        to !== Role.owner &&
        (await people.countRole(trx, workspaceId, Role.owner)) <= 1
      ) {
        throw new AppError(ErrorKind.conflict, 'member.last_owner', 'a workspace keeps at least one owner');
      }
      if (to === null) {
        await people.removeMembership(trx, workspaceId, userId);
        await people.revokeUserSessions(userId, workspaceId, trx);
        await api.workspaces.revokeUserKeys(trx, workspaceId, userId);
      } else {
        await people.putMembership(trx, workspaceId, userId, to);
      }
      api.log.info(
        { event: 'member.changed', workspaceId, userId, from, to, by: principalOf(req).userId },
        'member changed',
      );
    });
  };

  app.patch<{ Params: { userId: string } }>('/v1/members/:userId', { schema: ROLE_SCHEMA }, async (req) => {
    const role = parseRole(req.body);
    await change(req, req.params.userId, role);
    const member = (await people.listMembers(workspaceOf(req))).find((m) => m.userId === req.params.userId);
    return member;
  });

  app.delete<{ Params: { userId: string } }>(
    '/v1/members/:userId',
    { schema: REMOVE_SCHEMA },
    async (req, reply) => {
      await change(req, req.params.userId, null);
      return reply.status(204).send();
    },
  );

  app.post('/v1/invites', { schema: INVITE_SCHEMA }, async (req, reply) => {
    const role = parseRole(req.body);
    const principal = principalOf(req);
    if (!mayAssign(principal, role)) {
      throw new AppError(
        ErrorKind.forbidden,
        'auth.forbidden',
        `the ${principal.role} role may not invite an ${role}`,
      );
    }
    const email = inviteEmailOf(req.body, api.people.mailer.enabled);
    const workspaceId = workspaceOf(req);
    const link = await createInviteLink(api.people, workspaceId, role, principal.userId);
    let emailError: string | null = null;
    if (email !== null) {
      // U9: a mail server that fails leaves the link valid, to copy instead; the answer says why.
      const workspace = await api.workspaces.nameOf(workspaceId);
      const origin = `${isHttps(req) ? 'https' : 'http'}://${req.headers.host ?? 'localhost'}`;
      const sent = await api.people.mailer.sendInvite(email, api.people.mailer.joinUrl(link.token, origin), {
        role,
        workspace: workspace ?? 'a workspace',
      });
      if (!sent.sent) emailError = sent.reason;
    }
    return reply.status(201).send({
      token: link.token,
      role,
      expiresAt: link.expiresAt.toISOString(),
      emailedTo: email !== null && emailError === null ? email : null,
      emailError,
    });
  });
}
