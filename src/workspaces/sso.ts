import * as oidc from 'openid-client';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { hashSecret, normaliseEmail, startSession, type PeopleDeps, type SignedIn } from './sign-in.ts';
import type { UserRow } from './people-store.ts';

/**
 * U2: single sign-on with any OpenID Connect provider, by the authorization code flow with PKCE
 * (openid-client does the protocol: discovery, the token request, the ID token's signature, issuer,
 * audience, expiry and nonce). A sign-in in flight is a row keyed by the hash of its `state`, which
 * also sits in a short-lived cookie of the browser that started it: a callback whose state is not
 * that browser's, or was used, is refused. A person is matched by issuer and subject; a first
 * sign-in with a verified email joins the account that email has, or makes one when its domain is
 * allowed; anyone else needs an account first.
 */

export interface SsoSettings {
  issuer: string | null;
  clientId: string;
  clientSecret: string;
  redirectUrl: string | null;
  allowedDomains: string[];
  workspaceId: string | null;
  newMemberRole: 'member' | 'viewer';
  label: string;
}

/** How long a sign-in may stay at the provider. */
export const SSO_FLOW_MS = 10 * 60_000;
const DISCOVERY_TIMEOUT_S = 10;

const unavailable = (issuer: string, err: unknown) =>
  new AppError(
    ErrorKind.transient,
    'auth.sso_unavailable',
    `the sign-in provider (${issuer}) cannot be reached (${errorText(err)}); try again, or sign in with a password`,
  );

function errorText(err: unknown): string {
  const e = err as { message?: string; cause?: { message?: string; code?: string } };
  const cause = e.cause?.code ?? e.cause?.message;
  return `${e.message ?? String(err)}${cause ? `: ${cause}` : ''}`.slice(0, 200);
}

/** http is allowed only for a provider on this machine (a test's, or a development one). */
function isLoopback(url: URL): boolean {
  return ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
}

export class SsoClient {
  constructor(readonly settings: SsoSettings) {}

  get enabled(): boolean {
    return this.settings.issuer !== null;
  }

  /**
   * The provider's configuration, read at every step of a sign-in (two requests a sign-in, which
   * is rare): a provider that is down is said so before the browser is sent to it, and keys it
   * rotated since the last sign-in are read at once (openid-client caches keys per configuration
   * and would refuse a token under a new key for up to a minute).
   */
  async configuration(): Promise<oidc.Configuration> {
    const issuer = this.settings.issuer;
    if (!issuer) throw new AppError(ErrorKind.notFound, 'auth.sso_off', 'single sign-on is not configured');
    const url = new URL(issuer);
    try {
      return await oidc.discovery(
        url,
        this.settings.clientId,
        undefined,
        oidc.ClientSecretBasic(this.settings.clientSecret),
        {
          timeout: DISCOVERY_TIMEOUT_S,
          // The ID token's signature is checked against the provider's published keys too, not
          // only its claims (OpenID Connect lets a client rely on TLS alone; we do not).
          execute: [
            oidc.enableNonRepudiationChecks,
            ...(url.protocol === 'http:' && isLoopback(url) ? [oidc.allowInsecureRequests] : []),
          ],
        },
      );
    } catch (err) {
      throw unavailable(issuer, err);
    }
  }
}

/** What single sign-on needs: the people deps, which carry the provider's client. */
export type SsoDeps = PeopleDeps;

/** A path of this site to go back to after signing in; anything else is the home page. */
export function safeReturnTo(value: unknown): string {
  if (typeof value !== 'string' || value.length > 500) return '/';
  return /^\/(?![/\\])[^\s\\]*$/.test(value) ? value : '/';
}

