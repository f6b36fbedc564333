import { createHash, randomBytes } from 'node:crypto';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { Role, type Scope } from '../domain/roles.ts';
import type { Logger } from '../log.ts';
import { checkNewPassword, hashPassword, passwordMatches } from './passwords.ts';
import type { PgPeopleStore, UserRow } from './people-store.ts';
import type { SsoClient } from './sso.ts';
import type { InviteMailer } from './invite-mail.ts';
import type { AuditEntry } from './audit-store.ts';

/**
 * U2/U3: signing in and the sessions it makes. A session's secret (`vbs_…`) lives only in the
 * browser's HttpOnly cookie; the database keeps its SHA-256. The CSRF token is derived from the
 * secret (a page on another site can send the cookie but cannot read the token), so nothing more
 * is stored. Who a request acts as, by key or by session, is a Principal.
 */

export interface SessionSettings {
  idleMs: number;
  maxMs: number;
  setupLinkMs: number;
  maxFailures: number;
  lockoutMs: number;
}

export interface PeopleDeps {
  people: PgPeopleStore;
  sessions: SessionSettings;
  /** U2: the single sign-on provider (disabled when no issuer is set). */
  sso: SsoClient;
  /** U9: invite emails, when an SMTP server is set. */
  mailer: InviteMailer;
  /** U8: writes to the audit trail (never throws: src/workspaces/audit.ts). */
  audit: (entries: AuditEntry[]) => Promise<void>;
  log: Logger;
}

/** Who a request acts as: the workspace, the person (none for a service account), role and scopes. */
export interface Principal {
  workspaceId: string;
  userId: string | null;
  role: Role;
  /** A key's scopes; null for a session (every scope its role allows). */
  scopes: Scope[] | null;
  via: 'key' | 'session';
  keyId: string | null;
  sessionId: string | null;
  /** When the key or session stops working; null: a key without expiry. */
  expiresAt: Date | null;
}

const SESSION_PREFIX = 'vbs_';
const LINK_PREFIX = 'vbl_';
/** last_seen_at is written at most this often per session (a read is not a write). */
const TOUCH_EVERY_MS = 60_000;

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

function newSecret(prefix: string): string {
  return `${prefix}${randomBytes(32).toString('base64url')}`;
}

/** U3: the CSRF token of a session: what a cookie-authenticated write must also send in a header. */
export function csrfTokenOf(sessionSecret: string): string {
  return createHash('sha256').update(`verbatim-csrf:${sessionSecret}`).digest('base64url');
}

export function normaliseEmail(value: unknown): string {
  const email = typeof value === 'string' ? value.trim().toLowerCase() : '';
  if (email.length > 254 || !/^[^\s@]+@[^\s@]+$/.test(email)) {
    throw new AppError(ErrorKind.invalidInput, 'user.email', 'email must be an email address');
  }
  return email;
}

function normaliseName(value: unknown, email: string): string {
  if (value === undefined || value === null || value === '') return email.split('@')[0] ?? email;
  if (typeof value !== 'string' || value.trim() === '' || value.length > 200) {
    throw new AppError(ErrorKind.invalidInput, 'user.name', 'name must be a string of 1 to 200 characters');
  }
  return value.trim();
}

const throttleKey = (email: string) => hashSecret(`sign-in:${email}`);

function lockedOut(seconds: number): AppError {
  return new AppError(
    ErrorKind.quotaExhausted,
    'auth.locked',
    `too many failed sign-ins for this email; try again in ${Math.ceil(seconds)} s`,
    { retryAfterSeconds: seconds },
  );
}

export interface SignedIn {
  /** The session's secret: for the cookie only, never a response body or a log. */
  secret: string;
  csrfToken: string;
  expiresAt: Date;
  user: { id: string; email: string; name: string };
  workspaceId: string;
  role: Role;
}

/**
 * U2: a password sign-in. Failures are counted per email, whether or not it is a user's; past
 * `maxFailures` the email is locked out (429 with Retry-After), doubling with each further failure.
 * An unknown email and a wrong password get the same answer, in the same time.
 */
export async function signInWithPassword(
  deps: PeopleDeps,
  input: { email: unknown; password: unknown; workspaceId?: string; address: string | null },
): Promise<SignedIn> {
  const email = normaliseEmail(input.email);
  const password = typeof input.password === 'string' ? input.password : '';
  const user = await deps.people.userByEmail(email);
  await throttled(deps, email, input.address, async () => {
    // Hashed for an unknown email too (against a dummy hash): the same answer in the same time.
    const matches = await passwordMatches(user?.password_hash ?? null, password);
    if (!user) return 'no such account';
    if (!matches) return 'wrong password';
    return user.disabled_at ? 'account disabled' : null;
  });
  return startSession(deps, user!, input.workspaceId, input.address, 'password');
}

