import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import Provider from 'oidc-provider';

/**
 * U2: a real OpenID Connect provider for tests — the certified `oidc-provider` package, on
 * 127.0.0.1 — with its development login form (any login, any password: the account is the login
 * given), PKCE required, and hooks a test needs to make the bad days: its signing keys rotated,
 * its authorization codes expired, the provider stopped and started again on the same port.
 */

export interface TestAccount {
  email: string;
  emailVerified: boolean;
  name: string;
}

/** oidc-provider's storage, in memory, reachable by the test (to expire what it issued). */
class Store {
  readonly rows = new Map<string, Record<string, unknown>>();
}

function adapterOf(store: Store) {
  return class Adapter {
    constructor(private readonly model: string) {}
    key(id: string) {
      return `${this.model}:${id}`;
    }
    async upsert(id: string, payload: Record<string, unknown>) {
      store.rows.set(this.key(id), { ...payload });
    }
    async find(id: string) {
      return store.rows.get(this.key(id));
    }
    async findByUid(uid: string) {
      for (const [k, v] of store.rows) if (k.startsWith(`${this.model}:`) && v.uid === uid) return v;
      return undefined;
    }
    async findByUserCode() {
      return undefined;
    }
    async consume(id: string) {
      const row = store.rows.get(this.key(id));
      if (row) row.consumed = Math.floor(Date.now() / 1000);
    }
    async destroy(id: string) {
      store.rows.delete(this.key(id));
    }
    async revokeByGrantId(grantId: string) {
      for (const [k, v] of store.rows) if (v.grantId === grantId) store.rows.delete(k);
    }
  };
}

function newSigningKey(): Record<string, unknown> {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: randomUUID(), alg: 'RS256', use: 'sig' };
}

