// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 14: a client whose create answer was lost sends the create again with the same
// Idempotency-Key and gets the meeting it already made, not a second one. The key is unique per
// workspace; meetings made without one are unaffected.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table meetings add column create_key text;
create unique index meetings_create_key on meetings (workspace_id, create_key) where create_key is not null;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop index meetings_create_key;
alter table meetings drop column create_key;
`.execute(db);
}