/** U2: begins a sign-in: the provider's URL to send the browser to, and the state for its cookie. */
export async function startSso(
  deps: SsoDeps,
  input: { returnTo: unknown; callbackUrl: string },
): Promise<{ redirectTo: string; state: string }> {
  const config = await deps.sso.configuration();
  const state = oidc.randomState();
  const codeVerifier = oidc.randomPKCECodeVerifier();
  const nonce = oidc.randomNonce();
  await deps.people.createSsoFlow({
    stateHash: hashSecret(state),
    codeVerifier,
    nonce,
    returnTo: safeReturnTo(input.returnTo),
    ttlMs: SSO_FLOW_MS,
  });
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: input.callbackUrl,
    scope: 'openid email profile',
    code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
    code_challenge_method: 'S256',
    state,
    nonce,
  });
  return { redirectTo: url.href, state };
}

/**
 * U2: the provider sent the browser back. The state must be the one this browser's cookie holds
 * and not used before; the code is exchanged (with the PKCE verifier) and the ID token checked by
 * openid-client; then the person is found or made, and a session starts.
 */
export async function finishSso(
  deps: SsoDeps,
  input: {
    callbackUrl: string;
    query: Record<string, unknown>;
    cookieState: string | null;
    address: string | null;
  },
): Promise<{ signed: SignedIn; returnTo: string }> {
  const q = (k: string) => (typeof input.query[k] === 'string' ? input.query[k] : null);
  const providerError = q('error');
  if (providerError) {
    throw new AppError(
      ErrorKind.unauthorized,
      'auth.sso_refused',
      `the sign-in provider did not sign you in (${providerError.slice(0, 100)}${q('error_description') ? `: ${q('error_description')!.slice(0, 200)}` : ''})`,
    );
  }
  const state = q('state');
  const code = q('code');
  const badState = () =>
    new AppError(
      ErrorKind.invalidInput,
      'auth.sso_state',
      'this sign-in was not started in this browser, was already used, or took too long; sign in again',
    );
  if (!state || !code) {
    if (!code)
      throw new AppError(ErrorKind.invalidInput, 'auth.sso_code', 'the provider sent no code; sign in again');
    throw badState();
  }
  if (!input.cookieState || input.cookieState !== state) throw badState();
  const flow = await deps.people.takeSsoFlow(hashSecret(state));
  if (!flow) throw badState();

  const config = await deps.sso.configuration();
  const current = new URL(input.callbackUrl);
  for (const [k, v] of Object.entries(input.query)) if (typeof v === 'string') current.searchParams.set(k, v);
  let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>;
  try {
    tokens = await oidc.authorizationCodeGrant(
      config,
      current,
      {
        pkceCodeVerifier: flow.codeVerifier,
        expectedState: state,
        expectedNonce: flow.nonce,
        idTokenExpected: true,
      },
      { redirect_uri: input.callbackUrl },
    );
  } catch (err) {
    throw grantError(deps, err);
  }
  const claims = tokens.claims();
  if (!claims) throw new AppError(ErrorKind.unauthorized, 'auth.sso_token', 'the provider sent no ID token');
  let email = typeof claims.email === 'string' ? claims.email : null;
  let verified = claims.email_verified === true;
  let name = typeof claims.name === 'string' ? claims.name : null;
  if (!email) {
    // Some providers put the email only in the userinfo answer.
    try {
      const info = await oidc.fetchUserInfo(config, tokens.access_token, claims.sub);
      email = typeof info.email === 'string' ? info.email : null;
      verified = info.email_verified === true;
      name = name ?? (typeof info.name === 'string' ? info.name : null);
    } catch (err) {
      deps.log.warn({ err: errorText(err) }, 'sso: the provider’s userinfo could not be read');
    }
  }
  const issuer = config.serverMetadata().issuer;
  const user = await personOf(deps, { issuer, subject: claims.sub, email, verified, name }).catch(
    async (err: unknown) => {
      await deps.audit([
        {
          workspaceId: null,
          action: 'auth.sign_in_failed',
          actor: { kind: 'anonymous', label: email },
          subject: null,
          address: input.address,
          detail: { method: 'sso', reason: err instanceof AppError ? err.code : 'error' },
        },
      ]);
      throw err;
    },
  );
  if (user.disabled_at)
    throw new AppError(ErrorKind.forbidden, 'auth.disabled', 'this account is disabled; ask an admin');
  const signed = await startSession(deps, user, undefined, input.address, 'sso');
  deps.log.info({ event: 'auth.sso_signed_in', userId: user.id, address: input.address }, 'signed in by sso');
  return { signed, returnTo: flow.returnTo };
}

