// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
-- R6: each workspace's bot recovery backstop runs every 15 minutes at its own stable offset, so
-- the workspaces of an installation do not all call the provider in the same minute.
create table bot_backstops (
  workspace_id uuid primary key references workspaces(id),
  next_run_at timestamptz not null,
  lease_owner text,
  lease_expires_at timestamptz,
  last_run_at timestamptz
);
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table bot_backstops;`.execute(db);
}