/**
 * U2: one password check under the per-email throttle. The attempt is counted before the check,
 * atomically, so parallel guesses cannot all pass a lock that is not set yet: an attempt past
 * `maxFailures` is refused (and locks) without a check; a failed one from the `maxFailures`th on
 * locks for `lockoutMs`, doubled for each failure beyond (at most a day); a good one clears the
 * count. `check` answers why it failed, or null. Unknown emails count like known ones.
 */
async function throttled(
  deps: PeopleDeps,
  email: string,
  address: string | null,
  check: () => Promise<string | null>,
): Promise<void> {
  const key = throttleKey(email);
  const { maxFailures, lockoutMs } = deps.sessions;
  const lockMs = (n: number) => Math.min(lockoutMs * 2 ** Math.max(0, n - maxFailures), 86_400_000);
  const { attempt, lockedSeconds, afterLock } = await deps.people.countAttempt(key);
  if (lockedSeconds > 0) {
    await auditFailure(deps, email, 'locked out', address);
    throw lockedOut(lockedSeconds);
  }
  // Past the limit with no lock yet: a guess sent alongside others. The first attempt after a
  // lock ran out is checked (else the owner of the email could never get in again).
  if (attempt > maxFailures && !afterLock) {
    await deps.people.lockFor(key, lockMs(attempt));
    await auditFailure(deps, email, 'locked out', address);
    throw lockedOut(lockMs(attempt) / 1000);
  }
  const failed = await check();
  if (failed === null) {
    await deps.people.clearFailures(key);
    return;
  }
  deps.log.info({ event: 'auth.sign_in_failed', address }, 'sign-in failed');
  await auditFailure(deps, email, failed, address);
  if (attempt >= maxFailures) {
    await deps.people.lockFor(key, lockMs(attempt));
    throw lockedOut(lockMs(attempt) / 1000);
  }
  throw new AppError(ErrorKind.unauthorized, 'auth.invalid_credentials', 'wrong email or password');
}

/**
 * U8: a failed sign-in, in the trail of every workspace the email's account belongs to (their
 * admins see who is being guessed at), or in the operator's trail when no account has it.
 */
async function auditFailure(deps: PeopleDeps, email: string, reason: string, address: string | null) {
  const user = await deps.people.userByEmail(email);
  const workspaces = user ? (await deps.people.workspacesOf(user.id)).map((w) => w.id) : [];
  await deps.audit(
    (workspaces.length > 0 ? workspaces : [null]).map((workspaceId) => ({
      workspaceId,
      action: 'auth.sign_in_failed',
      actor: { kind: 'anonymous' as const, label: email },
      subject: user ? { type: 'user', id: user.id } : null,
      address,
      detail: { reason },
    })),
  );
}

export async function startSession(
  deps: PeopleDeps,
  user: UserRow,
  workspaceId: string | undefined,
  address: string | null,
  method: 'password' | 'link' | 'sso',
): Promise<SignedIn> {
  const memberships = await deps.people.workspacesOf(user.id);
  const chosen = workspaceId ? memberships.find((m) => m.id === workspaceId) : memberships[0];
  if (!chosen) {
    throw new AppError(
      ErrorKind.forbidden,
      'auth.no_workspace',
      workspaceId ? 'you are not a member of that workspace' : 'you are not a member of any workspace',
    );
  }
  const secret = newSecret(SESSION_PREFIX);
  const session = await deps.people.transaction((trx) =>
    deps.people.createSession(trx, {
      idHash: hashSecret(secret),
      userId: user.id,
      workspaceId: chosen.id,
      maxMs: deps.sessions.maxMs,
      address,
    }),
  );
  deps.log.info({ event: 'auth.signed_in', userId: user.id, workspaceId: chosen.id, address }, 'signed in');
  await deps.audit([
    {
      workspaceId: chosen.id,
      action: 'auth.signed_in',
      actor: { kind: 'person', userId: user.id, label: user.email },
      subject: { type: 'session', id: session.id },
      address,
      detail: { method },
    },
  ]);
  return {
    secret,
    csrfToken: csrfTokenOf(secret),
    expiresAt: session.expiresAt,
    user: { id: user.id, email: user.email, name: user.name },
    workspaceId: chosen.id,
    role: chosen.role,
  };
}

/**
 * U3: the principal of a session secret, or null: unknown, revoked, its user disabled or no longer
 * a member, past its absolute expiry, or idle too long. The role is read at every request, so a
 * demotion takes effect at the next one.
 */
