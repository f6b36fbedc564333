// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 39 (P2). `/readyz` says whether every migration the running release knows is applied; the
// app's role may read the migrator's table for that (names and times only, nothing of a workspace).
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`grant select on table kysely_migration to verbatim_all_workspaces`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`revoke select on table kysely_migration from verbatim_all_workspaces`.execute(db);
}
