import fs from 'node:fs';
import { createSetupLink } from '../workspaces/sign-in.ts';
import path from 'node:path';
import type { App } from '../app.ts';
import { assertNever } from '../domain/errors.ts';

const out = (line = '') => process.stdout.write(`${line}\n`);

/** Prints a new key once on stdout; only its hash is stored. S9: optionally expiring. */
export async function keysCreate(
  app: App,
  workspaceName: string,
  opts: { label?: string; expiresInDays?: number } = {},
): Promise<number> {
  const workspaceId =
    (await app.workspaces.workspaceIdByName(workspaceName)) ??
    (await app.workspaces.createWorkspace(workspaceName));
  const expiresAt =
    opts.expiresInDays === undefined ? null : new Date(Date.now() + opts.expiresInDays * 86_400_000);
  const key = await app.workspaces.createApiKey(workspaceId, opts.label ?? 'cli', { expiresAt });
  process.stdout.write(
    `workspace ${workspaceName} (${workspaceId})\nkey id ${key.keyId}${expiresAt ? `, expires ${expiresAt.toISOString()}` : ''}\nAPI key (shown once): ${key.apiKey}\n`,
  );
  return 0;
}

/** S9: every key (or one workspace's) with its state; never a secret or a hash. */
export async function keysList(app: App, workspaceName?: string): Promise<number> {
  const names = new Map((await app.workspaces.listWorkspaces()).map((w) => [w.id, w.name]));
  const keys = (await app.workspaces.listApiKeys(null)).filter(
    (k) => workspaceName === undefined || names.get(k.workspaceId) === workspaceName,
  );
  const day = (iso: string | null) => (iso ? iso.replace(/\.\d+Z$/, 'Z') : '-');
  out(
    'id                                    workspace            label         status   created               last used             expires               revoked',
  );
  for (const k of keys) {
    out(
      [
        k.id.padEnd(37),
        (names.get(k.workspaceId) ?? k.workspaceId).slice(0, 20).padEnd(20),
        k.name.slice(0, 13).padEnd(13),
        k.status.padEnd(8),
        day(k.createdAt).padEnd(21),
        day(k.lastUsedAt).padEnd(21),
        day(k.expiresAt).padEnd(21),
        day(k.revokedAt),
      ].join(' '),
    );
  }
  if (keys.length === 0)
    out(workspaceName === undefined ? '(no keys)' : `(no keys in workspace ${workspaceName})`);
  return 0;
}

/** S9: the next request with the key gets 401. An operator may revoke a workspace's last key. */
export async function keysRevoke(app: App, keyId: string): Promise<number> {
  const result = await app.workspaces.revokeApiKey(keyId);
  switch (result.outcome) {
    case 'revoked':
      out(`revoked key ${result.key.id} (${result.key.name}) of workspace ${result.key.workspaceId}`);
      return 0;
    case 'already_revoked':
      out(`key ${result.key.id} was already revoked at ${result.key.revokedAt}`);
      return 0;
    case 'not_found':
      out(`no API key ${keyId} (see verbatim keys list)`);
      return 1;
    case 'last_key':
      // Only the API asks to keep the last key; the CLI never does.
      throw new Error('unexpected last_key outcome without keepOne');
    default:
      return assertNever(result, 'revoke outcome');
  }
}

/**
 * On a fresh installation, creates a workspace and a key and writes the key to a file only the
 * owner can read, so the first command gives a working API without printing a secret to the log.
 */
export async function ensureFirstKey(app: App): Promise<string | null> {
  if (await app.workspaces.anyApiKey()) return null;
  const workspaceId = await app.workspaces.createWorkspace('default');
  const key = await app.workspaces.createApiKey(workspaceId, 'first');
  const file = path.join(app.config.dataDir, 'first-api-key');
  fs.mkdirSync(app.config.dataDir, { recursive: true });
  fs.writeFileSync(file, `${key.apiKey}\n`, { mode: 0o600 });
  return file;
}

/**
 * U2: while no workspace has an owner, each start makes a fresh one-time setup link for the first
 * workspace (earlier ones void), valid VERBATIM_SETUP_LINK_HOURS, and writes it to a file only the
 * owner of the data dir can read. Returns the file, or null once an owner exists.
 */
export async function ensureSetupLink(app: App, baseUrl: string): Promise<string | null> {
  if (await app.people.people.anyOwner()) return null;
  const workspaces = await app.workspaces.listWorkspaces();
  const workspaceId = workspaces[0]?.id ?? (await app.workspaces.createWorkspace('default'));
  const link = await createSetupLink(app.people, workspaceId);
  const file = path.join(app.config.dataDir, 'setup-link');
  fs.mkdirSync(app.config.dataDir, { recursive: true });
  fs.writeFileSync(
    file,
    [
      `setup token: ${link.token}`,
      `valid until ${link.expiresAt.toISOString()}, used once: make the first owner in a browser at`,
      `  ${baseUrl}/#/join/${link.token}`,
      `or with`,
      `curl -X POST ${baseUrl}/v1/auth/links/redeem -H 'content-type: application/json' \\`,
      `  -d '{"token": "<the token>", "email": "you@example.com", "password": "<12 characters or more>"}'`,
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  fs.chmodSync(file, 0o600);
  return file;
}
