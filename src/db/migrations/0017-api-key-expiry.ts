// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
-- S9: a key may be given an expiry; past it the key is refused like a revoked one.
alter table api_keys add column expires_at timestamptz;

-- GET /v1/api-keys and the last-key check: a workspace's keys.
create index api_keys_workspace on api_keys (workspace_id, created_at);
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop index api_keys_workspace;
alter table api_keys drop column expires_at;
`.execute(db);
}