export async function sessionPrincipal(deps: PeopleDeps, secret: string): Promise<Principal | null> {
  if (!secret.startsWith(SESSION_PREFIX) || secret.length > 100) return null;
  const grant = await deps.people.sessionGrant(hashSecret(secret));
  if (!grant) return null;
  const now = grant.now.getTime();
  if (now >= grant.expiresAt.getTime() || now - grant.lastSeenAt.getTime() >= deps.sessions.idleMs) {
    await deps.people.revokeSession(grant.sessionId);
    return null;
  }
  if (now - grant.lastSeenAt.getTime() >= TOUCH_EVERY_MS) await deps.people.touchSession(grant.sessionId);
  return {
    workspaceId: grant.workspaceId,
    userId: grant.userId,
    role: grant.role,
    scopes: null,
    via: 'session',
    keyId: null,
    sessionId: grant.sessionId,
    expiresAt: grant.expiresAt,
  };
}

export interface CreatedLink {
  /** The link's secret: shown once to whoever made it (or printed at first start). */
  token: string;
  expiresAt: Date;
}

/** U2: the first owner's one-time setup link, for the workspace; earlier unused ones are void. */
export async function createSetupLink(deps: PeopleDeps, workspaceId: string): Promise<CreatedLink> {
  const token = newSecret(LINK_PREFIX);
  const link = await deps.people.transaction(async (trx) => {
    await deps.people.voidSetupLinks(trx);
    return deps.people.createLink(
      {
        tokenHash: hashSecret(token),
        kind: 'setup',
        workspaceId,
        role: Role.owner,
        createdBy: null,
        ttlMs: deps.sessions.setupLinkMs,
      },
      trx,
    );
  });
  return { token, expiresAt: link.expiresAt };
}

/** U1: an invite link to the workspace with a role (made by someone allowed to give it). */
export async function createInviteLink(
  deps: PeopleDeps,
  workspaceId: string,
  role: Role,
  createdBy: string | null,
): Promise<CreatedLink> {
  const token = newSecret(LINK_PREFIX);
  const link = await deps.people.createLink({
    tokenHash: hashSecret(token),
    kind: 'invite',
    workspaceId,
    role,
    createdBy,
    ttlMs: deps.sessions.setupLinkMs,
  });
  return { token, expiresAt: link.expiresAt };
}

/**
 * U1/U2: redeems a setup or invite link: makes the account (or, for an email that already has one,
 * checks its password), adds the membership with the link's role, and signs in. A link is used once;
 * an unknown, used or expired one is 404.
 */
export async function redeemLink(
  deps: PeopleDeps,
  input: { token: unknown; email: unknown; name?: unknown; password: unknown; address: string | null },
): Promise<SignedIn> {
  const token = typeof input.token === 'string' ? input.token : '';
  const email = normaliseEmail(input.email);
  const password = checkNewPassword(input.password);
  const name = normaliseName(input.name, email);
  const tokenHash = token.startsWith(LINK_PREFIX) && token.length < 100 ? hashSecret(token) : null;
  const notFound = () =>
    new AppError(ErrorKind.notFound, 'link.not_found', 'this link is unknown, used or expired');
  // The link first: without a usable one nothing is said about the email, and no hash is computed.
  if (tokenHash === null || !(await deps.people.usableLinkExists(tokenHash))) throw notFound();
  const existing = await deps.people.userByEmail(email);
  if (existing) {
    // Joining with an existing account is a sign-in: the same throttle and the same answers.
    await throttled(deps, email, input.address, async () => {
      if (!(await passwordMatches(existing.password_hash, password))) return 'wrong password';
      return existing.disabled_at ? 'account disabled' : null;
    });
  }
  const passwordHash = existing ? null : await hashPassword(password);
  const { user, workspaceId } = await deps.people.transaction(async (trx) => {
    const link = await deps.people.lockUsableLink(trx, tokenHash);
    if (!link) throw notFound();
    if (existing && (await deps.people.roleOf(link.workspace_id, existing.id, trx)) !== null) {
      // A link never changes the role of someone already there (an owner is not demoted by it).
      throw new AppError(ErrorKind.conflict, 'member.exists', 'you are already a member of this workspace');
    }
    const userId = existing?.id ?? (await deps.people.createUser(trx, { email, name, passwordHash }));
    await deps.people.putMembership(trx, link.workspace_id, userId, link.role as Role);
    await deps.people.markLinkUsed(trx, link.id, userId);
    if (link.kind === 'setup') await deps.people.voidSetupLinks(trx);
    const user = existing ?? (await deps.people.userById(userId, trx));
    return { user: user!, workspaceId: link.workspace_id };
  });
  deps.log.info({ event: 'auth.link_redeemed', userId: user.id, workspaceId }, 'link redeemed');
  return startSession(deps, user, workspaceId, input.address, 'link');
}
