import fs from 'node:fs';
import path from 'node:path';
import type { App } from '../app.ts';

/** Prints a new key once on stdout; only its hash is stored. */
export async function keysCreate(app: App, workspaceName: string): Promise<number> {
  const existing = await app.database.db
    .selectFrom('workspaces')
    .select('id')
    .where('name', '=', workspaceName)
    .orderBy('created_at')
    .executeTakeFirst();
  const workspaceId = existing?.id ?? (await app.workspaces.createWorkspace(workspaceName));
  const key = await app.workspaces.createApiKey(workspaceId, 'cli');
  process.stdout.write(`workspace ${workspaceName} (${workspaceId})\nAPI key (shown once): ${key.apiKey}\n`);
  return 0;
}

/**
 * On a fresh installation, creates a workspace and a key and writes the key to a file only the
 * owner can read, so the first command gives a working API without printing a secret to the log.
 */
export async function ensureFirstKey(app: App): Promise<string | null> {
  const any = await app.database.db.selectFrom('api_keys').select('id').limit(1).executeTakeFirst();
  if (any) return null;
  const workspaceId = await app.workspaces.createWorkspace('default');
  const key = await app.workspaces.createApiKey(workspaceId, 'first');
  const file = path.join(app.config.dataDir, 'first-api-key');
  fs.mkdirSync(app.config.dataDir, { recursive: true });
  fs.writeFileSync(file, `${key.apiKey}\n`, { mode: 0o600 });
  return file;
}