function grantError(deps: SsoDeps, err: unknown): AppError {
  if (err instanceof oidc.ResponseBodyError) {
    // The provider refused the code: expired, used, or not for this client or redirect.
    if (err.error === 'invalid_grant')
      return new AppError(
        ErrorKind.invalidInput,
        'auth.sso_code',
        'the provider refused the sign-in code (expired or already used); sign in again',
      );
    return new AppError(
      ErrorKind.unauthorized,
      'auth.sso_refused',
      `the provider refused the sign-in (${err.error}); check the client id and secret`,
    );
  }
  if (err instanceof oidc.ClientError || err instanceof oidc.AuthorizationResponseError) {
    deps.log.warn({ err: errorText(err) }, 'sso: the provider’s answer did not verify');
    return new AppError(
      ErrorKind.unauthorized,
      'auth.sso_token',
      'the provider’s answer could not be verified (its ID token’s signature, issuer, audience, nonce or time); sign in again',
    );
  }
  return unavailable(deps.sso.settings.issuer ?? '', err);
}

/** The person a provider's identity is: linked before, the account of its verified email, or a new one. */
const linkRefused = (email: string) =>
  new AppError(
    ErrorKind.forbidden,
    'auth.sso_link_refused',
    `an account with ${email} exists and single sign-on does not join it by email alone here; sign in with its password`,
  );

async function personOf(
  deps: SsoDeps,
  who: { issuer: string; subject: string; email: string | null; verified: boolean; name: string | null },
): Promise<UserRow> {
  const linked = await deps.people.userByIdentity(who.issuer, who.subject);
  if (linked) return linked;
  const noAccount = () =>
    new AppError(
      ErrorKind.forbidden,
      'auth.sso_no_account',
      `there is no account for ${who.email ?? 'this sign-in'}${who.email && !who.verified ? ' (its email is not verified by the provider)' : ''}; ask an admin for an invite`,
    );
  if (!who.email || !who.verified) throw noAccount();
  let email: string;
  try {
    email = normaliseEmail(who.email);
  } catch {
    throw noAccount();
  }
  const existing = await deps.people.userByEmail(email);
  const domain = email.split('@')[1] ?? '';
  // The provider is trusted for an email only in the domains the operator named: there an account
  // is made, or an existing one joined. An existing account elsewhere, or one that is an owner or
  // admin anywhere, is never joined by an email claim alone (a provider that lets people set their
  // own email would hand it over): it signs in with its password.
  if (!deps.sso.settings.allowedDomains.includes(domain)) {
    if (existing) throw linkRefused(email);
    throw noAccount();
  }
  if (existing) {
    if (existing.disabled_at)
      throw new AppError(ErrorKind.forbidden, 'auth.disabled', 'this account is disabled; ask an admin');
    const roles = (await deps.people.workspacesOf(existing.id)).map((w) => w.role);
    if (roles.some((r) => r === 'owner' || r === 'admin')) throw linkRefused(email);
  }
  const workspaceId = existing
    ? null
    : (deps.sso.settings.workspaceId ?? (await deps.people.oldestWorkspaceId()));
  if (!existing && !workspaceId) throw noAccount();
  const userId = await deps.people.transaction(async (trx) => {
    const id =
      existing?.id ??
      (await deps.people.createUser(trx, {
        email,
        name: (who.name ?? '').trim().slice(0, 200) || email.split('@')[0] || email,
        passwordHash: null,
      }));
    if (!existing) await deps.people.putMembership(trx, workspaceId!, id, deps.sso.settings.newMemberRole);
    await deps.people.linkIdentity(trx, { issuer: who.issuer, subject: who.subject, userId: id, email });
    return id;
  });
  deps.log.info(
    { event: existing ? 'auth.sso_linked' : 'auth.sso_account_made', userId },
    existing ? 'a provider identity joined an account' : 'an account was made at its first sign-in',
  );
  return (await deps.people.userById(userId))!;
}