export interface TestIdp {
  issuer: string;
  clientId: string;
  clientSecret: string;
  accounts: Map<string, TestAccount>;
  /** The key ID tokens are signed with now (the first of the published set). */
  signingKid(): string;
  /** The callback URLs the client may use (known once the API listens). */
  setRedirectUris(uris: string[]): void;
  /** A new signing key; the old ones are no longer published (a rotation that retires them). */
  rotateKeys(): void;
  /** Every authorization code issued so far is past its expiry. */
  expireCodes(): number;
  /** Stops answering (connections refused) until `start`. */
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

export async function startTestIdp(
  options: { redirectUris?: string[]; port?: number } = {},
): Promise<TestIdp> {
  const store = new Store();
  const accounts = new Map<string, TestAccount>();
  const clientId = 'verbatim-test';
  const clientSecret = `secret-${randomUUID()}`;
  let keys = [newSigningKey()];
  let redirectUris = options.redirectUris ?? ['http://127.0.0.1/v1/auth/oidc/callback'];
  let port = options.port ?? 0;
  let issuer = '';
  let handler: http.RequestListener = (_req, res) => res.end();

  const build = () => {
    const provider = new Provider(issuer, {
      adapter: adapterOf(store),
      clients: [
        {
          client_id: clientId,
          client_secret: clientSecret,
          redirect_uris: redirectUris,
          grant_types: ['authorization_code'],
          response_types: ['code'],
          token_endpoint_auth_method: 'client_secret_basic',
        },
      ],
      jwks: { keys },
      pkce: { required: () => true },
      // The email and name in the ID token itself (a provider may also keep them for userinfo).
      conformIdTokenClaims: false,
      claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
      cookies: { keys: ['test-cookie-key-0123456789'] },
      features: { devInteractions: { enabled: true } },
      // A first-party client: consent is given without asking.
      loadExistingGrant: async (ctx: {
        oidc: {
          client: { clientId: string };
          session: { accountId: string };
          provider: {
            Grant: new (a: object) => {
              addOIDCScope(s: string): void;
              addOIDCClaims(c: string[]): void;
              save(): Promise<string>;
            };
          };
        };
      }) => {
        const grant = new ctx.oidc.provider.Grant({
          clientId: ctx.oidc.client.clientId,
          accountId: ctx.oidc.session.accountId,
        });
        grant.addOIDCScope('openid email profile');
        grant.addOIDCClaims(['email', 'email_verified', 'name']);
        await grant.save();
        return grant;
      },
      findAccount: async (_ctx: unknown, id: string) => {
        const account = accounts.get(id);
        if (!account) return undefined;
        return {
          accountId: id,
          claims: async () => ({
            sub: id,
            email: account.email,
            email_verified: account.emailVerified,
            name: account.name,
          }),
        };
      },
      ttl: {
        AuthorizationCode: 60,
        IdToken: 300,
        AccessToken: 300,
        Interaction: 600,
        Session: 600,
        Grant: 600,
      },
    });
    // Its "dev interactions" warnings are for production installs, not a test's provider.
    provider.on('server_error', () => undefined);
    handler = provider.callback();
  };

  const server = http.createServer((req, res) => handler(req, res));
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        port = (server.address() as AddressInfo).port;
        resolve();
      });
    });
  await listen();
  issuer = `http://127.0.0.1:${port}`;
  build();

  return {
    issuer,
    clientId,
    clientSecret,
    accounts,
    signingKid: () => String(keys[0]!.kid),
    setRedirectUris(uris) {
      redirectUris = uris;
      build();
    },
    rotateKeys() {
      keys = [newSigningKey()];
      build();
    },
    expireCodes() {
      let n = 0;
      for (const [k, v] of store.rows)
        if (k.startsWith('AuthorizationCode:')) {
          v.exp = Math.floor(Date.now() / 1000) - 1;
          n++;
        }
      return n;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
    start: listen,
    close: () =>
      new Promise<void>((resolve) => {
        if (!server.listening) return resolve();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A browser's cookie jar, enough for the provider's interaction cookies and our own. */
export class CookieJar {
  private readonly cookies = new Map<string, { value: string; path: string }>();

  take(res: Response): void {
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      const pathAttr = attrs.map((a) => a.trim()).find((a) => a.toLowerCase().startsWith('path='));
      const expired = attrs.some(
        (a) => /^expires=Thu, 01 Jan 1970/i.test(a.trim()) || /^max-age=0$/i.test(a.trim()),
      );
      const key = `${new URL(res.url).host} ${name}`;
      if (expired || value === '') this.cookies.delete(key);
      else this.cookies.set(key, { value, path: pathAttr ? pathAttr.slice(5) : '/' });
    }
  }

  header(url: string): string {
    const u = new URL(url);
    return [...this.cookies]
      .filter(([k, c]) => k.startsWith(`${u.host} `) && u.pathname.startsWith(c.path))
      .map(([k, c]) => `${k.split(' ')[1]}=${c.value}`)
      .join('; ');
  }

  get(host: string, name: string): string | undefined {
    return this.cookies.get(`${host} ${name}`)?.value;
  }

  set(host: string, name: string, value: string, path = '/'): void {
    this.cookies.set(`${host} ${name}`, { value, path });
  }
}

/** One request as a browser makes it: the jar's cookies, no automatic redirects. */
export async function browse(
  jar: CookieJar,
  url: string,
  init: { method?: string; form?: Record<string, string> } = {},
): Promise<Response> {
  const headers: Record<string, string> = {};
  const cookie = jar.header(url);
  if (cookie) headers.cookie = cookie;
  let body: string | undefined;
  if (init.form) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(init.form).toString();
  }
  const res = await fetch(url, { method: init.method ?? 'GET', headers, body, redirect: 'manual' });
  // fetch's Response.url is empty for manual redirects in some versions: keep the asked one.
  Object.defineProperty(res, 'url', { value: url });
  jar.take(res);
  return res;
}

/**
 * Signs in at the provider as `login` from the URL it was redirected to: follows its redirects,
 * submits its login form, and returns the URL it sends the browser back to (our callback).
 */
export async function loginAtProvider(jar: CookieJar, authorizeUrl: string, login: string): Promise<string> {
  let url = authorizeUrl;
  for (let hop = 0; hop < 10; hop++) {
    const res = await browse(jar, url);
    if (res.status >= 300 && res.status < 400) {
      const next = new URL(res.headers.get('location')!, url).href;
      if (!next.startsWith(new URL(authorizeUrl).origin)) return next;
      url = next;
      continue;
    }
    const html = await res.text();
    const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
    if (res.status !== 200 || !action)
      throw new Error(`the provider answered ${res.status}: ${html.slice(0, 300)}`);
    const submitted = await browse(jar, new URL(action.replace(/&amp;/g, '&'), url).href, {
      method: 'POST',
      form: { prompt: 'login', login, password: 'any' },
    });
    if (submitted.status < 300 || submitted.status >= 400)
      throw new Error(
        `the provider's login answered ${submitted.status}: ${(await submitted.text()).slice(0, 300)}`,
      );
    url = new URL(submitted.headers.get('location')!, url).href;
  }
  throw new Error('the provider never sent the browser back');
}
